#include "galay/sync/rwlock.hpp"

namespace galay {

bool RwLock::LockAwaiter::enqueue() {
    std::lock_guard g(lock_->lock_);
    RwLock& l = *lock_;
    // A waiter already queued goes first, so nobody barges past it.
    if (l.waiters_.empty() && !l.writer_ && (!write_ || l.readers_ == 0)) {
        if (write_)
            l.writer_ = true;
        else
            ++l.readers_;
        return false;
    }
    l.waiters_.push_back(*this);
    return true;
}

void RwLock::LockAwaiter::withdrawn(WakeList<WaiterBase>& wake_after) noexcept {
    // A writer leaving the head of the queue may have been all that held readers back.
    lock_->grant_locked(wake_after);
}

template <class List>
void RwLock::grant_locked(List& out) noexcept {
    while (LockAwaiter* w = waiters_.front()) {
        if (writer_ || (w->write_ && readers_ != 0)) return;
        waiters_.pop_front();
        out.push_back(*w);
        if (w->write_) {
            writer_ = true;
            return;
        }
        ++readers_;
    }
}

RwLock::Guard RwLock::try_read() noexcept {
    std::lock_guard g(lock_);
    if (writer_ || !waiters_.empty()) return Guard();
    ++readers_;
    return Guard(*this, false);
}

RwLock::Guard RwLock::try_write() noexcept {
    std::lock_guard g(lock_);
    if (writer_ || readers_ != 0 || !waiters_.empty()) return Guard();
    writer_ = true;
    return Guard(*this, true);
}

void RwLock::unlock_read() noexcept {
    WakeList<LockAwaiter> woken; // woken after the lock below is released
    std::lock_guard g(lock_);
    --readers_;
    grant_locked(woken);
}

void RwLock::unlock_write() noexcept {
    WakeList<LockAwaiter> woken;
    std::lock_guard g(lock_);
    writer_ = false;
    grant_locked(woken);
}

std::size_t RwLock::readers() const noexcept {
    std::lock_guard g(lock_);
    return readers_;
}

bool RwLock::is_write_locked() const noexcept {
    std::lock_guard g(lock_);
    return writer_;
}

std::size_t RwLock::waiting() const noexcept {
    std::lock_guard g(lock_);
    return waiters_.size();
}

} // namespace galay
