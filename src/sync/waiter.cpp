#include "galay/sync/waiter.hpp"

#include "runtime/scheduler_access.hpp"

namespace galay {
namespace detail {

void WaitListBase::push(WaiterBase& w) {
    // Written by the waiting thread before the waiter becomes visible to a completing thread
    // (which reads them under the lock), and read later only by the waiting thread.
    w.sched_ = &current_scheduler();
    w.list_ = this;
    w.state_ = WaiterBase::State::queued;
    waiters_.push_back(w);
}

WaiterBase* WaitListBase::pop() noexcept {
    WaiterBase* w = waiters_.pop_front();
    if (w != nullptr) w->state_ = WaiterBase::State::woken;
    return w;
}

void WaitListBase::pop_all(WaiterChain& out) noexcept {
    for (WaiterBase* w = waiters_.front(); w != nullptr; w = WaiterChain::next(*w))
        w->state_ = WaiterBase::State::woken;
    out.splice_back(waiters_);
}

} // namespace detail

WaiterBase::~WaiterBase() {
    withdraw_if_destroyed_waiting();
    if (timer_.armed()) detail::SchedulerAccess::disarm_timer(*sched_, timer_);
}

void WaiterBase::disarm_deadline() noexcept {
    detail::SchedulerAccess::disarm_timer(*sched_, timer_);
}

void WaiterBase::withdrawn(WakeList<WaiterBase>&) noexcept {}

void WaiterBase::wake() noexcept {
    // Read both before handing the coroutine over: once posted it may run (and its frame, this
    // waiter with it, end) on its own thread at any moment.
    Scheduler* s = sched_;
    std::coroutine_handle<> h = handle_;
    if (s == Scheduler::current())
        detail::SchedulerAccess::schedule(*s, h);
    else
        detail::SchedulerAccess::core(*s).post(h);
}

bool WaiterBase::withdraw() noexcept {
    if (list_ == nullptr) return false;
    WakeList<WaiterBase> ready; // woken after the lock below is released
    std::lock_guard g(*list_->lock_);
    if (state_ != State::queued) return false;
    list_->waiters_.remove(*this);
    state_ = State::aborted;
    withdrawn(ready);
    return true;
}

void WaiterBase::abort(Outcome why) noexcept {
    // Runs on the waiting task's thread (its cancel scope and its timers live there). When the
    // completing side already took this waiter off the list, its wake-up is on the way and wins.
    if (!withdraw()) return;
    outcome_ = why;
    if (timer_.armed()) detail::SchedulerAccess::disarm_timer(*sched_, timer_);
    detail::SchedulerAccess::schedule(*sched_, handle_);
}

void WaiterBase::cancel() noexcept {
    abort(Outcome::cancelled);
}

void WaiterBase::on_deadline(detail::TimerNode* n) {
    static_cast<WaiterBase*>(n->context)->abort(Outcome::timed_out);
}

void WaiterBase::suspended(detail::CancelScope* scope) {
    if constexpr (GALAY_TASK_DUMP)
        set_since(
            detail::SchedulerAccess::core(*sched_).coarse_ns_.load(std::memory_order_relaxed));
    if (timer_.deadline_ns != 0) {
        timer_.on_fire = &WaiterBase::on_deadline;
        timer_.context = this;
        detail::SchedulerAccess::arm_timer(*sched_, timer_);
    }
    if (scope != nullptr) scope->link(*this);
}

} // namespace galay
