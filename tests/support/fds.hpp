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
#if !GALAY_HAVE_PIDFD
        // Without pidfds, the first child galay spawns makes the process-wide pipe that its
        // SIGCHLD handler wakes the child watch through, kept until the process exits: made here
        // first, it is not counted as this test's.
        if (!IsSkipped()) run(spawn_one());
#endif
        fds_before_ = open_fds();
    }
    static Task<void> spawn_one() {
        auto c = process::Command("true").spawn();
        if (c) (void)co_await c->wait();
    }
    void TearDown() override {
        if (!IsSkipped()) {
            EXPECT_EQ(open_fds(), fds_before_) << "a descriptor leaked";
        }
    }
    int fds_before_ = 0;
};

} // namespace galay::test
