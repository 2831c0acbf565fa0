// Starting and cancelling an I/O operation (galay/detail/io_awaitable.hpp): the path every
// awaitable takes to its driver, its deadline and its cancel scope.
#include "galay/detail/io_awaitable.hpp"
#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

namespace galay {

namespace detail {

void cancel_op(IoOp& op) noexcept;
namespace {
void on_op_deadline(TimerNode* n) {
    auto* op = static_cast<IoOp*>(n->context);
    op->timed_out = true;
    cancel_op(*op);
}
} // namespace

bool start_op(IoOp& op, std::coroutine_handle<> h, CancelScope* scope, Cancellable& self) {
    Scheduler& s = current_scheduler();
    op.waiter = h;
    op.result = 0;
    op.done = 0;
    op.timed_out = op.cancelled = false;
    if (scope != nullptr && scope->requested()) {
        op.result = -ECANCELED;
        return false;
    }
    if (SchedulerAccess::driver(s).submit(op)) {
        if (SchedulerAccess::take_inline_budget(s)) return false;
        s.schedule(h); // completed, but this coroutine has run long enough: yield once
        return true;
    }
    if (op.timer.deadline_ns != 0) {
        op.timer.on_fire = &on_op_deadline;
        op.timer.context = &op;
        SchedulerAccess::arm_timer(s, op.timer);
    }
    if (scope != nullptr) scope->link(self);
    return true;
}

void cancel_op(IoOp& op) noexcept {
    if (!op.pending || op.cancelled) return;
    op.cancelled = true;
    SchedulerAccess::driver(current_scheduler()).cancel(op);
}

} // namespace detail
} // namespace galay
