// Which of galay's own threads take asynchronous signals.
//
// Runtime workers and blocking-pool threads block the process-directed asynchronous signals
// (SIGINT, SIGTERM, SIGHUP, ...): such a signal then goes to one of the program's own threads or
// to galay::signal's dispatcher (which unblocks them), never to a worker sleeping in
// epoll_pwait2/io_uring_enter. A worker is never interrupted (no EINTR in the event loop), and a
// handler runs on a thread that is in an ordinary blocking call. That matters under
// ThreadSanitizer, which defers a handler until the receiving thread enters one of its
// interceptors: delivered to a worker blocked in a raw io_uring_enter or epoll_pwait2, a SIGTERM
// could wait forever. Synchronous signals (SIGSEGV, SIGPIPE, ...) are not touched.
#pragma once

#include <pthread.h>

#include <csignal>

namespace galay::detail {

inline sigset_t async_signals() noexcept {
    sigset_t s;
    sigemptyset(&s);
    for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGWINCH})
        sigaddset(&s, sig);
    return s;
}

/// On a thread galay starts: leave the asynchronous signals to other threads.
inline void block_async_signals() noexcept {
    const sigset_t s = async_signals();
    ::pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

} // namespace galay::detail
