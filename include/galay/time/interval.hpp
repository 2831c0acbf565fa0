// galay/time/interval.hpp: a periodic tick that does not drift.
//
//     galay::Interval every(1s, galay::MissedTick::skip); // the first tick is due at once
//     for (;;) {
//         auto t = co_await every.tick();     // Result<steady_clock::time_point>: when it was due
//         if (!t) break;                      // operation_canceled: the task was cancelled
//         check_health();
//     }
//
// Ticks are due at start, start + period, start + 2 * period, ... measured from when the
// interval was made, not from when the previous tick was handled, so the work done between
// ticks does not make them drift (a `sleep(period)` loop drifts by that much every round).
// `tick()` waits until the next tick is due and gives the instant it was due. When a tick is
// handled so late that the one after it is due already (a whole period missed), the policy
// decides what follows:
// - `burst` (the default): the missed ticks come at once, back to back, then the schedule goes on;
// - `delay`: the next tick is a full period after now, and the schedule is shifted by that much;
// - `skip`: the missed ticks are dropped; the next is the first one of the schedule still ahead.
// A tick is a timer on the current scheduler (no thread, no allocation); it is cancellable like
// a sleep (`operation_canceled`, and the tick stays due). One task ticks an interval at a time.
#pragma once

#include "galay/time/sleep.hpp"

#include <chrono>
#include <cstdint>

namespace galay {

/// What an Interval does after a tick that was handled a whole period late (see the top of
/// galay/time/interval.hpp).
enum class MissedTick {
    burst, ///< the missed ticks come at once, then the schedule goes on
    delay, ///< the next tick is a period after now; the schedule shifts
    skip,  ///< the missed ticks are dropped; the next is the next one of the schedule
};

/// A periodic tick on the steady clock (see the top of this header).
class Interval {
public:
    /// The awaitable of `tick()`: `Result<std::chrono::steady_clock::time_point>`.
    class [[nodiscard]] TickAwaiter {
    public:
        /// The next tick of `iv` (made by `Interval::tick`).
        explicit TickAwaiter(Interval& iv) noexcept
            : iv_(&iv)
            , sleep_(iv.next_ns_) {}
        /// Awaiter protocol: a timer, even for a tick already due (the task yields once).
        bool await_ready() const noexcept { return false; }
        /// Awaiter protocol: arms the timer on the current scheduler.
        template <class P>
        bool await_suspend(std::coroutine_handle<P> h) {
            return sleep_.await_suspend(h);
        }
        /// Awaiter protocol: the instant the tick was due; the interval moves to the next one.
        Result<std::chrono::steady_clock::time_point> await_resume() noexcept {
            if (auto r = sleep_.await_resume(); !r) return std::unexpected(r.error());
            return std::chrono::steady_clock::time_point(
                std::chrono::nanoseconds(iv_->advance(Scheduler::now_ns())));
        }

    private:
        Interval* iv_;
        detail::SleepAwaiter sleep_;
    };

    /// Ticks every `period` (at least 1 ns), the first one due now.
    explicit Interval(std::chrono::nanoseconds period, MissedTick policy = MissedTick::burst)
        : Interval(std::chrono::steady_clock::now(), period, policy) {}
    /// Ticks every `period`, the first one due at `start`.
    Interval(std::chrono::steady_clock::time_point start, std::chrono::nanoseconds period,
             MissedTick policy = MissedTick::burst) noexcept;

    /// Wait for the next tick; gives the instant it was due (`operation_canceled` when the task
    /// is cancelled, and the tick stays due).
    TickAwaiter tick() noexcept { return TickAwaiter(*this); }
    /// Start the schedule again: the next tick is due one period from now.
    void reset() noexcept;
    /// When the next tick is due.
    std::chrono::steady_clock::time_point next_due() const noexcept {
        return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next_ns_));
    }
    /// The period.
    std::chrono::nanoseconds period() const noexcept { return std::chrono::nanoseconds(period_); }
    /// The missed-tick policy.
    MissedTick policy() const noexcept { return policy_; }

private:
    // The tick due now is handled at `now_ns`: returns its instant and schedules the next.
    std::int64_t advance(std::int64_t now_ns) noexcept;

    std::int64_t next_ns_;
    std::int64_t period_;
    MissedTick policy_;
};

/// `Interval(period, policy)`: ticks every `period`, the first one due now.
inline Interval interval(std::chrono::nanoseconds period, MissedTick policy = MissedTick::burst) {
    return Interval(period, policy);
}

} // namespace galay
