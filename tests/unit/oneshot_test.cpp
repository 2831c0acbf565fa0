// galay::oneshot: a value or an exception from one task to another, on one or two threads; a
// sender or receiver that goes away; deadlines and cancellation that keep the value.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <memory>
#include <stdexcept>
#include <string>

using namespace galay;
using namespace std::chrono_literals;

class OneshotTest : public test::BackendTest {};

TEST_P(OneshotTest, DeliversAValueSentBeforeOrAfterTheReceiverWaits) {
    run([]() -> Task<void> {
        auto [tx, rx] = oneshot<std::string>();
        CO_ASSERT(tx.send("early"));
        auto v = co_await rx;
        CO_ASSERT(v && *v == "early");
        auto again = co_await rx; // taken: nothing more will come
        CO_ASSERT(!again);
        EXPECT_EQ(again.error(), errc::closed);

        auto [tx2, rx2] = oneshot<std::unique_ptr<int>>();
        auto sender = [&]() -> Task<void> {
            co_await yield_now();
            CO_ASSERT(tx2.send(std::make_unique<int>(5)));
            EXPECT_FALSE(tx2.can_send());
            auto twice = tx2.send(std::make_unique<int>(6));
            CO_ASSERT(!twice);
            EXPECT_EQ(twice.error(), errc::closed);
        };
        auto [late, _] = co_await when_all(as_task(rx2.recv()), sender());
        CO_ASSERT(late && *late && **late == 5);
    }());
}

TEST_P(OneshotTest, AnExceptionSetByTheSenderIsRethrownByTheReceiver) {
    auto [tx, rx] = oneshot<int>();
    EXPECT_THROW(run([&]() -> Task<void> {
                     CO_ASSERT(tx.set_exception(
                         std::make_exception_ptr(std::runtime_error("worker failed"))));
                     (void)co_await rx;
                 }()),
                 std::runtime_error);
}

TEST_P(OneshotTest, ASenderGoneWithoutSendingClosesAndAReceiverGoneFailsTheSend) {
    run([]() -> Task<void> {
        auto [tx, rx] = oneshot<int>();
        auto dropper = [](OneshotSender<int> s) -> Task<void> {
            co_await yield_now();
            auto gone = std::move(s); // destroyed here without sending (the parameter itself
                                      // lives as long as the frame)
        };
        auto [r, _] = co_await when_all(as_task(rx.recv()), dropper(std::move(tx)));
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), errc::closed);

        auto [tx2, rx2] = oneshot<int>();
        { auto gone = std::move(rx2); }
        EXPECT_FALSE(tx2.can_send());
        auto s = tx2.send(1);
        CO_ASSERT(!s);
        EXPECT_EQ(s.error(), errc::closed);
    }());
}

TEST_P(OneshotTest, ATimedOutOrCancelledReceiveLeavesTheValueForLater) {
    run([]() -> Task<void> {
        auto [tx, rx] = oneshot<int>();
        auto t = co_await rx.recv().timeout(1ms);
        CO_ASSERT(!t);
        EXPECT_EQ(t.error(), std::errc::timed_out);
        auto c = co_await when_any(as_task(rx.recv()), sleep(1ms));
        CO_ASSERT(c.index() == 1);
        EXPECT_EQ(rx.try_recv().error(), std::errc::resource_unavailable_try_again);
        CO_ASSERT(tx.send(3));
        auto v = rx.try_recv();
        CO_ASSERT(v && *v == 3);
    }());
}

TEST_P(OneshotTest, CarriesAValueAcrossThreadsEveryTime) {
    // Sender and receiver on two schedulers, many pairs: the receiver sometimes waits, sometimes
    // finds the value there; its deadline races the send.
    constexpr int kPairs = 1000;
    std::vector<OneshotSender<int>> senders;
    std::vector<OneshotReceiver<int>> receivers;
    for (int i = 0; i < kPairs; ++i) {
        auto [tx, rx] = oneshot<int>();
        senders.push_back(std::move(tx));
        receivers.push_back(std::move(rx));
    }
    long long sum = 0;
    test::run_on_threads(
        options(),
        [&]() -> Task<void> {
            unsigned attempt = 0;
            for (int i = 0; i < kPairs; ++i) {
                Result<int> v = co_await receivers[i].recv().timeout(test::racing_timeout(attempt));
                while (!v) {
                    CO_ASSERT(v.error() == std::errc::timed_out);
                    v = co_await receivers[i];
                }
                sum += *v;
            }
        }(),
        [&]() -> Task<void> {
            for (int i = 0; i < kPairs; ++i) {
                CO_ASSERT(senders[i].send(i));
                if (i % 3 == 0) co_await yield_now();
            }
        }());
    EXPECT_EQ(sum, static_cast<long long>(kPairs) * (kPairs - 1) / 2);
}

GALAY_INSTANTIATE_BACKENDS(OneshotTest);
