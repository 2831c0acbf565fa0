// How many descriptors this process has open, for the tests that check nothing leaked.
#pragma once

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

} // namespace galay::test
