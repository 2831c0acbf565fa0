// What drivers and the library's own awaitables use of a Scheduler, and users do not: the driver,
// the timer heap, completing an op, and the budget of ops completed without suspending. They are
// the Scheduler's state (SchedulerCore, scheduler_core.hpp), reached through this friend of
// Scheduler (as Tokio keeps its driver `pub(crate)`), so that galay/scheduler.hpp declares only
// what a user calls. Everything here is inline: a call costs the load of the state's pointer and
// no more than the member function it replaces.
//
// Not user API: an awaitable written outside galay goes through galay/detail/io_awaitable.hpp
// (IoAwaitable, start_op, cancel_op) and Scheduler's public members (docs/driver.md).
#pragma once

#include "driver/driver.hpp"
#include "runtime/scheduler_core.hpp"

#include <cerrno>

namespace galay::detail {

struct SchedulerAccess {
    /// The state behind `s`.
    static SchedulerCore& core(Scheduler& s) noexcept { return *s.core_; }
    static const SchedulerCore& core(const Scheduler& s) noexcept { return *s.core_; }

    static Driver& driver(Scheduler& s) noexcept { return *core(s).driver_; }
    static Driver& driver(SchedulerCore& c) noexcept { return *c.driver_; }
    /// Times the run loop has polled the driver, and the most resumes between two polls while
    /// tasks keep waking tasks (tests).
    static std::uint64_t polls(const Scheduler& s) noexcept { return core(s).polls_; }
    static constexpr std::size_t poll_every() noexcept { return SchedulerCore::kPollEvery; }

    /// Resume `h` from the loop of `s` (its thread only): Scheduler::schedule without the call.
    static void schedule(Scheduler& s, std::coroutine_handle<> h) { core(s).schedule(h); }
    /// Run `call` on the thread of `s` (any thread).
    static void post(Scheduler& s, RemoteCall& call) { core(s).post(call); }

    static void arm_timer(Scheduler& s, TimerNode& n) { core(s).timers_.push(n); }
    static void arm_timer(SchedulerCore& c, TimerNode& n) { c.timers_.push(n); }
    static void disarm_timer(Scheduler& s, TimerNode& n) noexcept { core(s).timers_.remove(n); }

    /// A driver finished `op`: stop its deadline, map a timed-out cancel, queue its waiter.
    static void complete(Scheduler& s, IoOp& op) {
        SchedulerCore& c = core(s);
        op.pending = false;
        if (op.timer.armed()) c.timers_.remove(op.timer);
        if (op.timed_out && op.result == -ECANCELED) op.result = -ETIMEDOUT;
        c.ready_.push_back(op.waiter);
        completed(c, op);
    }

    // --- observability ---
    static WorkerCounters& counters(Scheduler& s) noexcept { return core(s).counters_; }
    static const WorkerCounters& counters(const Scheduler& s) noexcept { return core(s).counters_; }
    // The per-op steps take the state itself: start_op loads the Scheduler's pointer once, not
    // again after each call into the driver.
    /// `op` goes to the driver: count it (and, with a paused clock, hold time while it is an op
    /// that finishes on its own).
    static void starting(SchedulerCore& c, const IoOp& op) noexcept {
        c.counters_.op_started(op);
        if (c.paused_ && finishes_on_its_own(op.code)) ++c.bounded_in_flight_;
    }
    /// `op` completed (at once, or later through complete()).
    static void completed(Scheduler& s, const IoOp& op) noexcept { completed(core(s), op); }
    static void completed(SchedulerCore& c, const IoOp& op) noexcept {
        c.counters_.op_completed(op);
        if (c.paused_ && finishes_on_its_own(op.code)) --c.bounded_in_flight_;
    }
    /// The coroutine `h` suspended on a leaf operation in `scope` (names its task for the
    /// stall detector and the hooks).
    static void suspending(SchedulerCore& c, std::coroutine_handle<> h,
                           CancelScope* scope) noexcept {
        if (c.observer_ != nullptr) [[unlikely]] {
            c.suspended_h_ = h;
            c.suspended_scope_ = scope;
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
    static bool take_inline_budget(SchedulerCore& c) noexcept {
        return ++c.inline_completions_ < kInlineBudget;
    }

private:
    static constexpr unsigned kInlineBudget = 64;
};

} // namespace galay::detail
