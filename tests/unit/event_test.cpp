// galay::Event: latch (set/reset) and notifier (notify_one keeps its notification, notify_all),
// FIFO wake order, deadlines and cancellation, across threads.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <vector>

using namespace galay;
using namespace std::chrono_literals;

class EventTest : public test::BackendTest {};

TEST_P(EventTest, SetReleasesEveryWaiterAndLaterWaitsUntilReset) {
    Event e;
    int released = 0;
    run([&]() -> Task<void> {
        auto waiter = [&]() -> Task<void> {
            CO_ASSERT(co_await e.wait());
            ++released;
        };
        auto setter = [&]() -> Task<void> {
            co_await test::yield_until([&] { return e.waiting() == 3; });
            e.set();
        };
        co_await when_all(waiter(), waiter(), waiter(), setter());
        EXPECT_TRUE(e.is_set());
        CO_ASSERT(co_await e.wait()); // passes at once while set
        e.reset();
        auto r = co_await e.wait().timeout(1ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
    }());
    EXPECT_EQ(released, 3);
    EXPECT_EQ(e.waiting(), 0u);
}

TEST_P(EventTest, NotifyOneWakesWaitersOneAtATimeInFifoOrder) {
    Event e;
    std::vector<int> order;
    run([&]() -> Task<void> {
        auto waiter = [&](int id) -> Task<void> {
            CO_ASSERT(co_await e.wait());
            order.push_back(id);
        };
        auto notifier = [&]() -> Task<void> {
            co_await test::yield_until([&] { return e.waiting() == 3; });
            e.notify_one();
            EXPECT_EQ(e.waiting(), 2u);
            co_await test::yield_until([&] { return order.size() == 1; });
            e.notify_one();
            e.notify_one();
        };
        co_await when_all(waiter(0), waiter(1), waiter(2), notifier());
    }());
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
    EXPECT_FALSE(e.is_set());
}

TEST_P(EventTest, NotifyOneWithNobodyWaitingLetsTheNextWaitThroughOnce) {
    Event e;
    run([&]() -> Task<void> {
        e.notify_one();
        e.notify_one(); // one permit, not two
        CO_ASSERT(co_await e.wait().timeout(10s));
        auto r = co_await e.wait().timeout(1ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
    }());
}

TEST_P(EventTest, NotifyAllWakesOnlyTheTasksWaitingNow) {
    Event e;
    int woken = 0;
    run([&]() -> Task<void> {
        auto waiter = [&]() -> Task<void> {
            CO_ASSERT(co_await e.wait());
            ++woken;
        };
        auto notifier = [&]() -> Task<void> {
            co_await test::yield_until([&] { return e.waiting() == 2; });
            e.notify_all();
        };
        co_await when_all(waiter(), waiter(), notifier());
        auto r = co_await e.wait().timeout(1ms); // nothing kept for later
        CO_ASSERT(!r);
    }());
    EXPECT_EQ(woken, 2);
}

TEST_P(EventTest, CancelledWaitLeavesNoTraceAndANotificationGoesToTheNextWaiter) {
    Event e;
    run([&]() -> Task<void> {
        auto r = co_await when_any(as_task(e.wait()), sleep(1ms));
        CO_ASSERT(r.index() == 1);
        EXPECT_EQ(e.waiting(), 0u);
        CancelSource src;
        auto cancelled = [&]() -> Task<void> {
            auto w = co_await e.wait();
            CO_ASSERT(!w);
            EXPECT_EQ(w.error(), std::errc::operation_canceled);
        };
        bool second = false;
        auto waiter = [&]() -> Task<void> {
            CO_ASSERT(co_await e.wait());
            second = true;
        };
        auto other = [&]() -> Task<void> {
            co_await test::yield_until([&] { return e.waiting() == 2; });
            src.cancel();
            e.notify_one(); // the first waiter left: it goes to the second
        };
        co_await when_all(with_cancel(src, cancelled()), waiter(), other());
        EXPECT_TRUE(second);
    }());
}

TEST_P(EventTest, SetFromAPlainThreadAndFromAnotherSchedulerWakesWaiters) {
    Event from_plain, from_worker;
    std::thread plain([&] {
        test::spin_until([&] { return from_plain.waiting() == 1; });
        from_plain.set();
    });
    test::run_on_threads(
        options(),
        [&]() -> Task<void> {
            CO_ASSERT(co_await from_plain.wait().timeout(30s));
            CO_ASSERT(co_await from_worker.wait().timeout(30s));
        }(),
        [&]() -> Task<void> {
            co_await test::yield_until([&] { return from_worker.waiting() == 1; });
            from_worker.set();
        }());
    plain.join();
}

TEST_P(EventTest, NotificationsRacingDeadlinesAcrossThreadsAreNeverLost) {
    // Every notify_one either wakes a waiter or is kept for the next wait: the waiting side sees
    // exactly as many successful waits as there were notifications.
    constexpr int kRounds = 2000;
    Event e;
    std::atomic<int> received{0};
    std::atomic<bool> done{false};
    test::run_on_threads(
        options(),
        [&]() -> Task<void> {
            unsigned attempt = 0;
            while (received.load() < kRounds)
                if (co_await e.wait().timeout(test::racing_timeout(attempt))) ++received;
            done = true;
        }(),
        [&]() -> Task<void> {
            for (int sent = 0; sent < kRounds; ++sent) {
                e.notify_one();
                while (received.load() == sent && !done)
                    co_await yield_now();
            }
        }());
    EXPECT_EQ(received.load(), kRounds);
    EXPECT_EQ(e.waiting(), 0u);
}

GALAY_INSTANTIATE_BACKENDS(EventTest);
