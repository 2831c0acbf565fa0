// Starting and cancelling an I/O operation (galay/detail/io_awaitable.hpp): the path every
// awaitable takes to its driver, its deadline and its cancel scope (steps in op_start.hpp).
#include "runtime/op_start.hpp"

#include "galay/detail/io_awaitable.hpp"
#include "galay/metrics.hpp"

namespace galay::detail {

void on_op_deadline(TimerNode* n) {
    auto* op = static_cast<IoOp*>(n->context);
    op->timed_out = true;
    cancel_op(*op);
}

bool start_op(IoOp& op, std::coroutine_handle<> h, CancelScope* scope, Cancellable& self) {
    SchedulerCore& s = SchedulerAccess::core(current_scheduler());
    reset_op(op, h);
    if (scope != nullptr && scope->requested()) {
        op.result = -ECANCELED;
        return false;
    }
    if (submit_op(s, op)) return yield_if_over_budget(s, h);
    SchedulerAccess::suspending(s, h, scope);
    if (scope != nullptr) {
        if constexpr (GALAY_TASK_DUMP) self.set_since(s.coarse_ns_.load(std::memory_order_relaxed));
        scope->link(self);
    }
    return true;
}

void describe_op(const IoOp& op, WaitDesc& d) noexcept {
    d.what = metrics::op_kind_name(op.code);
    d.fd = op.fd;
    d.bytes = op.len;
    d.deadline_ns = op.timer.armed() ? op.timer.deadline_ns : 0;
}

void cancel_op(IoOp& op) noexcept {
    if (!op.pending || op.cancelled) return;
    op.cancelled = true;
    SchedulerAccess::driver(current_scheduler()).cancel(op);
}

} // namespace galay::detail
