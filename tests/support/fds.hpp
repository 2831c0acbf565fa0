// How many descriptors this process has open, for the tests that check nothing leaked.
#pragma once

#include "support/backends.hpp"

#include <dirent.h>

namespace galay::test {

/// Open descriptors of this process (from /proc/self/fd), -1 when it cannot be read.
inline int open_fds() {
    int n = 0;
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) return -1;
    while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') ++n;
    ::closedir(d);
    return n - 1; // (the directory stream itself)
}

/// A backend test that fails when it leaves a descriptor open (counted before and after).
class FdCheckedTest : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        fds_before_ = open_fds();
    }
    void TearDown() override {
        if (!IsSkipped()) {
            EXPECT_EQ(open_fds(), fds_before_) << "a descriptor leaked";
        }
    }
    int fds_before_ = 0;
};

} // namespace galay::test
