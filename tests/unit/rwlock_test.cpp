// galay::RwLock: readers share, a writer excludes, FIFO with a waiting writer holding back later
// readers, a withdrawn writer lets readers in, deadlines; Channel::recv_many; both across threads.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <atomic>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

class RwLockTest : public test::BackendTest {};

TEST_P(RwLockTest, ReadersShareAndAWriterWaitsForThemAll) {
    RwLock l;
    run([&]() -> Task<void> {
        auto a = co_await l.read();
        auto b = co_await l.read();
        CO_ASSERT(a && b);
        EXPECT_EQ(l.readers(), 2u);
        EXPECT_FALSE(l.try_write());
        auto timed = co_await l.write().timeout(1ms);
        CO_ASSERT(!timed && timed.error() == std::errc::timed_out);
        EXPECT_EQ(l.waiting(), 0u);
        bool written = false;
        auto writer = [&]() -> Task<void> {
            auto w = co_await l.write();
            CO_ASSERT(w && w.value().is_write());
            EXPECT_EQ(l.readers(), 0u);
            written = true;
        };
        auto releaser = [&]() -> Task<void> {
            co_await test::yield_until([&] { return l.waiting() == 1; });
            a->unlock();
            co_await yield_now();
            EXPECT_FALSE(written); // one reader still holds it
            b->unlock();
        };
        co_await when_all(writer(), releaser());
        EXPECT_TRUE(written);
        EXPECT_FALSE(l.is_write_locked());
    }());
}

TEST_P(RwLockTest, AWaitingWriterHoldsBackLaterReadersUntilItHasWritten) {
    RwLock l;
    std::vector<int> order;
    run([&]() -> Task<void> {
        auto first = co_await l.read();
        CO_ASSERT(first);
        auto writer = [&]() -> Task<void> {
            auto w = co_await l.write();
            CO_ASSERT(w);
            order.push_back(1);
        };
        auto late_reader = [&]() -> Task<void> {
            co_await test::yield_until([&] { return l.waiting() == 1; });
            EXPECT_FALSE(l.try_read()); // the queued writer goes first
            auto r = co_await l.read();
            CO_ASSERT(r);
            order.push_back(2);
        };
        auto releaser = [&]() -> Task<void> {
            co_await test::yield_until([&] { return l.waiting() == 2; });
            first->unlock();
        };
        co_await when_all(writer(), late_reader(), releaser());
    }());
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST_P(RwLockTest, AWriterThatGivesUpLetsTheReadersBehindItIn) {
    RwLock l;
    run([&]() -> Task<void> {
        auto held = co_await l.read();
        CO_ASSERT(held);
        auto writer = [&]() -> Task<bool> {
            auto w = co_await l.write().timeout(1ms);
            co_return !w && w.error() == std::errc::timed_out;
        };
        auto reader = [&]() -> Task<bool> {
            co_await test::yield_until([&] { return l.waiting() == 1; });
            auto r = co_await l.read().timeout(10s); // behind the writer until it gives up
            co_return r.has_value();
        };
        auto [gave_up, read] = co_await when_all(writer(), reader());
        EXPECT_TRUE(gave_up);
        EXPECT_TRUE(read);
    }());
}

TEST_P(RwLockTest, ReaderAndWriterThreadsNeverOverlap) {
    constexpr int kRounds = 3000;
    RwLock l;
    std::atomic<int> readers{0}, writers{0}, bad{0};
    long long value = 0; // written under the write lock, read under the read lock
    auto writer = [](RwLock& l, std::atomic<int>& readers, std::atomic<int>& writers,
                     std::atomic<int>& bad, long long& value) -> Task<void> {
        for (int i = 0; i < kRounds; ++i) {
            auto g = co_await l.write();
            CO_ASSERT(g);
            if (writers.fetch_add(1) != 0 || readers.load() != 0) ++bad;
            ++value;
            writers.fetch_sub(1);
            if (i % 8 == 0) co_await yield_now();
        }
    };
    auto reader = [](RwLock& l, std::atomic<int>& readers, std::atomic<int>& writers,
                     std::atomic<int>& bad, long long& value) -> Task<void> {
        long long last = 0;
        for (int i = 0; i < kRounds; ++i) {
            auto g = co_await l.read();
            CO_ASSERT(g);
            readers.fetch_add(1);
            if (writers.load() != 0 || value < last) ++bad;
            last = value;
            readers.fetch_sub(1);
            if (i % 8 == 0) co_await yield_now();
        }
    };
    test::run_on_threads(
        options(), writer(l, readers, writers, bad, value), writer(l, readers, writers, bad, value),
        reader(l, readers, writers, bad, value), reader(l, readers, writers, bad, value));
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(value, 2 * kRounds);
    EXPECT_EQ(l.readers() + l.waiting(), 0u);
}

class RecvManyTest : public test::BackendTest {};

TEST_P(RecvManyTest, WaitsForOneThenTakesWhatIsBufferedUpToMax) {
    Channel<int> ch(16);
    run([&]() -> Task<void> {
        std::vector<int> out;
        auto none = co_await ch.recv_many(out, 4).timeout(1ms);
        CO_ASSERT(!none && none.error() == std::errc::timed_out);
        for (int v = 0; v < 6; ++v)
            CO_ASSERT(ch.try_send(v));
        auto n = co_await ch.recv_many(out, 4);
        CO_ASSERT(n && *n == 4u);
        auto m = co_await ch.recv_many(out, 4);
        CO_ASSERT(m && *m == 2u);
        EXPECT_EQ(out, (std::vector<int>{0, 1, 2, 3, 4, 5}));
        auto zero = co_await ch.recv_many(out, 0);
        CO_ASSERT(zero && *zero == 0u);
        ch.close();
        auto closed = co_await ch.recv_many(out, 4);
        CO_ASSERT(!closed && closed.error() == errc::closed);
    }());
}

TEST_P(RecvManyTest, ProducerThreadsToOneBatchingConsumerDeliverEveryValueOnce) {
    constexpr int kProducers = 3, kPer = 10000;
    Channel<int> ch(64);
    std::vector<int> seen(kProducers * kPer, 0);
    std::atomic<int> done{0};
    std::vector<Task<void>> threads;
    for (int p = 0; p < kProducers; ++p)
        threads.push_back([](Channel<int>& ch, std::atomic<int>& done, int p) -> Task<void> {
            for (int i = 0; i < kPer; ++i) {
                auto r = co_await ch.send(p * kPer + i);
                CO_ASSERT(r);
            }
            if (done.fetch_add(1) + 1 == kProducers) ch.close();
        }(ch, done, p));
    threads.push_back([](Channel<int>& ch, std::vector<int>& seen) -> Task<void> {
        std::vector<int> batch;
        batch.reserve(32);
        for (;;) {
            batch.clear();
            auto n = co_await ch.recv_many(batch, 32);
            if (!n) {
                CO_ASSERT(n.error() == errc::closed);
                co_return;
            }
            CO_ASSERT(*n == batch.size() && *n >= 1u);
            for (int v : batch)
                ++seen[v];
        }
    }(ch, seen));
    test::run_on_threads(options(), std::move(threads));
    for (int v = 0; v < kProducers * kPer; ++v)
        ASSERT_EQ(seen[v], 1) << v;
}

GALAY_INSTANTIATE_BACKENDS(RwLockTest);
GALAY_INSTANTIATE_BACKENDS(RecvManyTest);
