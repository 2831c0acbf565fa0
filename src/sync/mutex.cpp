// Mutex: FIFO hand-off locking, and who holds it (what a task dump names as the holder).
#include "galay/sync/mutex.hpp"

#include "galay/detail/spawned_task.hpp"

namespace galay {

bool Mutex::LockAwaiter::enqueue() {
    if constexpr (GALAY_TASK_DUMP) task_ = detail::task_id_of(wait_scope());
    std::lock_guard g(mutex_->lock_);
    if (!mutex_->locked_) {
        mutex_->locked_ = true;
        mutex_->holder_ = task_;
        return false;
    }
    mutex_->waiters_.push_back(*this);
    return true;
}

Mutex::Guard Mutex::try_lock() noexcept {
    std::lock_guard g(lock_);
    if (locked_) return Guard();
    locked_ = true;
    holder_ = 0; // (no task known here)
    return Guard(*this);
}

void Mutex::unlock() noexcept {
    LockAwaiter* next;
    {
        std::lock_guard g(lock_);
        next = waiters_.pop_front(); // hand-off: stays locked, owned by `next` from now on
        if (next == nullptr) locked_ = false;
        holder_ = next != nullptr ? next->task_ : 0;
    }
    if (next != nullptr) next->wake();
}

void Mutex::LockAwaiter::describe(detail::WaitDesc& d) const noexcept {
    WaiterBase::describe(d);
    d.what = "mutex";
    d.object = mutex_;
    d.object_name = mutex_->name_;
    std::lock_guard g(mutex_->lock_);
    d.holder = mutex_->holder_;
}

bool Mutex::is_locked() const noexcept {
    std::lock_guard g(lock_);
    return locked_;
}

std::size_t Mutex::waiting() const noexcept {
    std::lock_guard g(lock_);
    return waiters_.size();
}

} // namespace galay
