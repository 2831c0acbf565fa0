// galay::Semaphore: permits, FIFO order (a large head request is not overtaken), withdrawal of
// the head serving the ones behind it, deadlines, across threads.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <vector>

using namespace galay;
using namespace std::chrono_literals;

class SemaphoreTest : public test::BackendTest {};

TEST_P(SemaphoreTest, AcquireTakesPermitsAndReleaseGivesThemBack) {
    Semaphore s(3);
    run([&]() -> Task<void> {
        CO_ASSERT(co_await s.acquire(2));
        EXPECT_EQ(s.available(), 1u);
        EXPECT_FALSE(s.try_acquire(2));
        EXPECT_TRUE(s.try_acquire(1));
        auto r = co_await s.acquire().timeout(1ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        EXPECT_EQ(s.waiting(), 0u);
        s.release(3);
        EXPECT_EQ(s.available(), 3u);
    }());
}

TEST_P(SemaphoreTest, ServesWaitersInFifoOrderWithoutLettingSmallRequestsOvertake) {
    Semaphore s(0);
    std::vector<int> order;
    run([&]() -> Task<void> {
        auto waiter = [&](int id, std::size_t n) -> Task<void> {
            CO_ASSERT(co_await s.acquire(n));
            order.push_back(id);
        };
        auto releaser = [&]() -> Task<void> {
            co_await test::yield_until([&] { return s.waiting() == 2; });
            s.release(1); // enough for the second (needs 1), not for the head (needs 3)
            EXPECT_EQ(s.waiting(), 2u);
            EXPECT_FALSE(s.try_acquire(1)) << "try_acquire must not overtake waiters";
            s.release(3); // head takes 3, then the second takes the last one
            EXPECT_EQ(s.waiting(), 0u);
            EXPECT_EQ(s.available(), 0u);
        };
        co_await when_all(waiter(1, 3), waiter(2, 1), releaser());
    }());
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST_P(SemaphoreTest, AWithdrawnHeadLetsTheWaitersBehindItThrough) {
    Semaphore s(2);
    bool small_done = false;
    run([&]() -> Task<void> {
        auto big = [&]() -> Task<void> {
            auto r = co_await s.acquire(5).timeout(2ms); // can never be satisfied
            CO_ASSERT(!r);
            EXPECT_EQ(r.error(), std::errc::timed_out);
        };
        auto small = [&]() -> Task<void> {
            co_await test::yield_until([&] { return s.waiting() == 1; });
            CO_ASSERT(co_await s.acquire(1)); // queued behind `big` until it times out
            small_done = true;
        };
        co_await when_all(big(), small());
    }());
    EXPECT_TRUE(small_done);
    EXPECT_EQ(s.available(), 1u);
}

TEST_P(SemaphoreTest, CancelledWaitHoldsNoPermit) {
    Semaphore s(0);
    run([&]() -> Task<void> {
        auto r = co_await when_any(as_task(s.acquire()), sleep(1ms));
        CO_ASSERT(r.index() == 1);
        EXPECT_EQ(s.waiting(), 0u);
        s.release();
        EXPECT_EQ(s.available(), 1u);
    }());
}

TEST_P(SemaphoreTest, BoundsConcurrencyOfTasksOnSeveralThreads) {
    constexpr int kLimit = 3, kThreads = 3, kTasks = 4, kRounds = 200;
    Semaphore s(kLimit);
    std::atomic<int> inside{0}, peak{0}, total{0};
    auto worker = [&]() -> Task<void> {
        auto one = [&]() -> Task<void> {
            for (int i = 0; i < kRounds; ++i) {
                CO_ASSERT(co_await s.acquire());
                int now = ++inside;
                int p = peak.load();
                while (now > p && !peak.compare_exchange_weak(p, now)) {
                }
                co_await yield_now();
                --inside;
                ++total;
                s.release();
            }
        };
        std::vector<Task<void>> ts;
        for (int t = 0; t < kTasks; ++t)
            ts.push_back(one());
        co_await when_all(std::move(ts));
    };
    std::vector<Task<void>> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.push_back(worker());
    test::run_on_threads(options(), std::move(threads));
    EXPECT_LE(peak.load(), kLimit);
    EXPECT_EQ(total.load(), kThreads * kTasks * kRounds);
    EXPECT_EQ(s.available(), static_cast<std::size_t>(kLimit));
    EXPECT_EQ(s.waiting(), 0u);
}

TEST_P(SemaphoreTest, DeadlinesRacingReleasesAcrossThreadsNeverLoseAPermit) {
    constexpr int kRounds = 2000;
    Semaphore s(0);
    std::atomic<int> acquired{0}, released{0};
    std::atomic<bool> done{false};
    test::run_on_threads(
        options(),
        [&]() -> Task<void> {
            unsigned attempt = 0;
            for (int i = 0; i < kRounds; ++i)
                if (co_await s.acquire().timeout(test::racing_timeout(attempt))) ++acquired;
            done = true;
        }(),
        [&]() -> Task<void> {
            // One permit at a time: release the next once the last one was taken.
            while (!done) {
                if (s.available() == 0 && released.load() == acquired.load()) {
                    s.release();
                    ++released;
                }
                co_await yield_now();
            }
        }());
    // Every permit released was either taken by a successful wait or is still free.
    EXPECT_EQ(static_cast<std::size_t>(released.load()),
              static_cast<std::size_t>(acquired.load()) + s.available());
    EXPECT_EQ(s.waiting(), 0u);
    RecordProperty("acquired", acquired.load());
}

GALAY_INSTANTIATE_BACKENDS(SemaphoreTest);
