#include "galay/time/interval.hpp"

namespace galay {

namespace {
std::int64_t to_ns(std::chrono::steady_clock::time_point t) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
} // namespace

Interval::Interval(std::chrono::steady_clock::time_point start, std::chrono::nanoseconds period,
                   MissedTick policy) noexcept
    : next_ns_(to_ns(start))
    , period_(period.count() > 0 ? period.count() : 1)
    , policy_(policy) {}

void Interval::reset() noexcept {
    next_ns_ = Scheduler::now_ns() + period_;
}

std::int64_t Interval::advance(std::int64_t now_ns) noexcept {
    const std::int64_t due = next_ns_;
    const std::int64_t following = due + period_;
    // Only a whole missed period counts as missed: timers always fire a little after their
    // deadline, and treating that as lateness would make `delay` drift by it every tick.
    if (now_ns < following) {
        next_ns_ = following;
        return due;
    }
    switch (policy_) {
    case MissedTick::burst:
        next_ns_ = following;
        break;
    case MissedTick::delay:
        next_ns_ = now_ns + period_;
        break;
    case MissedTick::skip:
        next_ns_ = due + ((now_ns - due) / period_ + 1) * period_;
        break;
    }
    return due;
}

} // namespace galay
