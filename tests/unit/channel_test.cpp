// galay::Channel: bounded MPMC between tasks on one or several threads. FIFO order, waiting when
// full or empty, close() semantics, cancellation and deadlines that lose nothing, and 4 producer
// threads x 4 consumer threads delivering every value exactly once with close() in the middle.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <memory>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

class ChannelTest : public test::BackendTest {};

TEST_P(ChannelTest, BuffersInFifoOrderAndTriesWithoutWaiting) {
    Channel<int> ch(3);
    EXPECT_THROW(Channel<int>(0), std::invalid_argument);
    run([&]() -> Task<void> {
        for (int i = 0; i < 3; ++i)
            CO_ASSERT(co_await ch.send(i));
        EXPECT_EQ(ch.size(), 3u);
        auto full = ch.try_send(9);
        CO_ASSERT(!full);
        EXPECT_EQ(full.error().code, std::errc::resource_unavailable_try_again);
        EXPECT_EQ(full.error().value, 9);
        for (int i = 0; i < 3; ++i) {
            auto v = co_await ch.recv();
            CO_ASSERT(v && *v == i);
        }
        EXPECT_EQ(ch.try_recv().error(), std::errc::resource_unavailable_try_again);
        CO_ASSERT(ch.try_send(4));
        auto v = ch.try_recv();
        CO_ASSERT(v && *v == 4);
    }());
}

TEST_P(ChannelTest, SendWaitsWhileFullAndRecvWhileEmptyKeepingOrder) {
    Channel<int> ch(2);
    std::vector<int> got;
    run([&]() -> Task<void> {
        auto producer = [&]() -> Task<void> {
            for (int i = 0; i < 20; ++i)
                CO_ASSERT(co_await ch.send(i)); // waits on every third value or so
        };
        auto consumer = [&]() -> Task<void> {
            for (int i = 0; i < 20; ++i) {
                if (i % 4 == 0)
                    co_await test::yield_until([&] { return ch.waiting_senders() == 1; });
                auto v = co_await ch.recv();
                CO_ASSERT(v);
                got.push_back(*v);
            }
        };
        co_await when_all(consumer(), producer());
    }());
    ASSERT_EQ(got.size(), 20u);
    for (int i = 0; i < 20; ++i)
        EXPECT_EQ(got[i], i);
}

TEST_P(ChannelTest, CarriesMoveOnlyValuesAndDestroysWhatIsLeftInTheBuffer) {
    auto probe = std::make_shared<int>(0);
    {
        Channel<std::unique_ptr<std::shared_ptr<int>>> ch(4);
        run([&]() -> Task<void> {
            for (int i = 0; i < 3; ++i)
                CO_ASSERT(co_await ch.send(std::make_unique<std::shared_ptr<int>>(probe)));
            auto v = co_await ch.recv();
            CO_ASSERT(v && **v == probe);
        }());
        EXPECT_EQ(probe.use_count(), 3); // two buffered + ours
    }
    EXPECT_EQ(probe.use_count(), 1);
}

TEST_P(ChannelTest, CloseFailsSendersWithTheirValuesAndReceiversDrainThenSeeClosed) {
    Channel<int> ch(2);
    run([&]() -> Task<void> {
        CO_ASSERT(co_await ch.send(1));
        CO_ASSERT(co_await ch.send(2));
        auto blocked = [&]() -> Task<void> {
            auto r = co_await ch.send(3); // full: waits until close
            CO_ASSERT(!r);
            EXPECT_EQ(r.error().code, errc::closed);
            EXPECT_EQ(r.error().value, 3);
        };
        auto closer = [&]() -> Task<void> {
            co_await test::yield_until([&] { return ch.waiting_senders() == 1; });
            ch.close();
            ch.close(); // idempotent
        };
        co_await when_all(blocked(), closer());
        EXPECT_TRUE(ch.is_closed());
        auto late = co_await ch.send(4);
        CO_ASSERT(!late);
        EXPECT_EQ(late.error().code, errc::closed);
        EXPECT_EQ(ch.try_send(5).error().code, errc::closed);
        auto a = co_await ch.recv();
        auto b = co_await ch.recv();
        CO_ASSERT(a && *a == 1 && b && *b == 2); // buffered before close: still delivered
        auto end = co_await ch.recv();
        CO_ASSERT(!end);
        EXPECT_EQ(end.error(), errc::closed);
        EXPECT_EQ(ch.try_recv().error(), errc::closed);
    }());
}

TEST_P(ChannelTest, CloseWakesEveryWaitingReceiver) {
    Channel<int> ch(1);
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
}

