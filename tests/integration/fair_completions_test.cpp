// SchedulerOptions::fair_completions, on every backend: data that reaches many connections at
// once is handed to all of their receivers in the same loop turn. Without it the turns take
// bounded batches: on io_uring (Linux >= 6.13) the kernel completes at most ~20 deferred
// receives per pass through it, and the epoll driver asks epoll_wait for at most 64 fds.
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"

#include <sys/socket.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

using namespace galay;

namespace {

class FairCompletionsTest : public test::BackendTest {};

bool kernel_at_least(int major, int minor) {
    utsname u{};
    int ma = 0, mi = 0;
    if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &ma, &mi) != 2) return false;
    return ma > major || (ma == major && mi >= minor);
}

// More connections than one epoll_wait returns (64) and than one io_uring pass completes (~20).
constexpr int kConnections = 200;

/// Data reaches `kConnections` connections at once (one byte each, while the test's task runs);
/// returns the loop turn in which each receive completed, counted by the test task's yields.
std::vector<std::uint64_t> turns_of_ready_receives(SchedulerOptions o) {
    std::vector<std::uint64_t> turn_of(kConnections, 0);
    Scheduler s(o);
    s.block_on([&]() -> Task<void> {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        CO_ASSERT(l.has_value());
        std::vector<TcpStream> clients, servers;
        for (int i = 0; i < kConnections; ++i) {
            auto [c, a] = co_await test::loopback_pair(&*l);
            clients.push_back(std::move(c));
            servers.push_back(std::move(a));
        }

        std::uint64_t turn = 0;
        int received = 0;
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
        // One byte to every connection, with send(2) itself: all become ready at once, while
        // this task still runs.
        for (TcpStream& c : clients)
            CO_ASSERT(::send(c.fd(), "x", 1, MSG_NOSIGNAL) == 1);
        while (received < kConnections) {
            ++turn;
            co_await yield_now();
        }
        for (auto& h : handles)
            co_await std::move(h);
    }());
    return turn_of;
}

TEST_P(FairCompletionsTest, EveryReadyReceiveCompletesInTheSameTurn) {
    SchedulerOptions o = options();
    o.fair_completions = true;
    const std::vector<std::uint64_t> turn_of = turns_of_ready_receives(o);
    const auto [lo, hi] = std::minmax_element(turn_of.begin(), turn_of.end());
    EXPECT_EQ(*lo, *hi) << "the " << kConnections << " receives completed over turns " << *lo
                        << " to " << *hi;
}

// Without fair_completions the loop takes ready connections in bounded batches, so that a
// batch's handlers run while its connections' memory is still in cache: on epoll 64 ready fds
// a turn, on io_uring what one pass through the kernel completes (~20 since Linux 6.13; every
// ready one before, where this test is skipped).
TEST_P(FairCompletionsTest, WithoutItTheReadyReceivesCompleteInBoundedBatches) {
    if (GetParam() == Backend::io_uring && !kernel_at_least(6, 13))
        GTEST_SKIP() << "io_uring completes every ready receive per pass before Linux 6.13";
    SchedulerOptions o = options();
    o.fair_completions = false;
    const std::vector<std::uint64_t> turn_of = turns_of_ready_receives(o);
    std::map<std::uint64_t, int> per_turn;
    for (std::uint64_t t : turn_of)
        ++per_turn[t];
    int most = 0;
    for (const auto& [turn, count] : per_turn)
        most = std::max(most, count);
    EXPECT_LE(most, 64) << "one turn completed " << most << " of the " << kConnections
                        << " ready receives";
    EXPECT_GE(per_turn.size(), std::size_t{kConnections / 64 + 1});
}

GALAY_INSTANTIATE_BACKENDS(FairCompletionsTest);

} // namespace
