// SchedulerOptions::fair_completions, on every backend: data that reaches many connections at
// once is handed to all of their receivers in the same loop turn. (io_uring without it, on
// Linux >= 6.13: the kernel completes at most ~20 deferred receives per pass through it, so 64
// take several turns; epoll returns every ready socket from one epoll_wait either way.)
#include "support/backends.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <vector>

using namespace galay;

namespace {

class FairCompletionsTest : public test::BackendTest {};

constexpr int kConnections = 64;

TEST_P(FairCompletionsTest, EveryReadyReceiveCompletesInTheSameTurn) {
    SchedulerOptions o = options();
    o.fair_completions = true;
    Scheduler s(o);
    s.block_on([]() -> Task<void> {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        CO_ASSERT(l.has_value());
        const std::uint16_t port = l->local_addr()->port();
        std::vector<TcpStream> clients, servers;
        for (int i = 0; i < kConnections; ++i) {
            auto [c, a] = co_await when_all(
                as_task(TcpStream::connect(SocketAddr::loopback_v4(port))), as_task(l->accept()));
            CO_ASSERT(c.has_value() && a.has_value());
            clients.push_back(std::move(*c));
            servers.push_back(std::move(*a));
        }

        std::uint64_t turn = 0; // loop turns, counted by this task's yields
        int received = 0;
        std::vector<std::uint64_t> turn_of(kConnections, 0);
        auto receiver = [&](int i) -> Task<void> {
            char b[4];
            auto n = co_await servers[i].recv(std::span(b));
            CO_ASSERT(n.has_value() && *n == 1);
            turn_of[i] = turn;
            ++received;
        };
        std::vector<JoinHandle<void>> handles;
        for (int i = 0; i < kConnections; ++i)
            handles.push_back(spawn(receiver(i)));
        // Let every receive start and reach the kernel (it finds nothing and waits).
        for (int i = 0; i < 3; ++i)
            co_await yield_now();
        CO_ASSERT(received == 0);
        // One byte to every connection, with send(2) itself: all 64 become ready at once,
        // while this task still runs.
        for (TcpStream& c : clients)
            CO_ASSERT(::send(c.fd(), "x", 1, MSG_NOSIGNAL) == 1);
        while (received < kConnections) {
            ++turn;
            co_await yield_now();
        }
        for (auto& h : handles)
            co_await std::move(h);
        const auto [lo, hi] = std::minmax_element(turn_of.begin(), turn_of.end());
        EXPECT_EQ(*lo, *hi) << "the 64 receives completed over turns " << *lo << " to " << *hi;
    }());
}

GALAY_INSTANTIATE_BACKENDS(FairCompletionsTest);

} // namespace
