#include "galay/time/sleep.hpp"

#include "galay/detail/wait_desc.hpp"
#include "runtime/scheduler_access.hpp"

namespace galay {
namespace detail {

bool SleepAwaiter::suspend(std::coroutine_handle<> h, CancelScope* scope) {
    if (scope != nullptr && scope->requested()) {
        cancelled_ = true;
        return false;
    }
    SchedulerCore& s = SchedulerAccess::core(current_scheduler());
    waiter_ = h;
    node_.on_fire = &SleepAwaiter::fire;
    node_.context = this;
    SchedulerAccess::arm_timer(s, node_);
    SchedulerAccess::suspending(s, h, scope);
    scope_ = scope;
    if constexpr (GALAY_TASK_DUMP) set_since(s.coarse_ns_.load(std::memory_order_relaxed));
    if (scope != nullptr) scope->link(*this);
    return true;
}

void SleepAwaiter::describe(WaitDesc& d) const noexcept {
    d.what = "sleep";
    d.deadline_ns = node_.deadline_ns;
}

void SleepAwaiter::fire(TimerNode* n) {
    auto* self = static_cast<SleepAwaiter*>(n->context);
    SchedulerAccess::schedule(current_scheduler(), self->waiter_);
}

void SleepAwaiter::cancel() noexcept {
    if (!node_.armed()) return; // already fired: the waiter is queued
    Scheduler& s = current_scheduler();
    SchedulerAccess::disarm_timer(s, node_);
    cancelled_ = true;
    SchedulerAccess::schedule(s, waiter_);
}

} // namespace detail

Task<Result<void>> sleep_until(std::chrono::steady_clock::time_point t) {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    co_return co_await detail::SleepAwaiter(ns);
}

Task<Result<void>> sleep(std::chrono::nanoseconds d) {
    co_return co_await detail::SleepAwaiter(Scheduler::now_ns() + d.count());
}

} // namespace galay
