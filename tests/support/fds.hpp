// How many descriptors this process has open, for the tests that check nothing leaked, and how
// many it may open, for the tests that open thousands.
#pragma once

#include "support/backends.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstddef>

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

/// Raise the soft fd limit so that `needed` descriptors fit; returns how many do.
inline std::size_t fds_available(std::size_t needed) {
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < needed && rl.rlim_max > rl.rlim_cur) {
        rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, needed);
        ::setrlimit(RLIMIT_NOFILE, &rl);
        ::getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur;
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
