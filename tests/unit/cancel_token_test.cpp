// galay::CancelToken: cancel() from a plain thread or a task on another worker cancels every
// attached task on its own worker (a sleep, a TCP recv in the kernel), a task attached after
// cancel() starts cancelled, wait() across workers, and cancel() racing tasks that finish.
#include "support/backends.hpp"

#include <atomic>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

class CancelTokenTest : public test::BackendTest {};

/// 1 when its sleep was cancelled, 0 when it slept an hour.
Task<int> sleeps_until_cancelled(std::atomic<int>& started) {
    ++started;
    auto r = co_await sleep(1h);
    co_return !r && r.error() == std::errc::operation_canceled ? 1 : 0;
}

/// 1 when a recv on a connected TCP stream (no data ever comes) was cancelled.
Task<int> recv_until_cancelled(std::atomic<int>& started) {
    auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
    if (!listener) co_return -1;
    auto addr = listener->local_addr();
    if (!addr) co_return -2;
    auto client = co_await TcpStream::connect(*addr).timeout(5s);
    if (!client) co_return -3;
    auto server = co_await listener->accept().timeout(5s);
    if (!server) co_return -4;
    ++started;
    std::array<char, 16> buf;
    auto n = co_await server->recv(buf);
    co_return !n && n.error() == std::errc::operation_canceled ? 1 : 0;
}

} // namespace

TEST_P(CancelTokenTest, APlainThreadCancelsTasksOnEveryWorkerEachOnItsOwn) {
    Runtime rt(rt_options(2));
    CancelToken token;
    std::atomic<int> started{0};
    std::vector<JoinHandle<int>> handles;
    for (unsigned i = 0; i < 4; ++i)
        handles.push_back(rt.spawn_on(i % 2, with_cancel(token, sleeps_until_cancelled(started))));
    for (unsigned i = 0; i < 2; ++i)
        handles.push_back(rt.spawn_on(i % 2, with_cancel(token, recv_until_cancelled(started))));
    while (started.load() != 6)
        std::this_thread::yield();
    EXPECT_FALSE(token.cancelled());
    std::thread canceller([&] { token.cancel(); });
    canceller.join();
    EXPECT_TRUE(token.cancelled());
    for (auto& h : handles)
        EXPECT_EQ(h.join(), 1);
}

TEST_P(CancelTokenTest, ATaskAttachedAfterCancelStartsCancelled) {
    Runtime rt(rt_options(1));
    CancelToken token;
    token.cancel();
    token.cancel(); // idempotent
    std::atomic<int> started{0};
    EXPECT_EQ(rt.spawn(with_cancel(token, sleeps_until_cancelled(started))).join(), 1);
}

TEST_P(CancelTokenTest, ATaskOnAnotherWorkerWaitsForTheToken) {
    Runtime rt(rt_options(2));
    CancelToken token;
    auto r = rt.spawn_on(0,
                         [](Runtime& rt, CancelToken& token) -> Task<int> {
                             auto early = co_await token.wait().timeout(1ms);
                             if (early || early.error() != std::errc::timed_out) co_return -1;
                             auto waiter = rt.spawn_on(1, [](CancelToken& token) -> Task<int> {
                                 auto w = co_await token.wait();
                                 co_return w ? 1 : -2;
                             }(token));
                             token.cancel();
                             co_return co_await waiter;
                         }(rt, token))
                 .join();
    EXPECT_EQ(r, 1);
}

TEST_P(CancelTokenTest, AnAttachedTaskThatFinishesGivesItsValueAndExceptionsPassThrough) {
    Runtime rt(rt_options(1));
    CancelToken token;
    EXPECT_EQ(rt.spawn(with_cancel(token, []() -> Task<int> { co_return 5; }())).join(), 5);
    auto thrower = rt.spawn(with_cancel(token, []() -> Task<void> {
        co_await yield_now();
        throw std::runtime_error("boom");
    }()));
    EXPECT_THROW(thrower.join(), std::runtime_error);
    EXPECT_FALSE(token.cancelled());
}

TEST_P(CancelTokenTest, CancelRacingTasksThatFinishLosesNothing) {
    // Each round: tasks on two workers that yield a few times and finish, and a plain thread
    // that cancels the round's token meanwhile. Every task ends, either with its value or
    // cancelled; nothing hangs or crashes (TSan checks the hand-over).
    constexpr int kRounds = 200;
    Runtime rt(rt_options(2));
    int finished = 0, cancelled = 0;
    for (int round = 0; round < kRounds; ++round) {
        CancelToken token;
        std::vector<JoinHandle<int>> hs;
        for (unsigned i = 0; i < 4; ++i)
            hs.push_back(rt.spawn_on(i % 2, with_cancel(token, [](int n) -> Task<int> {
                                         for (int k = 0; k < n; ++k) {
                                             auto r = co_await sleep(0ns);
                                             if (!r) co_return 0;
                                         }
                                         co_return 1;
                                     }(round % 5))));
        std::thread canceller([&] { token.cancel(); });
        canceller.join();
        for (auto& h : hs)
            (h.join() == 1 ? finished : cancelled) += 1;
    }
    EXPECT_EQ(finished + cancelled, kRounds * 4);
    RecordProperty("finished", finished);
    RecordProperty("cancelled", cancelled);
}

GALAY_INSTANTIATE_BACKENDS(CancelTokenTest);
