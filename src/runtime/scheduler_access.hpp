// What drivers and the library's own awaitables use of a Scheduler, and users do not: the driver,
// the timer heap, completing an op, and the budget of ops completed without suspending. Private
// members of Scheduler, reached through this friend (as Tokio keeps its driver `pub(crate)`), so
// that galay/runtime.hpp declares only what a user calls. Everything here is inline: no call
// costs more than the member function it replaces.
//
// Not user API: an awaitable written outside galay goes through galay/detail/io_awaitable.hpp
// (IoAwaitable, start_op, cancel_op) and Scheduler's public members (docs/driver.md).
#pragma once

#include "driver/driver.hpp"
#include "galay/runtime.hpp"

#include <cerrno>

namespace galay::detail {

struct SchedulerAccess {
    static Driver& driver(Scheduler& s) noexcept { return *s.driver_; }
    /// Times the run loop has polled the driver, and the most resumes between two polls while
    /// tasks keep waking tasks (tests).
    static std::uint64_t polls(const Scheduler& s) noexcept { return s.polls_; }
    static constexpr std::size_t poll_every() noexcept { return Scheduler::kPollEvery; }

    static void arm_timer(Scheduler& s, TimerNode& n) { s.timers_.push(n); }
    static void disarm_timer(Scheduler& s, TimerNode& n) noexcept { s.timers_.remove(n); }

    /// A driver finished `op`: stop its deadline, map a timed-out cancel, queue its waiter.
    static void complete(Scheduler& s, IoOp& op) {
        op.pending = false;
        if (op.timer.armed()) s.timers_.remove(op.timer);
        if (op.timed_out && op.result == -ECANCELED) op.result = -ETIMEDOUT;
        s.ready_.push_back(op.waiter);
        completed(s, op);
    }

    // --- observability ---
    static WorkerCounters& counters(Scheduler& s) noexcept { return s.counters_; }
    /// `op` goes to the driver: count it (and, with a paused clock, hold time while it is an op
    /// that finishes on its own).
    static void starting(Scheduler& s, const IoOp& op) noexcept {
        s.counters_.op_started(op);
        if (s.paused_ && finishes_on_its_own(op.code)) ++s.bounded_in_flight_;
    }
    /// `op` completed (at once, or later through complete()).
    static void completed(Scheduler& s, const IoOp& op) noexcept {
        s.counters_.op_completed(op);
        if (s.paused_ && finishes_on_its_own(op.code)) --s.bounded_in_flight_;
    }
    /// The coroutine `h` suspended on a leaf operation in `scope` (names its task for the
    /// stall detector and the hooks).
    static void suspending(Scheduler& s, std::coroutine_handle<> h, CancelScope* scope) noexcept {
        if (s.observer_ != nullptr) [[unlikely]] {
            s.suspended_h_ = h;
            s.suspended_scope_ = scope;
        }
    }
    /// Operations that end without a peer doing anything: the paused clock waits for them.
    static constexpr bool finishes_on_its_own(OpCode c) noexcept {
        switch (c) {
        case OpCode::connect:
        case OpCode::close:
        case OpCode::read_at:
        case OpCode::write_at:
        case OpCode::readv_at:
        case OpCode::writev_at:
        case OpCode::fsync:
        case OpCode::fdatasync:
        case OpCode::fallocate:
            return true;
        default:
            return false;
        }
    }

    /// Called when an op completed without suspending. Returns false when the coroutine has run
    /// long enough without yielding and must go to the back of the ready queue (fairness).
    static bool take_inline_budget(Scheduler& s) noexcept {
        return ++s.inline_completions_ < kInlineBudget;
    }

private:
    static constexpr unsigned kInlineBudget = 64;
};

} // namespace galay::detail
