// The public way to write an awaitable of one's own (galay/sync/waiter.hpp): the header's example,
// compiled from the header itself, used the way the header shows, within one thread and across
// threads, cancelled, timed out, and racing its wake-up against a deadline.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <galay/sync/waiter.hpp>

#include <mutex>
#include <optional>
#include <utility>

using namespace galay;
using namespace std::chrono_literals;

namespace {
#include "waiter_example.inc" // class IntSlot, extracted from the header's opening comment
} // namespace

class WaiterTest : public test::BackendTest {};

TEST_P(WaiterTest, HeaderExampleHandsAValueToAWaitingTask) {
    auto r = run([]() -> Task<Result<int>> {
        IntSlot slot;
        auto putter = [&]() -> Task<void> {
            slot.put(42);
            co_return;
        };
        auto [got, _] = co_await when_all(
            [&]() -> Task<Result<int>> {
                galay::Result<int> r = co_await slot.take().timeout(1s); // as in the header
                co_return r;
            }(),
            putter());
        co_return got;
    }());
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 42);
}

TEST_P(WaiterTest, AValuePutFirstIsTakenWithoutWaiting) {
    auto r = run([]() -> Task<Result<int>> {
        IntSlot slot;
        slot.put(7);
        co_return co_await slot.take();
    }());
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 7);
}

TEST_P(WaiterTest, TimesOutAndLeavesNoWaiterBehind) {
    run([]() -> Task<void> {
        IntSlot slot;
        auto r = co_await slot.take().timeout(1ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        // A waiter left on the list would receive this value into a dead frame (ASan) and the
        // next take would wait forever.
        slot.put(5);
        auto again = co_await slot.take().timeout(10s);
        CO_ASSERT(again);
        EXPECT_EQ(*again, 5);
        auto past = co_await slot.take().deadline(std::chrono::steady_clock::now() - 1s);
        CO_ASSERT(!past);
        EXPECT_EQ(past.error(), std::errc::timed_out);
    }());
}

TEST_P(WaiterTest, WhenAnyLoserAndCancelSourceCancelTheWait) {
    run([]() -> Task<void> {
        IntSlot slot;
        auto r = co_await when_any(as_task(slot.take()), sleep(1ms));
        CO_ASSERT(r.index() == 1);

        CancelSource src;
        auto waiter = with_cancel(src, as_task(slot.take()));
        auto canceller = [&]() -> Task<void> {
            src.cancel();
            co_return;
        };
        auto [got, _] = co_await when_all(std::move(waiter), canceller());
        CO_ASSERT(!got);
        EXPECT_EQ(got.error(), std::errc::operation_canceled);
        // A task already cancelled fails its next wait at once, as its I/O would.
        auto later = co_await with_cancel(src, as_task(slot.take()));
        CO_ASSERT(!later);
        EXPECT_EQ(later.error(), std::errc::operation_canceled);
        slot.put(1); // nobody left waiting: it stays in the slot
        auto kept = co_await slot.take();
        CO_ASSERT(kept && *kept == 1);
    }());
}

TEST_P(WaiterTest, AWakeThatWonTheRaceIsKeptWhenTheCancellationComesAfter) {
    // Same thread, deterministic: the value is handed to the waiter (taken off the list), then its
    // task is cancelled before it resumes. The hand-off wins: the value is not lost.
    run([]() -> Task<void> {
        IntSlot slot;
        CancelSource src;
        auto waiter = with_cancel(src, as_task(slot.take()));
        auto other = [&]() -> Task<void> {
            slot.put(9);  // pops the waiter, schedules it
            src.cancel(); // too late for it
            co_return;
        };
        auto [got, _] = co_await when_all(std::move(waiter), other());
        CO_ASSERT(got);
        EXPECT_EQ(*got, 9);
    }());
}

TEST_P(WaiterTest, PutFromAPlainThreadWakesATaskOnAScheduler) {
    IntSlot slot;
    std::thread putter([&] { slot.put(11); });
    auto r = run([&]() -> Task<Result<int>> { co_return co_await slot.take().timeout(30s); }());
    putter.join();
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 11);
}

TEST_P(WaiterTest, AcrossThreadsEveryValueArrivesWhileDeadlinesRaceTheWakeUps) {
    // One thread puts 1..N, one at a time, each after the previous one was taken; the other takes
    // with a deadline that expires about when the put arrives. Whichever wins, no value is lost:
    // a timed-out take leaves the value for the next one.
    constexpr int kRounds = 2000;
    IntSlot slot;
    std::atomic<int> taken{0};
    long long sum = 0;
    int timeouts = 0;
    test::run_on_threads(
        options(),
        [&]() -> Task<void> {
            unsigned attempt = 0;
            for (int i = 1; i <= kRounds; ++i) {
                for (;;) {
                    auto r = co_await slot.take().timeout(test::racing_timeout(attempt));
                    if (r) {
                        sum += *r;
                        break;
                    }
                    CO_ASSERT(r.error() == std::errc::timed_out);
                    ++timeouts;
                }
                taken.store(i, std::memory_order_release);
            }
        }(),
        [&]() -> Task<void> {
            for (int i = 1; i <= kRounds; ++i) {
                slot.put(i);
                while (taken.load(std::memory_order_acquire) != i)
                    co_await yield_now();
            }
        }());
    EXPECT_EQ(sum, static_cast<long long>(kRounds) * (kRounds + 1) / 2);
    RecordProperty("timeouts", timeouts);
}

GALAY_INSTANTIATE_BACKENDS(WaiterTest);
