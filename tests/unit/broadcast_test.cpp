// galay::Broadcast and galay::Watch: every receiver sees every message in order, a receiver that
// falls behind gets errc::lagged and continues from the oldest kept message, deadlines and
// cancellation, close; a watch gives the latest value; both across threads with bounded counts.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

class BroadcastTest : public test::BackendTest {};

TEST_P(BroadcastTest, EveryReceiverSeesEveryMessageInOrderThenClosed) {
    Broadcast<int> bus(128);
    std::vector<Broadcast<int>::Receiver> rxs;
    for (int i = 0; i < 3; ++i)
        rxs.push_back(bus.subscribe());
    EXPECT_EQ(bus.receivers(), 3u);
    run([&]() -> Task<void> {
        for (int v = 0; v < 100; ++v) {
            auto n = bus.send(v);
            CO_ASSERT(n && *n == 3u);
        }
        bus.close();
        CO_ASSERT(bus.send(100).error() == errc::closed);
        for (auto& rx : rxs) {
            for (int v = 0; v < 100; ++v) {
                auto m = co_await rx.recv();
                CO_ASSERT(m && *m == v);
            }
            auto end = co_await rx.recv();
            CO_ASSERT(!end && end.error() == errc::closed);
        }
    }());
    rxs.clear();
    EXPECT_EQ(bus.receivers(), 0u);
}

TEST_P(BroadcastTest, ALaggingReceiverIsToldHowManyItMissedAndGoesOnFromTheOldest) {
    Broadcast<int> bus(4);
    auto rx = bus.subscribe();
    for (int v = 0; v < 10; ++v)
        ASSERT_TRUE(bus.send(v));
    run([&]() -> Task<void> {
        auto first = co_await rx.recv();
        CO_ASSERT(!first && first.error() == errc::lagged);
        EXPECT_EQ(rx.missed(), 6u);
        for (int v = 6; v < 10; ++v) {
            auto m = co_await rx.recv();
            CO_ASSERT(m && *m == v);
        }
        auto none = rx.try_recv();
        CO_ASSERT(!none && none.error() == std::errc::operation_would_block);
    }());
}

TEST_P(BroadcastTest, MessagesAReceiveCopiedAheadSurviveTheRingAndLagCountsOnlyTheRest) {
    // The first receive copies every kept message; the ring then turns over twice. The receiver
    // still gets the copied ones, then a lag report for exactly those it never copied.
    Broadcast<int> bus(4);
    auto rx = bus.subscribe();
    for (int v = 0; v < 4; ++v)
        ASSERT_TRUE(bus.send(v));
    run([&]() -> Task<void> {
        auto first = co_await rx.recv();
        CO_ASSERT(first && *first == 0);
        for (int v = 4; v < 12; ++v)
            CO_ASSERT(bus.send(v));
        for (int v = 1; v < 4; ++v) {
            Result<int> m = fail(EAGAIN);
            if (v == 2)
                m = rx.try_recv(); // the copied ones come without waiting too
            else
                m = co_await rx.recv();
            CO_ASSERT(m && *m == v);
        }
        auto lag = co_await rx.recv();
        CO_ASSERT(!lag && lag.error() == errc::lagged);
        EXPECT_EQ(rx.missed(), 4u); // 4..7 were overwritten before it read them
        for (int v = 8; v < 12; ++v) {
            auto m = co_await rx.recv();
            CO_ASSERT(m && *m == v);
        }
    }());
}

TEST_P(BroadcastTest, AReceiverSubscribedLateSeesOnlyLaterMessages) {
    Broadcast<int> bus(8);
    ASSERT_TRUE(bus.send(1));
    auto rx = bus.subscribe();
    ASSERT_TRUE(bus.send(2));
    auto m = rx.try_recv();
    ASSERT_TRUE(m);
    EXPECT_EQ(*m, 2);
}

