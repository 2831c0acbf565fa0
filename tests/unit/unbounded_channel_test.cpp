// galay::UnboundedChannel: sends never wait, receives in FIFO order across blocks, close()
// semantics, cancellation and deadlines that lose nothing, recv_many, blocks reused once warm,
// and producer threads (with and without a scheduler) x consumer threads delivering every value
// exactly once with close() in the middle.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <galay/sync/unbounded_channel.hpp>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

class UnboundedChannelTest : public test::BackendTest {};

TEST_P(UnboundedChannelTest, SendsNeverWaitAndValuesComeOutInOrderAcrossBlocks) {
    UnboundedChannel<int> ch;
    constexpr int kValues = 5000; // several blocks of ints
    for (int i = 0; i < kValues; ++i)
        ASSERT_TRUE(ch.send(i));
    EXPECT_EQ(ch.size(), static_cast<std::size_t>(kValues));
    EXPECT_GE(ch.capacity(), static_cast<std::size_t>(kValues));
    run([&]() -> Task<void> {
        for (int i = 0; i < kValues; ++i) {
            auto v = co_await ch.recv();
            CO_ASSERT(v && *v == i);
        }
        EXPECT_EQ(ch.try_recv().error(), std::errc::resource_unavailable_try_again);
        CO_ASSERT(ch.send(7));
        auto v = ch.try_recv();
        CO_ASSERT(v && *v == 7);
    }());
    EXPECT_EQ(ch.size(), 0u);
}

TEST_P(UnboundedChannelTest, CarriesMoveOnlyValuesAndDestroysWhatIsLeftInTheQueue) {
    auto probe = std::make_shared<int>(0);
    {
        UnboundedChannel<std::unique_ptr<std::shared_ptr<int>>> ch;
        for (int i = 0; i < 1000; ++i) // spans blocks
            ASSERT_TRUE(ch.send(std::make_unique<std::shared_ptr<int>>(probe)));
        run([&]() -> Task<void> {
            for (int i = 0; i < 600; ++i) {
                auto v = co_await ch.recv();
                CO_ASSERT(v && **v == probe);
            }
        }());
        EXPECT_EQ(probe.use_count(), 401); // 400 buffered + ours
    }
    EXPECT_EQ(probe.use_count(), 1);
}

TEST_P(UnboundedChannelTest, AWaitingReceiverGetsTheValueStraightFromTheSender) {
    UnboundedChannel<std::string> ch;
    run([&]() -> Task<void> {
        auto receiver = [&]() -> Task<Result<std::string>> { co_return co_await ch.recv(); };
        auto sender = [&]() -> Task<void> {
            co_await test::yield_until([&] { return ch.waiting_receivers() == 1; });
            CO_ASSERT(ch.send(std::string(100, 'x')));
            EXPECT_EQ(ch.size(), 0u); // handed over, never queued
            EXPECT_EQ(ch.capacity(), 0u);
        };
        auto [got, _] = co_await when_all(receiver(), sender());
        CO_ASSERT(got && *got == std::string(100, 'x'));
    }());
}

TEST_P(UnboundedChannelTest, CloseFailsSendsWithTheirValuesAndReceiversDrainThenSeeClosed) {
    UnboundedChannel<std::unique_ptr<int>> ch;
    ASSERT_TRUE(ch.send(std::make_unique<int>(1)));
    ASSERT_TRUE(ch.send(std::make_unique<int>(2)));
    ch.close();
    ch.close(); // idempotent
    EXPECT_TRUE(ch.is_closed());
    auto late = ch.send(std::make_unique<int>(3));
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error().code, errc::closed);
    ASSERT_TRUE(late.error().value);
    EXPECT_EQ(*late.error().value, 3);
    run([&]() -> Task<void> {
        auto a = co_await ch.recv();
        auto b = co_await ch.recv();
        CO_ASSERT(a && **a == 1 && b && **b == 2); // buffered before close: still delivered
        auto end = co_await ch.recv();
        CO_ASSERT(!end);
        EXPECT_EQ(end.error(), errc::closed);
        EXPECT_EQ(ch.try_recv().error(), errc::closed);
    }());
}

