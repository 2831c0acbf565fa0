// Which threads take asynchronous signals, and why that differs under ThreadSanitizer.
//
// In a normal build galay changes no signal mask: a handler (galay::signal's included) runs on
// whichever thread the kernel picks, a worker asleep in epoll_pwait2/io_uring_enter simply gets
// EINTR and goes round its loop, and a process a task or a blocking-pool job starts (system(),
// posix_spawn, fork+exec) inherits the program's own mask. Blocking SIGTERM on galay's threads
// would leak into those children: exec keeps the mask, and a child with SIGTERM blocked cannot be
// stopped with it.
//
// Under ThreadSanitizer a handler runs at once only on a thread inside one of the calls TSan
// treats as blocking; anywhere else TSan defers it until that thread next passes through one of
// its interceptors. A worker asleep in a raw io_uring_enter or in epoll_pwait2 (neither
// intercepted) may never do so, and a SIGTERM sent to a program's main thread just after start
// was lost outright about 1 time in 10 (TSan's deferral; the same signal sent to the dispatcher
// thread: 0 in 30; tools whose main thread only waits block their stop signals there for that
// reason, see bench/programs/bench_server.cpp). So in a TSan build only, galay's threads block the
// asynchronous signals, and galay::signal's dispatcher thread takes them (it unblocks signals
// only while it waits in ppoll(2)).
#pragma once

#include <pthread.h>

#include <csignal>
#include <initializer_list>

#if defined(__SANITIZE_THREAD__)
#define GALAY_ROUTE_SIGNALS_TO_DISPATCHER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GALAY_ROUTE_SIGNALS_TO_DISPATCHER 1
#endif
#endif
#ifndef GALAY_ROUTE_SIGNALS_TO_DISPATCHER
#define GALAY_ROUTE_SIGNALS_TO_DISPATCHER 0
#endif

namespace galay::detail {

inline constexpr bool kRouteSignalsToDispatcher = GALAY_ROUTE_SIGNALS_TO_DISPATCHER != 0;

inline sigset_t async_signals() noexcept {
    sigset_t s;
    sigemptyset(&s);
    for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGWINCH})
        sigaddset(&s, sig);
    return s;
}

/// On a thread galay starts: under TSan only, leave the asynchronous signals to the dispatcher.
inline void block_async_signals() noexcept {
    if constexpr (kRouteSignalsToDispatcher) {
        const sigset_t s = async_signals();
        ::pthread_sigmask(SIG_BLOCK, &s, nullptr);
    }
}

} // namespace galay::detail