TEST_P(BroadcastTest, AWaitingReceiverIsWokenBySendTimesOutAndIsCancelled) {
    Broadcast<std::shared_ptr<const int>> bus(2);
    auto rx = bus.subscribe();
    run([&]() -> Task<void> {
        auto timed = co_await rx.recv().timeout(1ms);
        CO_ASSERT(!timed && timed.error() == std::errc::timed_out);
        bool waiting = false;
        auto receiver = [&]() -> Task<int> {
            waiting = true;
            auto m = co_await rx.recv().timeout(10s);
            co_return m ? **m : -1;
        };
        auto sender = [&]() -> Task<void> {
            co_await test::yield_until([&] { return waiting; });
            co_await yield_now(); // (the receiver is queued by now)
            CO_ASSERT(bus.send(std::make_shared<const int>(7)));
        };
        auto [got, none] = co_await when_all(receiver(), sender());
        EXPECT_EQ(got, 7);
        // A receive that loses a when_any takes nothing: the next message is still there.
        auto loser = [&]() -> Task<int> {
            auto m = co_await rx.recv();
            co_return m ? **m : -1;
        };
        auto winner = []() -> Task<int> {
            co_await yield_now();
            co_return 0;
        };
        auto race = co_await when_any(loser(), winner());
        CO_ASSERT(race.index() == 1);
        CO_ASSERT(bus.send(std::make_shared<const int>(8)));
        auto next = co_await rx.recv();
        CO_ASSERT(next && **next == 8);
    }());
}

TEST_P(BroadcastTest, CloseWakesWaitingReceivers) {
    Broadcast<int> bus(2);
    auto a = bus.subscribe();
    auto b = bus.subscribe();
    run([&]() -> Task<void> {
        auto wait = [](Broadcast<int>::Receiver& rx) -> Task<bool> {
            auto m = co_await rx.recv();
            co_return !m && m.error() == errc::closed;
        };
        auto closer = [&]() -> Task<bool> {
            co_await yield_now();
            co_await yield_now();
            bus.close();
            co_return true;
        };
        auto [x, y, z] = co_await when_all(wait(a), wait(b), closer());
        EXPECT_TRUE(x && y && z);
    }());
}

TEST_P(BroadcastTest, OneSenderThreadAndFourReceiverThreadsLoseNothingWithinCapacity) {
    // The ring holds every message, so no receiver can lag: each sees 0..N-1 in order, once.
    constexpr int kMessages = 20000, kReceivers = 4;
    Broadcast<int> bus(kMessages);
    std::vector<Broadcast<int>::Receiver> rxs;
    for (int i = 0; i < kReceivers; ++i)
        rxs.push_back(bus.subscribe());
    std::atomic<int> bad{0};
    std::vector<Task<void>> threads;
    threads.push_back([](Broadcast<int>& bus) -> Task<void> {
        for (int v = 0; v < kMessages; ++v) {
            CO_ASSERT(bus.send(v));
            if (v % 64 == 0) co_await yield_now();
        }
        bus.close();
    }(bus));
    for (auto& rx : rxs)
        threads.push_back([](Broadcast<int>::Receiver& rx, std::atomic<int>& bad) -> Task<void> {
            int expect = 0;
            for (;;) {
                auto m = co_await rx.recv();
                if (!m) {
                    if (m.error() != errc::closed || expect != kMessages) ++bad;
                    co_return;
                }
                if (*m != expect++) ++bad;
            }
        }(rx, bad));
    test::run_on_threads(options(), std::move(threads));
    EXPECT_EQ(bad.load(), 0);
}

