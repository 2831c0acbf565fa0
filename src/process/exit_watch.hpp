// Where there is no pidfd (the POSIX profile, macOS, FreeBSD): a child's exit is seen through a
// pipe whose write end galay closes when SIGCHLD arrives and waitid says the child has ended, so
// that the drivers wait for the child as for any readable descriptor. The SIGCHLD handler and
// the thread that checks the children are galay::signal's (src/runtime/signal.cpp).
#pragma once

#include "galay/detail/platform.hpp"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

namespace galay::detail {

/// Watch child `pid`: `write_fd` (the write end of a pipe, now owned here) is closed once the
/// child has ended, making the read end readable. 0, or an errno (then `write_fd` is closed).
int watch_exit(pid_t pid, int write_fd) noexcept;
/// Stop watching `pid` (closing its write end): before reaping it, so that a recycled pid is
/// never looked at.
void unwatch_exit(pid_t pid) noexcept;

/// waitid(P_PID) of child `pid`, reaping it only once it has ended (and then unwatched): 0 with
/// `info->si_pid` 0 while it runs, -1 with errno on failure. `block`: wait for it to end.
int reap_watched(pid_t pid, siginfo_t* info, bool block) noexcept;

} // namespace galay::detail