TEST_P(UnboundedChannelTest, CloseWakesEveryWaitingReceiver) {
    UnboundedChannel<int> ch;
    int closed_seen = 0;
    run([&]() -> Task<void> {
        auto receiver = [&]() -> Task<void> {
            auto r = co_await ch.recv();
            CO_ASSERT(!r && r.error() == errc::closed);
            ++closed_seen;
        };
        auto closer = [&]() -> Task<void> {
            co_await test::yield_until([&] { return ch.waiting_receivers() == 3; });
            ch.close();
        };
        co_await when_all(receiver(), receiver(), receiver(), closer());
    }());
    EXPECT_EQ(closed_seen, 3);
    EXPECT_EQ(ch.waiting_receivers(), 0u);
}

TEST_P(UnboundedChannelTest, ACancelledOrTimedOutReceiveTakesNothingAndLeavesNoTrace) {
    UnboundedChannel<int> ch;
    run([&]() -> Task<void> {
        auto t = co_await ch.recv().timeout(1ms);
        CO_ASSERT(!t);
        EXPECT_EQ(t.error(), std::errc::timed_out);
        auto c = co_await when_any(as_task(ch.recv()), sleep(1ms));
        CO_ASSERT(c.index() == 1);
        EXPECT_EQ(ch.waiting_receivers(), 0u);
        // With a dead receiver still queued, this value would be handed into a destroyed frame.
        CO_ASSERT(ch.send(7));
        EXPECT_EQ(ch.size(), 1u);
        auto v = co_await ch.recv().timeout(1s);
        CO_ASSERT(v && *v == 7);
    }());
}

TEST_P(UnboundedChannelTest, AValueHandedToAReceiverBeforeItsCancellationIsKept) {
    UnboundedChannel<int> ch;
    run([&]() -> Task<void> {
        CancelSource src;
        auto receiver = [&]() -> Task<Result<int>> { co_return co_await ch.recv(); };
        auto other = [&]() -> Task<void> {
            co_await test::yield_until([&] { return ch.waiting_receivers() == 1; });
            CO_ASSERT(ch.send(5)); // straight into the waiting receiver
            src.cancel();          // after the hand-off: too late
        };
        auto [got, _] = co_await when_all(with_cancel(src, receiver()), other());
        CO_ASSERT(got && *got == 5);
        EXPECT_EQ(ch.size(), 0u);
    }());
}

TEST_P(UnboundedChannelTest, RecvManyWaitsForOneThenTakesWhatIsBufferedUpToMax) {
    UnboundedChannel<int> ch;
    run([&]() -> Task<void> {
        std::vector<int> out;
        auto none = co_await ch.recv_many(out, 8).timeout(1ms);
        CO_ASSERT(!none && none.error() == std::errc::timed_out);
        auto zero = co_await ch.recv_many(out, 0);
        CO_ASSERT(zero && *zero == 0);
        for (int i = 0; i < 10; ++i)
            CO_ASSERT(ch.send(i));
        auto n = co_await ch.recv_many(out, 8);
        CO_ASSERT(n && *n == 8);
        auto m = co_await ch.recv_many(out, 8);
        CO_ASSERT(m && *m == 2);
        CO_ASSERT(out.size() == 10u);
        for (int i = 0; i < 10; ++i)
            EXPECT_EQ(out[i], i);
        ch.close();
        auto end = co_await ch.recv_many(out, 8);
        CO_ASSERT(!end && end.error() == errc::closed);
    }());
}

TEST_P(UnboundedChannelTest, OnceWarmTheQueueReusesItsBlocks) {
    // Rounds of 3000 sends then 3000 receives: the first round allocates the blocks, the later
    // rounds (same depth) reuse them, so the capacity stops growing.
    UnboundedChannel<int> ch;
    std::size_t after_first = 0;
    run([&]() -> Task<void> {
        for (int round = 0; round < 20; ++round) {
            for (int i = 0; i < 3000; ++i)
                CO_ASSERT(ch.send(i));
            for (int i = 0; i < 3000; ++i) {
                auto v = co_await ch.recv();
                CO_ASSERT(v && *v == i);
            }
            if (round == 0) after_first = ch.capacity();
            EXPECT_EQ(ch.capacity(), after_first);
        }
    }());
    EXPECT_GE(after_first, 3000u);
    EXPECT_LT(after_first, 3000u + 2 * detail::SegmentedQueue<int>::kPerBlock);
}

