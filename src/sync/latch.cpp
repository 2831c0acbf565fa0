// Latch and Barrier (galay/sync/latch.hpp).
#include "galay/sync/latch.hpp"

#include <algorithm>

namespace galay {

bool Latch::WaitAwaiter::enqueue() {
    std::lock_guard g(latch_->lock_);
    if (latch_->count_ == 0) return false;
    latch_->waiters_.push_back(*this);
    return true;
}

void Latch::count_down(std::size_t n) noexcept {
    WakeList<WaitAwaiter> woken; // woken after the lock below is released
    std::lock_guard g(lock_);
    if (count_ == 0) return;
    count_ -= std::min(n, count_);
    if (count_ == 0) woken = waiters_.take_all();
}

bool Latch::try_wait() const noexcept {
    std::lock_guard g(lock_);
    return count_ == 0;
}

std::size_t Latch::count() const noexcept {
    std::lock_guard g(lock_);
    return count_;
}

bool Barrier::ArriveAwaiter::enqueue() {
    WakeList<ArriveAwaiter> woken;
    std::lock_guard g(barrier_->lock_);
    if (barrier_->arrive(woken)) return false; // the last: the others go, this one too
    barrier_->waiters_.push_back(*this);
    return true;
}

bool Barrier::arrive(WakeList<ArriveAwaiter>& woken) noexcept {
    if (--left_ != 0) return false;
    ++phase_;
    left_ = count_;
    woken = waiters_.take_all();
    return true;
}

void Barrier::arrive_and_drop() noexcept {
    WakeList<ArriveAwaiter> woken;
    std::lock_guard g(lock_);
    // Dropped from the later phases first, so that a phase this completes starts with the new
    // count.
    if (count_ > 1) --count_;
    arrive(woken);
}

std::uint64_t Barrier::phase() const noexcept {
    std::lock_guard g(lock_);
    return phase_;
}

} // namespace galay
