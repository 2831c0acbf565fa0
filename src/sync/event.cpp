#include "galay/sync/event.hpp"

namespace galay {

bool Event::WaitAwaiter::enqueue() {
    std::lock_guard g(event_->lock_);
    if (event_->set_) return false;
    if (event_->permit_) {
        event_->permit_ = false;
        return false;
    }
    event_->waiters_.push_back(*this);
    return true;
}

void Event::set() noexcept {
    WakeList<WaitAwaiter> woken; // woken after the lock below is released
    std::lock_guard g(lock_);
    set_ = true;
    woken = waiters_.take_all();
}

void Event::reset() noexcept {
    std::lock_guard g(lock_);
    set_ = false;
}

bool Event::is_set() const noexcept {
    std::lock_guard g(lock_);
    return set_;
}

void Event::notify_one() noexcept {
    WaitAwaiter* w;
    {
        std::lock_guard g(lock_);
        w = waiters_.pop_front();
        if (w == nullptr) permit_ = true;
    }
    if (w != nullptr) w->wake();
}

void Event::notify_all() noexcept {
    WakeList<WaitAwaiter> woken;
    std::lock_guard g(lock_);
    woken = waiters_.take_all();
}

std::size_t Event::waiting() const noexcept {
    std::lock_guard g(lock_);
    return waiters_.size();
}

} // namespace galay
