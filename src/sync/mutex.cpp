#include "galay/sync/mutex.hpp"

namespace galay {

bool Mutex::LockAwaiter::enqueue() {
    std::lock_guard g(mutex_->lock_);
    if (!mutex_->locked_) {
        mutex_->locked_ = true;
        return false;
    }
    mutex_->waiters_.push_back(*this);
    return true;
}

Mutex::Guard Mutex::try_lock() noexcept {
    std::lock_guard g(lock_);
    if (locked_) return Guard();
    locked_ = true;
    return Guard(*this);
}

void Mutex::unlock() noexcept {
    LockAwaiter* next;
    {
        std::lock_guard g(lock_);
        next = waiters_.pop_front(); // hand-off: stays locked, owned by `next` from now on
        if (next == nullptr) locked_ = false;
    }
    if (next != nullptr) next->wake();
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