TEST_P(BroadcastTest, LaggingReceiverThreadsAccountForEveryMessage) {
    // A small ring and a fast sender: receivers lag. For each, what it received plus what it was
    // told it missed is exactly what was sent, and the values it got only go up.
    constexpr int kMessages = 20000, kReceivers = 3;
    Broadcast<int> bus(16);
    std::vector<Broadcast<int>::Receiver> rxs;
    for (int i = 0; i < kReceivers; ++i)
        rxs.push_back(bus.subscribe());
    std::atomic<int> bad{0};
    std::atomic<long long> lags{0};
    std::vector<Task<void>> threads;
    threads.push_back([](Broadcast<int>& bus) -> Task<void> {
        for (int v = 0; v < kMessages; ++v) {
            CO_ASSERT(bus.send(v));
            if (v % 256 == 0) co_await yield_now();
        }
        bus.close();
    }(bus));
    for (auto& rx : rxs)
        threads.push_back([](Broadcast<int>::Receiver& rx, std::atomic<int>& bad,
                             std::atomic<long long>& lags) -> Task<void> {
            long long accounted = 0;
            int next = 0;
            for (;;) {
                auto m = co_await rx.recv().timeout(30s);
                if (m) {
                    if (*m != next) ++bad; // after a lag, `next` was advanced by missed()
                    next = *m + 1;
                    ++accounted;
                } else if (m.error() == errc::lagged) {
                    accounted += static_cast<long long>(rx.missed());
                    next += static_cast<int>(rx.missed());
                    ++lags;
                } else {
                    if (m.error() != errc::closed || accounted != kMessages) ++bad;
                    co_return;
                }
            }
        }(rx, bad, lags));
    test::run_on_threads(options(), std::move(threads));
    EXPECT_EQ(bad.load(), 0);
    RecordProperty("lags", static_cast<int>(lags.load()));
}

class WatchTest : public test::BackendTest {};

TEST_P(WatchTest, ChangedPassesForAnUnseenValueAndBorrowMarksItSeen) {
    Watch<int> w(1);
    auto rx = w.subscribe();
    run([&]() -> Task<void> {
        EXPECT_FALSE(rx.has_changed());
        auto none = co_await rx.changed().timeout(1ms);
        CO_ASSERT(!none && none.error() == std::errc::timed_out);
        CO_ASSERT(w.send(2));
        CO_ASSERT(w.send(3)); // a slow receiver skips 2: only the latest is kept
        auto c = co_await rx.changed();
        CO_ASSERT(c);
        EXPECT_EQ(rx.borrow(), 3);
        EXPECT_FALSE(rx.has_changed());
        bool waiting = false;
        auto waiter = [&]() -> Task<int> {
            waiting = true;
            auto ch = co_await rx.changed().timeout(10s);
            co_return ch ? rx.borrow() : -1;
        };
        auto sender = [&]() -> Task<void> {
            co_await test::yield_until([&] { return waiting; });
            co_await yield_now();
            CO_ASSERT(w.send(4));
        };
        auto [got, none2] = co_await when_all(waiter(), sender());
        EXPECT_EQ(got, 4);
        w.close();
        auto closed = co_await rx.changed();
        CO_ASSERT(!closed && closed.error() == errc::closed);
        EXPECT_EQ(w.send(5).error(), errc::closed);
        EXPECT_EQ(w.get(), 4);
    }());
}

TEST_P(WatchTest, ReceiverThreadsSeeOnlyRisingValuesAndTheLastOne) {
    constexpr int kValues = 20000, kReceivers = 3;
    Watch<int> w(0);
    std::vector<Watch<int>::Receiver> rxs;
    for (int i = 0; i < kReceivers; ++i)
        rxs.push_back(w.subscribe());
    std::atomic<int> bad{0};
    std::vector<Task<void>> threads;
    threads.push_back([](Watch<int>& w) -> Task<void> {
        for (int v = 1; v <= kValues; ++v) {
            CO_ASSERT(w.send(v));
            if (v % 64 == 0) co_await yield_now();
        }
        w.close();
    }(w));
    for (auto& rx : rxs)
        threads.push_back([](Watch<int>::Receiver& rx, std::atomic<int>& bad) -> Task<void> {
            int last = 0;
            for (;;) {
                auto c = co_await rx.changed().timeout(30s);
                if (!c) {
                    if (c.error() != errc::closed || last != kValues) ++bad;
                    co_return;
                }
                const int v = rx.borrow();
                if (v <= last) ++bad;
                last = v;
            }
        }(rx, bad));
    test::run_on_threads(options(), std::move(threads));
    EXPECT_EQ(bad.load(), 0);
}

GALAY_INSTANTIATE_BACKENDS(BroadcastTest);
GALAY_INSTANTIATE_BACKENDS(WatchTest);
