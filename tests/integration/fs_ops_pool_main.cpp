// main() of fs_ops_pool_tests: the io_uring probe says no for every filesystem-namespace opcode
// (set before the first probe), so the fs_ops tests run each op on the blocking pool.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
    ::setenv("GALAY_FAKE_URING_NO_OPS", "all", 1);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
