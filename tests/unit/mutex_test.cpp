// galay::Mutex: FIFO hand-off, cancellation and deadlines, within one scheduler and across threads.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <vector>

using namespace galay;
using namespace std::chrono_literals;

class MutexTest : public test::BackendTest {};

TEST_P(MutexTest, LocksAndUnlocksWithAGuard) {
    Mutex m;
    run([&]() -> Task<void> {
        {
            auto g = co_await m.lock();
            CO_ASSERT(g);
            EXPECT_TRUE(g->owns_lock());
            EXPECT_TRUE(m.is_locked());
            EXPECT_FALSE(m.try_lock().owns_lock());
        }
        EXPECT_FALSE(m.is_locked());
        auto t = m.try_lock();
        EXPECT_TRUE(t.owns_lock());
        Mutex* raw = t.release();
        EXPECT_TRUE(m.is_locked());
        raw->unlock();
        EXPECT_FALSE(m.is_locked());
    }());
}

TEST_P(MutexTest, WaitersGetTheLockInFifoOrderByHandOff) {
    Mutex m;
    std::vector<int> order;
    run([&]() -> Task<void> {
        auto held = co_await m.lock();
        CO_ASSERT(held);
        auto waiter = [&](int id) -> Task<void> {
            auto g = co_await m.lock();
            CO_ASSERT(g);
            order.push_back(id);
            co_await yield_now(); // hold it a while: the next ones must still wait their turn
        };
        auto releaser = [&]() -> Task<void> {
            co_await test::yield_until([&] { return m.waiting() == 5; });
            held->unlock();
            // Handed to the first waiter, not freed: nobody can barge in meanwhile.
            EXPECT_TRUE(m.is_locked());
            EXPECT_FALSE(m.try_lock().owns_lock());
        };
        co_await when_all(waiter(0), waiter(1), waiter(2), waiter(3), waiter(4), releaser());
    }());
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
    EXPECT_FALSE(m.is_locked());
}

