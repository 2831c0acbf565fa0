// Runs in its own process with GALAY_FAKE_URING_PROBE=EPERM, set by main() before the first
// probe: the io_uring probe then fails as it does under kernel.io_uring_disabled=2.
#include <galay/galay.hpp>
#include <gtest/gtest.h>

using namespace galay;

TEST(BackendFallbackTest, ProbeReportsTheInjectedFailure) {
    const UringProbe& p = probe_io_uring();
    EXPECT_FALSE(p.usable);
    EXPECT_EQ(p.error, std::errc::operation_not_permitted);
    EXPECT_NE(p.reason.find("Operation not permitted"), std::string::npos) << p.reason;
}

TEST(BackendFallbackTest, AutoFallsBackToEpollAndSaysSo) {
    ::testing::internal::CaptureStderr();
    Scheduler s({.backend = Backend::automatic});
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(s.backend(), Backend::epoll);
    EXPECT_NE(err.find("falling back to epoll"), std::string::npos) << err;
    // The block_on loop works on the fallback.
    EXPECT_EQ(s.block_on([]() -> Task<int> { co_return 3; }()), 3);
}

TEST(BackendFallbackTest, ForcingIoUringIsAClearErrorNotASilentFallback) {
    ::testing::internal::CaptureStderr();
    try {
        Scheduler s({.backend = Backend::io_uring});
        ADD_FAILURE() << "a scheduler was created on a refused io_uring";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), std::errc::operation_not_permitted);
    }
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("io_uring was requested but cannot be used"), std::string::npos) << err;
}

int main(int argc, char** argv) {
    ::setenv("GALAY_FAKE_URING_PROBE", "EPERM", 1);
    ::unsetenv("GALAY_BACKEND");
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
