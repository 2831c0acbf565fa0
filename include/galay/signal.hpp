// galay/signal.hpp: wait for a POSIX signal in a task.
//
//     auto stop = galay::signal({SIGINT, SIGTERM}); // catches them from here on
//     rt.block_on(galay::as_task(std::move(stop)));  // Result<int>: the signal that came
//     ...
//     auto r = co_await galay::signal(SIGHUP).timeout(10s);
//
// `galay::signal(s)` installs galay's handler for `s` (process-wide, once; it replaces what was
// there, SIG_DFL included: the signal no longer terminates the process) and returns an awaitable
// that completes when `s` arrives, with the signal's number. Every task waiting for a signal is
// woken by it; a signal that arrives while nobody waits is kept (once per signal number) for the
// next wait, so a signal sent between two waits is not lost. The handler is installed when
// `signal()` is called, not when it is awaited: call it before the moment from which the signal
// must be caught (before printing "ready", say). Cancellable and with `.timeout()` like every
// operation; an invalid signal number (SIGKILL, SIGSTOP, 0) gives `invalid_argument`.
//
// Why a handler rather than signalfd: signalfd only sees a signal that is blocked in every
// thread, and a process with a Runtime has worker threads, blocking-pool threads started at any
// time and whatever threads its libraries start; one of them left unblocked takes the default
// action (terminate). A handler runs on whichever thread the kernel picks; it only counts the
// signal and writes an eventfd (both async-signal-safe), and one dispatcher thread reads it and
// posts the waiting tasks to their workers. galay changes no thread's signal mask, so a process
// a task or a blocking job starts inherits the program's own (under ThreadSanitizer only, galay's
// threads leave the asynchronous signals to the dispatcher: src/runtime/thread_signals.hpp).
#pragma once

#include "galay/detail/remote_wait.hpp"
#include "galay/error.hpp"

#include <coroutine>
#include <cstdint>
#include <initializer_list>

namespace galay {

namespace detail {
class SignalAwaiter; // what `co_await galay::signal(...)` is (below)
} // namespace detail

/// Wait for `signo` (see the top of this header). Installs the handler now.
detail::SignalAwaiter signal(int signo);
/// Wait for any of `signos`; the result is the one that came.
detail::SignalAwaiter signal(std::initializer_list<int> signos);

namespace detail {

/// What `co_await galay::signal(...)` waits on -> Result<int>, the signal that came.
class [[nodiscard]] SignalAwaiter final : public TimedRemoteWait<SignalAwaiter> {
public:
    /// `mask`: bit s for signal s (1..63); `error`: an errno when installing failed.
    SignalAwaiter(std::uint64_t mask, int error) noexcept
        : mask_(mask)
        , error_(error) {}
    SignalAwaiter(SignalAwaiter&& o) noexcept
        : TimedRemoteWait<SignalAwaiter>(std::move(o))
        , mask_(o.mask_)
        , error_(o.error_) {}
    ~SignalAwaiter();

    bool await_ready() noexcept { return error_ != 0 || take_pending(); }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        set_waiter(h);
        if (!enlist()) return false; // one arrived meanwhile
        arm(scope_of(h));
        return true;
    }
    Result<int> await_resume() noexcept {
        const int why = end_wait();
        if (error_ != 0) return fail(error_);
        if (got_ != 0) return got_; // (arrived, even if a cancel came after)
        return fail(why != 0 ? why : ECANCELED);
    }

    // --- used by the dispatcher (under its lock) ---
    std::uint64_t mask() const noexcept { return mask_; }
    void deliver(int signo) noexcept; // unlinks and posts the waiter

private:
    friend struct SignalLinks;
    bool take_pending() noexcept;
    bool enlist();
    bool withdraw() noexcept override;

    std::uint64_t mask_;
    int error_;
    int got_ = 0;
    SignalAwaiter* prev_ = nullptr; // in the dispatcher's list of waiters (SignalLinks)
    SignalAwaiter* next_ = nullptr;
};

struct SignalLinks { // (detail/intrusive_list.hpp)
    static SignalAwaiter*& next(SignalAwaiter& w) noexcept { return w.next_; }
    static SignalAwaiter*& prev(SignalAwaiter& w) noexcept { return w.prev_; }
};

} // namespace detail

} // namespace galay
