// Where there is no pidfd (the POSIX profile, macOS, FreeBSD): a child's exit is seen through a
// pipe whose write end galay closes once waitid says the child has ended, so that the drivers
// wait for the child as for any readable descriptor. What makes galay look: SIGCHLD in the POSIX
// profile, kevent's NOTE_EXIT for that child on macOS and FreeBSD. The thread that looks is
// galay::signal's dispatcher (src/runtime/signal.cpp).
#pragma once

#include "galay/detail/platform.hpp"

// How galay::signal's dispatcher learns of signals and ended children (docs/driver.md, "Signals
// and children"). GALAY_SIGNAL_KQUEUE: it waits in kevent on a kqueue of its own, with
// EVFILT_PROC/NOTE_EXIT per watched child (macOS, FreeBSD); otherwise in ppoll on the handler's
// wake-up descriptor, and SIGCHLD makes it look at every child. GALAY_SIGNAL_FILTER: the signals
// are counted by EVFILT_SIGNAL and the handler only keeps their default action from running
// (FreeBSD); otherwise the handler counts them (macOS's EVFILT_SIGNAL does not see a signal sent
// to one thread, such as raise(3)'s).
#if defined(__APPLE__) || defined(__FreeBSD__)
#define GALAY_SIGNAL_KQUEUE 1
#else
#define GALAY_SIGNAL_KQUEUE 0
#endif
#if defined(__FreeBSD__)
#define GALAY_SIGNAL_FILTER 1
#else
#define GALAY_SIGNAL_FILTER 0
#endif

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
