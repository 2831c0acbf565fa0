// RemoteWait: a wait for a completion that arrives from another thread, with a deadline and a
// cancel scope (galay/detail/remote_wait.hpp).
#include "galay/detail/remote_wait.hpp"
#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

namespace galay::detail {

void RemoteWait::set_waiter(std::coroutine_handle<> h) {
    sched_ = &current_scheduler();
    waiter_ = h;
    interrupted_ = 0;
}

void RemoteWait::arm(CancelScope* scope) {
    if (deadline_ns_ != 0) {
        timer_.deadline_ns = deadline_ns_;
        timer_.on_fire = &RemoteWait::on_deadline;
        timer_.context = this;
        SchedulerAccess::arm_timer(*sched_, timer_);
    }
    scope_ = scope;
    if constexpr (GALAY_TASK_DUMP)
        set_since(SchedulerAccess::core(*sched_).coarse_ns_.load(std::memory_order_relaxed));
    if (scope != nullptr) scope->link(*this); // (calls cancel() at once if it was requested)
}

int RemoteWait::end_wait() noexcept {
    if (scope_ != nullptr) CancelScope::unlink(*this);
    scope_ = nullptr;
    if (timer_.armed()) SchedulerAccess::disarm_timer(*sched_, timer_);
    return interrupted_;
}

void RemoteWait::interrupt(int reason) noexcept {
    if (interrupted_ != 0 || !waiter_) return;
    if (!withdraw()) return; // the completion has the waiter: its post is on the way
    interrupted_ = reason;
    if (timer_.armed()) SchedulerAccess::disarm_timer(*sched_, timer_);
    SchedulerAccess::schedule(*sched_, waiter_);
}

void RemoteWait::on_deadline(TimerNode* n) {
    static_cast<RemoteWait*>(n->context)->interrupt(ETIMEDOUT);
}

} // namespace galay::detail
