// The steps of starting an I/O op, shared by start_op (one op: every IoAwaitable) and fs::Batch
// (N ops, one waiter), so that both reset, submit, arm deadlines and yield the same way.
#pragma once

#include "galay/detail/io_op.hpp"
#include "galay/scheduler.hpp"
#include "runtime/scheduler_access.hpp"

#include <coroutine>

namespace galay::detail {

/// What an op's deadline does when it fires: mark it timed out and cancel it (the scheduler then
/// maps its -ECANCELED to -ETIMEDOUT).
void on_op_deadline(TimerNode* n);

/// Clear what an earlier run of `op` left and name the coroutine its completion resumes.
inline void reset_op(IoOp& op, std::coroutine_handle<> waiter) noexcept {
    op.waiter = waiter;
    op.result = 0;
    op.done = 0;
    op.timed_out = op.cancelled = false;
}

/// Hand `op` to the driver. True when it completed at once; otherwise it is pending and its
/// deadline (`op.timer.deadline_ns`, 0: none) is armed.
inline bool submit_op(SchedulerCore& c, IoOp& op) {
    SchedulerAccess::starting(c, op);
    if (SchedulerAccess::driver(c).submit(op)) {
        SchedulerAccess::completed(c, op);
        return true;
    }
    if (op.timer.deadline_ns != 0) {
        op.timer.on_fire = &on_op_deadline;
        op.timer.context = &op;
        SchedulerAccess::arm_timer(c, op.timer);
    }
    return false;
}

/// `h`'s ops completed without suspending. Returns whether `h` must suspend: false, it goes on at
/// once; true when it has run long enough without yielding and was queued behind the others,
/// to go on after the driver's next poll (the other connections' completions come first).
inline bool yield_if_over_budget(SchedulerCore& c, std::coroutine_handle<> h) {
    if (SchedulerAccess::take_inline_budget(c)) return false;
    c.schedule_after_poll(h);
    return true;
}

} // namespace galay::detail