TEST_P(MutexTest, ATimedOutOrCancelledWaitLeavesTheQueueAndTheLockIsFreedNotHandedToIt) {
    Mutex m;
    run([&]() -> Task<void> {
        auto held = co_await m.lock();
        auto r = co_await m.lock().timeout(1ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        EXPECT_EQ(m.waiting(), 0u);
        auto any = co_await when_any(as_task(m.lock()), sleep(1ms));
        CO_ASSERT(any.index() == 1);
        EXPECT_EQ(m.waiting(), 0u);
        held->unlock();
        EXPECT_FALSE(m.is_locked()) << "handed to a waiter that had left";
    }());
}

TEST_P(MutexTest, AHandOffThatBeatTheCancellationIsKeptAndPassedOn) {
    Mutex m;
    std::vector<int> order;
    run([&]() -> Task<void> {
        auto held = co_await m.lock();
        CancelSource src;
        auto first = [&]() -> Task<void> {
            auto g = co_await m.lock();
            // unlock() handed it over before the cancellation: the task owns it.
            CO_ASSERT(g);
            order.push_back(1);
        };
        auto second = [&]() -> Task<void> {
            auto g = co_await m.lock();
            CO_ASSERT(g);
            order.push_back(2);
        };
        auto other = [&]() -> Task<void> {
            co_await test::yield_until([&] { return m.waiting() == 2; });
            held->unlock(); // hand-off to `first` (its resumption is queued)
            src.cancel();   // then its task is cancelled, before it runs
        };
        co_await when_all(with_cancel(src, first()), second(), other());
    }());
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
    EXPECT_FALSE(m.is_locked());
}

TEST_P(MutexTest, ACancellationThatBeatTheHandOffPassesTheLockToTheNextWaiter) {
    Mutex m;
    std::vector<int> order;
    run([&]() -> Task<void> {
        auto held = co_await m.lock();
        CancelSource src;
        auto first = [&]() -> Task<void> {
            auto g = co_await m.lock();
            CO_ASSERT(!g);
            EXPECT_EQ(g.error(), std::errc::operation_canceled);
            order.push_back(-1);
        };
        auto second = [&]() -> Task<void> {
            auto g = co_await m.lock();
            CO_ASSERT(g);
            order.push_back(2);
        };
        auto other = [&]() -> Task<void> {
            co_await test::yield_until([&] { return m.waiting() == 2; });
            src.cancel();
            held->unlock();
        };
        co_await when_all(with_cancel(src, first()), second(), other());
    }());
    EXPECT_EQ(order, (std::vector<int>{-1, 2}));
    EXPECT_FALSE(m.is_locked());
}

TEST_P(MutexTest, ProtectsACounterIncrementedByTasksOnSeveralThreads) {
    // The counter is a plain int: without mutual exclusion (and the happens-before the hand-off
    // gives) increments are lost, and TSan reports the race.
    constexpr int kThreads = 4, kTasksPerThread = 4, kIncrements = 500;
    Mutex m;
    int counter = 0;
    auto worker = [&]() -> Task<void> {
        auto one = [&]() -> Task<void> {
            for (int i = 0; i < kIncrements; ++i) {
                auto g = co_await m.lock();
                CO_ASSERT(g);
                int v = counter;
                if (i % 16 == 0) co_await yield_now(); // others queue meanwhile
                counter = v + 1;
            }
        };
        std::vector<Task<void>> ts;
        for (int t = 0; t < kTasksPerThread; ++t)
            ts.push_back(one());
        co_await when_all(std::move(ts));
    };
    std::vector<Task<void>> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.push_back(worker());
    test::run_on_threads(options(), std::move(threads));
    EXPECT_EQ(counter, kThreads * kTasksPerThread * kIncrements);
    EXPECT_FALSE(m.is_locked());
    EXPECT_EQ(m.waiting(), 0u);
}

TEST_P(MutexTest, DeadlinesRacingHandOffsAcrossThreadsNeverLoseTheLock) {
    // One thread locks and unlocks in a loop; the other locks with deadlines that expire about
    // when the hand-off arrives. Each attempt either owns the lock (and releases it) or timed out
    // without it; in the end the lock is free and nobody is queued.
    constexpr int kRounds = 3000;
    Mutex m;
    int owned = 0, timed_out = 0;
    std::atomic<bool> started{false}, done{false};
    test::run_on_threads(
        options(),
        [&]() -> Task<void> {
            while (!started)
                co_await yield_now();
            unsigned attempt = 0;
            for (int i = 0; i < kRounds; ++i) {
                auto g = co_await m.lock().timeout(test::racing_timeout(attempt));
                if (g)
                    ++owned;
                else if (g.error() == std::errc::timed_out)
                    ++timed_out;
            }
            done = true;
        }(),
        [&]() -> Task<void> {
            started = true;
            for (int i = 0; !done; ++i) {
                auto g = co_await m.lock();
                CO_ASSERT(g);
                for (int k = 0; k < i % 7 * 10; ++k) // hold it for a varying while
                    co_await yield_now();
            }
        }());
    EXPECT_EQ(owned + timed_out, kRounds);
    RecordProperty("owned", owned);
    EXPECT_FALSE(m.is_locked());
    EXPECT_EQ(m.waiting(), 0u);
}

TEST_P(MutexTest, AWaiterWhoseSchedulerShutsDownLeavesTheQueue) {
    Mutex m;
    auto held = m.try_lock();
    {
        Scheduler s(options());
        auto waiter = [&]() -> Task<void> { auto g = co_await m.lock(); };
        s.block_on([&]() -> Task<void> {
            spawn(waiter());
            co_await test::yield_until([&] { return m.waiting() == 1; });
        }());
    } // the detached waiter's frame is destroyed here
    EXPECT_EQ(m.waiting(), 0u);
    held.unlock();
    EXPECT_FALSE(m.is_locked());
}

GALAY_INSTANTIATE_BACKENDS(MutexTest);
