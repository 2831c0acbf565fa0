// Accepting connections at the limit, on every backend and both accept paths of io_uring: the
// multishot accept (one request armed per listener) and the plain one request per accept() that
// kernels before 5.19 get (forced here with SchedulerOptions::multishot_accept = false). On epoll
// the option changes nothing and both variants run the same path.
#include "support/backends.hpp"
#include "support/fds.hpp"
#include "support/tcp_pair.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <tuple>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

using Param = std::tuple<Backend, bool>; // backend, multishot accept

class AcceptTest : public ::testing::TestWithParam<Param> {
protected:
    void SetUp() override { test::skip_unless_usable(backend()); }
    Backend backend() const { return std::get<0>(GetParam()); }
    template <class T>
    T run(Task<T> t) {
        Scheduler s({.backend = backend(), .multishot_accept = std::get<1>(GetParam())});
        return s.block_on(std::move(t));
    }
};

TcpListener listen_backlogged(int backlog = 4096) {
    auto l = TcpListener::bind(SocketAddr::loopback_v4(0), {.backlog = backlog});
    if (!l) throw Error(l.error(), "bind");
    return std::move(*l);
}

/// Client `id`: connect, send its 4-byte id, expect it echoed back, close.
Task<bool> one_round_trip(std::uint16_t port, std::uint32_t id) {
    auto c = co_await TcpStream::connect(SocketAddr::loopback_v4(port)).timeout(10s);
    if (!c) co_return false;
    std::array<char, 4> out, in{};
    std::memcpy(out.data(), &id, 4);
    if (!co_await c->send_all(out)) co_return false;
    auto n = co_await c->recv_exact(in).timeout(10s);
    co_return n&& in == out;
}

Task<void> echo_once(TcpStream s, int& served, int& finished) {
    std::array<char, 4> buf;
    if (co_await s.recv_exact(buf).timeout(10s) && co_await s.send_all(buf)) ++served;
    ++finished;
}

} // namespace

TEST_P(AcceptTest, StormOfAThousandConnectionsIsAllServed) {
    constexpr int kClients = 1000;
    // Each connection holds two fds (client and server side) in this one process.
    const std::size_t limit = test::fds_available(2 * kClients + 64);
    const int concurrent = static_cast<int>(std::min<std::size_t>(kClients, (limit - 64) / 2));
    ASSERT_GT(concurrent, 100) << "RLIMIT_NOFILE too low for an accept storm: " << limit;
    int served = 0, finished = 0, ok = 0;
    run([&]() -> Task<void> {
        TcpListener l = listen_backlogged();
        const std::uint16_t port = l.local_addr()->port();
        auto server = [&]() -> Task<void> {
            for (int i = 0; i < kClients; ++i) {
                auto s = co_await l.accept().timeout(10s);
                CO_ASSERT(s.has_value());
                spawn(echo_once(std::move(*s), served, finished));
            }
            while (finished < kClients) // (each one ends: its operations have timeouts)
                co_await yield_now();
        };
        auto clients = [&]() -> Task<void> {
            for (int first = 0; first < kClients; first += concurrent) {
                std::vector<Task<bool>> wave;
                for (int i = first; i < std::min(kClients, first + concurrent); ++i)
                    wave.push_back(one_round_trip(port, static_cast<std::uint32_t>(i)));
                for (bool r : co_await when_all(std::move(wave)))
                    ok += r;
            }
        };
        co_await when_all(server(), clients());
    }());
    EXPECT_EQ(ok, kClients);
    EXPECT_EQ(served, kClients);
}

TEST_P(AcceptTest, ConnectionsArrivingWhileNobodyAcceptsAreEachDeliveredOnce) {
    // The first accept arms the multishot (on io_uring); then 600 clients connect while the
    // server accepts nothing, more than the 256 the driver queues before it pauses. Every one
    // must come out of accept() exactly once, carrying its own client's bytes.
    constexpr int kClients = 600;
    ASSERT_GE(test::fds_available(2 * kClients + 64), std::size_t{2 * kClients + 64});
    run([&]() -> Task<void> {
        TcpListener l = listen_backlogged();
        const std::uint16_t port = l.local_addr()->port();
        auto first = co_await test::loopback_pair(&l);
        std::vector<TcpStream> clients;
        for (std::uint32_t id = 0; id < kClients; ++id) {
            auto c = co_await TcpStream::connect(SocketAddr::loopback_v4(port)).timeout(10s);
            CO_ASSERT(c.has_value());
            CO_ASSERT(co_await c->send_all(std::span(reinterpret_cast<const char*>(&id), 4)));
            clients.push_back(std::move(*c));
            if (id % 64 == 0) co_await yield_now(); // let completions of the multishot land
        }
        std::vector<int> seen(kClients, 0);
        for (int i = 0; i < kClients; ++i) {
            auto s = co_await l.accept().timeout(10s);
            CO_ASSERT(s.has_value());
            std::uint32_t id = UINT32_MAX;
            CO_ASSERT(co_await s->recv_exact(std::span(reinterpret_cast<char*>(&id), 4)));
            CO_ASSERT(id < kClients);
            ++seen[id];
        }
        EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kClients);
    }());
}

TEST_P(AcceptTest, ClosingAListenerWithConnectionsWaitingLeaksNoFd) {
    constexpr int kClients = 50;
    const int before = test::open_fds();
    run([&]() -> Task<void> {
        const int in_scheduler = test::open_fds();
        {
            TcpListener l = listen_backlogged();
            const std::uint16_t port = l.local_addr()->port();
            std::vector<TcpStream> clients;
            (void)co_await test::loopback_pair(&l); // one accepted connection arms the multishot
            for (int i = 0; i < kClients; ++i) {
                auto c = co_await TcpStream::connect(SocketAddr::loopback_v4(port)).timeout(10s);
                CO_ASSERT(c.has_value());
                clients.push_back(std::move(*c));
            }
            co_await yield_now();
            CO_ASSERT(co_await l.close()); // connections accepted by nobody are dropped
            // Each client sees its server side go away (EOF or reset), so each was closed.
            for (TcpStream& c : clients) {
                std::array<char, 1> b;
                auto n = co_await c.recv(b).timeout(10s);
                EXPECT_TRUE(!n ? n.error() != std::errc::timed_out : *n == 0);
            }
        }
        co_await yield_now(); // (io_uring closes streams with the loop's next submission)
        EXPECT_EQ(test::open_fds(), in_scheduler);
    }());
    EXPECT_EQ(test::open_fds(), before);
}

TEST_P(AcceptTest, TimedOutAcceptLosesNoConnection) {
    run([&]() -> Task<void> {
        TcpListener l = listen_backlogged();
        const std::uint16_t port = l.local_addr()->port();
        for (int round = 0; round < 3; ++round) {
            auto none = co_await l.accept().timeout(1ms);
            CO_ASSERT(!none && none.error() == std::errc::timed_out);
            auto c = co_await TcpStream::connect(SocketAddr::loopback_v4(port)).timeout(10s);
            CO_ASSERT(c.has_value());
            auto s = co_await l.accept().timeout(10s);
            CO_ASSERT(s.has_value());
            EXPECT_EQ(s->peer_addr()->port(), c->local_addr()->port());
        }
    }());
}

INSTANTIATE_TEST_SUITE_P(Backends, AcceptTest,
                         ::testing::Combine(::testing::Values(Backend::io_uring, Backend::epoll),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                             return std::string(backend_name(std::get<0>(info.param))) +
                                    (std::get<1>(info.param) ? "_multishot" : "_single");
                         });