TEST_P(UnboundedChannelTest, ProducerThreadsAndConsumerThreadsDeliverEveryValueExactlyOnce) {
    // Two producers are tasks on schedulers of their own, two are plain threads without one;
    // four consumers are tasks on their own threads. close() comes in the middle, once the
    // consumers have seen half of what could be sent; every value sent is received exactly once.
    constexpr int kProducers = 4, kConsumers = 4, kPerProducer = 20000;
    constexpr int kTotal = kProducers * kPerProducer;
    UnboundedChannel<int> ch;
    std::vector<std::atomic<std::uint8_t>> seen(kTotal);
    std::atomic<long long> sent_sum{0}, received_sum{0};
    std::atomic<int> sent{0}, received{0}, duplicates{0}, bad_failures{0};
    auto produce = [&](int p) {
        for (int i = 0; i < kPerProducer; ++i) {
            int v = p * kPerProducer + i;
            auto r = ch.send(v);
            if (!r) {
                if (r.error().code != errc::closed || r.error().value != v) ++bad_failures;
                return;
            }
            sent_sum += v;
            ++sent;
        }
    };
    auto producer_task = [&](int p) -> Task<void> {
        produce(p);
        co_return;
    };
    auto consumer = [&]() -> Task<void> {
        for (;;) {
            auto r = co_await ch.recv();
            if (!r) {
                CO_ASSERT(r.error() == errc::closed);
                co_return;
            }
            if (seen[*r].fetch_add(1) != 0) ++duplicates;
            received_sum += *r;
            if (++received == kTotal / 2) ch.close();
        }
    };
    std::thread plain0([&] { produce(2); });
    std::thread plain1([&] { produce(3); });
    std::vector<Task<void>> tasks;
    tasks.push_back(producer_task(0));
    tasks.push_back(producer_task(1));
    for (int c = 0; c < kConsumers; ++c)
        tasks.push_back(consumer());
    // The consumers end only at close(), which comes once half the values arrived.
    test::run_on_threads(options(), std::move(tasks));
    plain0.join();
    plain1.join();
    EXPECT_TRUE(ch.is_closed());
    EXPECT_EQ(bad_failures.load(), 0);
    EXPECT_EQ(duplicates.load(), 0);
    EXPECT_EQ(ch.size(), 0u); // a consumer sees "closed" only once the queue is empty
    EXPECT_EQ(received.load(), sent.load());
    EXPECT_EQ(received_sum.load(), sent_sum.load());
    EXPECT_GE(received.load(), kTotal / 2);
    EXPECT_EQ(ch.waiting_receivers(), 0u);
}

TEST_P(UnboundedChannelTest, DeadlinesRacingSendsAcrossThreadsLoseAndDuplicateNothing) {
    // The receiver uses short deadlines against a sender on another thread: a receive that timed
    // out took nothing, so the receiver gets 0..N-1 in order, each once.
    constexpr int kValues = 2000;
    UnboundedChannel<int> ch;
    std::vector<int> got;
    got.reserve(kValues);
    int recv_timeouts = 0;
    test::run_on_threads(
        options(),
        [&]() -> Task<void> {
            unsigned attempt = 0;
            while (static_cast<int>(got.size()) < kValues) {
                auto r = co_await ch.recv().timeout(test::racing_timeout(attempt));
                if (r)
                    got.push_back(*r);
                else
                    ++recv_timeouts;
            }
        }(),
        [&]() -> Task<void> {
            for (int i = 0; i < kValues; ++i) {
                // Every other value goes to a receiver already waiting, racing its deadline.
                if (i % 2 == 0)
                    co_await test::yield_until([&] { return ch.waiting_receivers() == 1; });
                CO_ASSERT(ch.send(i));
            }
        }());
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kValues));
    for (int i = 0; i < kValues; ++i)
        ASSERT_EQ(got[i], i);
    RecordProperty("recv_timeouts", recv_timeouts);
}

GALAY_INSTANTIATE_BACKENDS(UnboundedChannelTest);