TEST_P(ChannelTest, ACancelledOrTimedOutReceiveTakesNothingAndLeavesNoTrace) {
    Channel<int> ch(4);
    run([&]() -> Task<void> {
        auto t = co_await ch.recv().timeout(1ms);
        CO_ASSERT(!t);
        EXPECT_EQ(t.error(), std::errc::timed_out);
        auto c = co_await when_any(as_task(ch.recv()), sleep(1ms));
        CO_ASSERT(c.index() == 1);
        EXPECT_EQ(ch.waiting_receivers(), 0u);
        // With a dead receiver still queued, this value would be handed into a destroyed frame.
        CO_ASSERT(co_await ch.send(7));
        EXPECT_EQ(ch.size(), 1u);
        auto v = co_await ch.recv();
        CO_ASSERT(v && *v == 7);
    }());
}

TEST_P(ChannelTest, ATimedOutSendHandsItsValueBackAndLeavesTheBufferAlone) {
    Channel<std::unique_ptr<int>> ch(1);
    run([&]() -> Task<void> {
        CO_ASSERT(co_await ch.send(std::make_unique<int>(1)));
        auto r = co_await ch.send(std::make_unique<int>(2)).timeout(1ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error().code, std::errc::timed_out);
        CO_ASSERT(r.error().value && *r.error().value == 2);
        EXPECT_EQ(ch.waiting_senders(), 0u);
        auto v = co_await ch.recv();
        CO_ASSERT(v && **v == 1);
        EXPECT_EQ(ch.size(), 0u);
    }());
}

TEST_P(ChannelTest, AValueHandedToAReceiverBeforeItsCancellationIsKept) {
    Channel<int> ch(1);
    run([&]() -> Task<void> {
        CancelSource src;
        auto receiver = [&]() -> Task<Result<int>> { co_return co_await ch.recv(); };
        auto other = [&]() -> Task<void> {
            co_await test::yield_until([&] { return ch.waiting_receivers() == 1; });
            CO_ASSERT(co_await ch.send(5)); // straight into the waiting receiver
            src.cancel();                   // after the hand-off: too late
        };
        auto [got, _] = co_await when_all(with_cancel(src, receiver()), other());
        CO_ASSERT(got && *got == 5);
        EXPECT_EQ(ch.size(), 0u);
    }());
}

TEST_P(ChannelTest, FourProducerAndFourConsumerThreadsDeliverEveryValueExactlyOnceAcrossClose) {
    // Each producer sends its own range of values until the channel is closed (a send that fails
    // hands its value back: not sent). close() comes in the middle, once consumers have seen half
    // of what the producers could send. Every value sent is received exactly once; nothing else.
    constexpr int kProducers = 4, kConsumers = 4, kPerProducer = 20000;
    constexpr int kTotal = kProducers * kPerProducer;
    Channel<int> ch(64);
    std::vector<std::atomic<std::uint8_t>> seen(kTotal);
    std::atomic<long long> sent_sum{0}, received_sum{0};
    std::atomic<int> sent{0}, received{0}, duplicates{0};
    auto producer = [&](int p) -> Task<void> {
        for (int i = 0; i < kPerProducer; ++i) {
            int v = p * kPerProducer + i;
            auto r = co_await ch.send(v);
            if (!r) {
                CO_ASSERT(r.error().code == errc::closed && r.error().value == v);
                co_return;
            }
            sent_sum += v;
            ++sent;
        }
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
    std::vector<Task<void>> threads;
    for (int p = 0; p < kProducers; ++p)
        threads.push_back(producer(p));
    for (int c = 0; c < kConsumers; ++c)
        threads.push_back(consumer());
    test::run_on_threads(options(), std::move(threads));
    EXPECT_TRUE(ch.is_closed());
    EXPECT_EQ(duplicates.load(), 0);
    EXPECT_EQ(received.load(), sent.load());
    EXPECT_EQ(received_sum.load(), sent_sum.load());
    EXPECT_GE(received.load(), kTotal / 2);
    EXPECT_EQ(ch.size(), 0u);
    EXPECT_EQ(ch.waiting_senders() + ch.waiting_receivers(), 0u);
}

TEST_P(ChannelTest, DeadlinesRacingSendsAndReceivesAcrossThreadsLoseAndDuplicateNothing) {
    // Both sides use short deadlines. A receive that timed out took nothing; a send that timed
    // out kept its value (and retries it). The receiver gets 0..N-1 in order, each once.
    constexpr int kValues = 2000;
    Channel<int> ch(2);
    std::vector<int> got;
    got.reserve(kValues);
    int recv_timeouts = 0, send_timeouts = 0;
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
            unsigned attempt = 0;
            for (int i = 0; i < kValues; ++i) {
                int v = i;
                for (;;) {
                    auto r = co_await ch.send(v).timeout(test::racing_timeout(attempt));
                    if (r) break;
                    CO_ASSERT(r.error().code == std::errc::timed_out);
                    v = r.error().value;
                    ++send_timeouts;
                }
            }
        }());
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kValues));
    for (int i = 0; i < kValues; ++i)
        ASSERT_EQ(got[i], i);
    RecordProperty("recv_timeouts", recv_timeouts);
    RecordProperty("send_timeouts", send_timeouts);
}

GALAY_INSTANTIATE_BACKENDS(ChannelTest);
