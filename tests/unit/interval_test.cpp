// galay::Interval: ticks due on a fixed schedule from the start (no drift from the work between
// them), the three missed-tick policies after a whole period is missed, reset(), cancellation.
// The tests that make a tick late run on the paused clock (virtual time: a sleep jumps it
// exactly), so lateness is a known number of periods whatever the machine's load; the assertions
// are about the instants the ticks report, never about how long anything took.
#include "support/backends.hpp"

#include <chrono>

using namespace galay;
using namespace std::chrono_literals;

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kPeriod = 2ms;

/// The scheduler's clock (virtual under run_paused) as a time point.
Clock::time_point vnow() {
    return Clock::time_point(std::chrono::nanoseconds(Scheduler::now_ns()));
}
} // namespace

class IntervalTest : public test::BackendTest {};

TEST_P(IntervalTest, TicksAreDueOnTheScheduleFromTheStartNotFromTheLastTick) {
    run([&]() -> Task<void> {
        const auto start = Clock::now();
        Interval every(start, kPeriod);
        for (int k = 0; k < 5; ++k) {
            auto t = co_await every.tick();
            CO_ASSERT(t);
            EXPECT_EQ(*t, start + k * kPeriod);
            CO_ASSERT(Clock::now() >= *t); // never early
        }
        EXPECT_EQ(every.next_due(), start + 5 * kPeriod);
    }());
}

TEST_P(IntervalTest, BurstDeliversTheMissedTicksThenKeepsTheSchedule) {
    run_paused([&]() -> Task<void> {
        const auto start = vnow();
        Interval every(start, kPeriod, MissedTick::burst);
        CO_ASSERT(co_await every.tick());                // due at start
        (void)co_await sleep(3 * kPeriod + kPeriod / 2); // late by 3.5 periods
        for (int k = 1; k < 6; ++k) {
            auto t = co_await every.tick();
            CO_ASSERT(t);
            EXPECT_EQ(*t, start + k * kPeriod);
        }
    }());
}

TEST_P(IntervalTest, SkipDropsTheMissedTicksAndStaysOnTheSchedule) {
    run_paused([&]() -> Task<void> {
        const auto start = vnow();
        Interval every(start, kPeriod, MissedTick::skip);
        CO_ASSERT(co_await every.tick());
        const auto late = start + 3 * kPeriod + kPeriod / 2;
        (void)co_await sleep(late - vnow());  // now exactly `late`
        auto overdue = co_await every.tick(); // the tick due at start + period comes at once
        CO_ASSERT(overdue);
        EXPECT_EQ(*overdue, start + kPeriod);
        auto next = co_await every.tick();
        CO_ASSERT(next);
        EXPECT_GT(*next, late);                    // the missed ones are gone
        EXPECT_EQ((*next - start) % kPeriod, 0ns); // still on the schedule
    }());
}

TEST_P(IntervalTest, DelayShiftsTheScheduleAfterAMissedPeriod) {
    run_paused([&]() -> Task<void> {
        const auto start = vnow();
        Interval every(start, kPeriod, MissedTick::delay);
        CO_ASSERT(co_await every.tick());
        const auto late = start + 3 * kPeriod + kPeriod / 2;
        (void)co_await sleep(late - vnow()); // now exactly `late`
        auto overdue = co_await every.tick();
        CO_ASSERT(overdue);
        EXPECT_EQ(*overdue, start + kPeriod);
        auto next = co_await every.tick();
        CO_ASSERT(next);
        EXPECT_GE(*next, late + kPeriod); // a full period after the late tick was handled
        auto after = co_await every.tick();
        CO_ASSERT(after);
        EXPECT_GE(*after, *next + kPeriod); // the shifted schedule goes on from there
    }());
}

TEST_P(IntervalTest, ACancelledTickLeavesTheTickDueAndResetRestartsTheSchedule) {
    run([&]() -> Task<void> {
        Interval every(1h); // the second tick is far away
        CO_ASSERT(co_await every.tick());
        const auto due = every.next_due();
        auto ticker = [&]() -> Task<int> {
            auto t = co_await every.tick();
            co_return t ? 1 : (t.error() == std::errc::operation_canceled ? 2 : 3);
        };
        auto other = []() -> Task<int> {
            co_await yield_now();
            co_return 0;
        };
        auto r = co_await when_any(ticker(), other());
        CO_ASSERT(r.index() == 1);
        EXPECT_EQ(every.next_due(), due);
        auto timed = co_await galay::timeout(1ms, ticker());
        CO_ASSERT(!timed && timed.error() == std::errc::timed_out);
        const auto before = Clock::now();
        every.reset();
        EXPECT_GE(every.next_due(), before + 1h);
    }());
}

GALAY_INSTANTIATE_BACKENDS(IntervalTest);
