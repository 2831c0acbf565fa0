#include "galay/sync/semaphore.hpp"

namespace galay {

bool Semaphore::AcquireAwaiter::enqueue() {
    std::lock_guard g(sem_->lock_);
    if (sem_->waiters_.empty() && sem_->permits_ >= need_) {
        sem_->permits_ -= need_;
        return false;
    }
    sem_->waiters_.push_back(*this);
    return true;
}

void Semaphore::AcquireAwaiter::withdrawn(WakeList<WaiterBase>& wake_after) noexcept {
    sem_->grant(wake_after); // it may have been the head holding smaller requests back
}

void Semaphore::grant(WakeList<WaiterBase>& woken) noexcept {
    for (AcquireAwaiter* head = waiters_.front(); head != nullptr && head->need_ <= permits_;
         head = waiters_.front()) {
        permits_ -= head->need_;
        woken.push_back(*waiters_.pop_front());
    }
}

bool Semaphore::try_acquire(std::size_t n) noexcept {
    std::lock_guard g(lock_);
    if (!waiters_.empty() || permits_ < n) return false;
    permits_ -= n;
    return true;
}

void Semaphore::release(std::size_t n) noexcept {
    WakeList<WaiterBase> woken; // woken after the lock below is released
    std::lock_guard g(lock_);
    permits_ += n;
    grant(woken);
}

std::size_t Semaphore::available() const noexcept {
    std::lock_guard g(lock_);
    return permits_;
}

std::size_t Semaphore::waiting() const noexcept {
    std::lock_guard g(lock_);
    return waiters_.size();
}

} // namespace galay
