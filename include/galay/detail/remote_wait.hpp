// A leaf wait that something outside the waiting coroutine completes (another worker finishing a
// task, a blocking-pool thread, the signal dispatcher) by posting the waiter back to its
// scheduler. It is the shape shared by `co_await join_handle`, `co_await spawn_blocking(f)` and
// `co_await galay::signal(SIGINT)`, and it gives them what every I/O operation has: cancellation
// through the task's scope and `.timeout(d)` / `.deadline(t)`.
//
// The protocol: the derived awaitable registers its waiter where the completer will find it,
// then calls `arm()`. A cancellation or deadline (always on the waiter's own thread) calls
// `withdraw()`: if the derived class can still take the waiter back, nobody else will resume it
// and the wait ends at once with ECANCELED / ETIMEDOUT; if not, the completer already holds it
// and its post is on the way, so the wait ends with the real outcome.
#pragma once

#include "galay/detail/cancel.hpp"
#include "galay/detail/in_place.hpp"
#include "galay/detail/io_op.hpp"
#include "galay/detail/wait_desc.hpp"
#include "galay/time/timeout.hpp"

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstdint>

namespace galay {
class Scheduler;
}

namespace galay::detail {

class RemoteWait : public Cancellable {
public:
    RemoteWait() = default;
    /// Only before it is awaited (e.g. when `as_task` takes it).
    RemoteWait(RemoteWait&& o) noexcept
        : deadline_ns_(o.deadline_ns_) {}
    RemoteWait& operator=(RemoteWait&&) = delete;

    void cancel() noexcept override { interrupt(ECANCELED); }
    void describe(WaitDesc& d) const noexcept override {
        d.what = "remote wait";
        d.deadline_ns = deadline_ns_;
    }

protected:
    ~RemoteWait() = default;

    /// Take the waiter back. True: nobody will resume it (the wait ends now); false: the
    /// completion already has it and will post it.
    virtual bool withdraw() noexcept = 0;

    /// Record the waiting coroutine and the current scheduler (before registering the waiter).
    void set_waiter(std::coroutine_handle<> h);
    /// After the waiter is registered: link into `scope` (a scope already cancelled interrupts
    /// the wait at once) and arm the deadline.
    void arm(CancelScope* scope);
    /// In await_resume: unlink, disarm. Returns 0, or ECANCELED / ETIMEDOUT when the wait was
    /// interrupted.
    int end_wait() noexcept;

    static std::int64_t steady_ns() noexcept {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }

    Scheduler* sched_ = nullptr;
    std::coroutine_handle<> waiter_;
    std::int64_t deadline_ns_ = 0; // 0: no deadline

private:
    void interrupt(int reason) noexcept;
    static void on_deadline(TimerNode* n);

    TimerNode timer_;
    CancelScope* scope_ = nullptr;
    int interrupted_ = 0;
};

/// Adds `.timeout(d)` and `.deadline(t)` to a RemoteWait, like IoAwaitable does for I/O.
template <class Derived>
class TimedRemoteWait : public RemoteWait, public AwaitedInPlace<Derived> {
public:
    TimedRemoteWait() = default;
    TimedRemoteWait(TimedRemoteWait&&) noexcept = default;

    /// Give up waiting after `d`: the wait ends with `std::errc::timed_out` (what it waited for
    /// goes on). An empty `d` (`galay::no_timeout`) arms nothing.
    Derived&& timeout(Timeout d) && {
        if (d) deadline_ns_ = steady_ns() + std::max<std::int64_t>(d.value().count(), 1);
        return static_cast<Derived&&>(*this);
    }
    /// Same, with an absolute steady-clock deadline.
    Derived&& deadline(std::chrono::steady_clock::time_point t) && {
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
        deadline_ns_ = ns > 0 ? ns : 1;
        return static_cast<Derived&&>(*this);
    }
};

} // namespace galay::detail
