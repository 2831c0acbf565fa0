// recv_pooled: receiving into buffers lent by the scheduler (io_uring: multishot recv over a
// provided-buffer ring; epoll: a free list), on both backends.
#include "runtime/scheduler_access.hpp" // (the driver's op and pool counts)
#include "support/backends.hpp"
#include "support/pooled_echo.hpp"
#include "support/tcp_pair.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// Reads from `s` with recv_pooled until `n` bytes have arrived.
Task<std::string> read_pooled(TcpStream& s, std::size_t n) {
    std::string got;
    while (got.size() < n) {
        auto b = co_await s.recv_pooled().timeout(10s);
        if (!b) throw Error(b.error(), "recv_pooled");
        if (b->empty()) throw std::runtime_error("unexpected EOF");
        got.append(b->data(), b->size());
    }
    co_return got;
}

} // namespace

class PooledRecvTest : public test::BackendTest {
protected:
    // A small pool, so that the tests also run the pool-exhausted paths.
    SchedulerOptions small_pool() const {
        return {.backend = GetParam(), .pool_buffers = 8, .pool_buffer_size = 512};
    }
};

TEST_P(PooledRecvTest, EchoServerOnPooledBuffersKeepsEveryByte) {
    Scheduler sched(small_pool());
    std::uint64_t ok = sched.block_on([]() -> Task<std::uint64_t> {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        if (!l) throw Error(l.error(), "bind");
        co_return co_await test::pooled_echo_round_trips(
            *l, 50, 200, [](std::span<std::byte> out, int id, int m) {
                for (std::size_t i = 0; i < out.size(); ++i)
                    out[i] = static_cast<std::byte>(id * 31 + m * 7 + static_cast<int>(i));
            });
    }());
    EXPECT_EQ(ok, 50u * 200u);
}

TEST_P(PooledRecvTest, TimeoutConsumesNothingAndLaterBytesArrive) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        auto r = co_await s.recv_pooled().timeout(10ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        std::string msg = "after the timeout";
        CO_ASSERT(co_await c.send_all(msg));
        EXPECT_EQ(co_await read_pooled(s, msg.size()), msg);
    }());
}

TEST_P(PooledRecvTest, CancelledWaitLosesNoBytes) {
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        for (int round = 0; round < 20; ++round) {
            // The wait loses the race against an immediate task and is cancelled...
            auto w =
                co_await when_any(as_task(s.recv_pooled()), []() -> Task<void> { co_return; }());
            EXPECT_EQ(w.index(), 1u);
            // ...and the bytes sent afterwards are all received, in order.
            std::string msg = "round " + std::to_string(round);
            CO_ASSERT(co_await c.send_all(msg));
            EXPECT_EQ(co_await read_pooled(s, msg.size()), msg);
        }
    }());
}

TEST_P(PooledRecvTest, ExhaustedPoolWaitsForAReturnedBuffer) {
    Scheduler sched(small_pool());
    sched.block_on([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        // Hold every buffer of the pool (8 x 512), one receive at a time.
        std::vector<PooledBuffer> held;
        std::string sent;
        for (int i = 0; i < 8; ++i) {
            std::string piece(100, static_cast<char>('a' + i));
            sent += piece;
            CO_ASSERT(co_await c.send_all(piece));
            auto b = co_await s.recv_pooled().timeout(10s);
            CO_ASSERT(b && !b->empty());
            held.push_back(std::move(*b));
        }
        std::string got;
        for (auto& b : held)
            got.append(b.data(), b.size());
        std::string more(300, 'z');
        CO_ASSERT(co_await c.send_all(more));
        sent += more;
        // No buffer is free: the next receive waits rather than fail, and completes as soon as
        // one is given back.
        auto releaser = [&]() -> Task<void> {
            co_await yield_now();
            held.front().release();
            co_return;
        };
        auto [next, _] = co_await when_all(as_task(s.recv_pooled().timeout(10s)), releaser());
        CO_ASSERT(next && !next->empty());
        got.append(next->data(), next->size());
        next->release();
        held.clear();
        got += co_await read_pooled(s, sent.size() - got.size());
        EXPECT_EQ(got, sent);
    }());
}

TEST_P(PooledRecvTest, EofIsAnEmptyBufferAndClosedStreamsReturnTheirBuffers) {
    Scheduler sched(small_pool());
    for (int i = 0; i < 40; ++i) { // more connections than buffers: leaks would exhaust the pool
        sched.block_on([]() -> Task<void> {
            auto [c, s] = co_await test::loopback_pair();
            std::string msg = "bye";
            CO_ASSERT(co_await c.send_all(msg));
            CO_ASSERT(c.shutdown(Shutdown::write));
            EXPECT_EQ(co_await read_pooled(s, 3), "bye");
            auto eof = co_await s.recv_pooled().timeout(10s);
            CO_ASSERT(eof);
            EXPECT_TRUE(eof->empty());
        }());
    }
}

// The server side closes while its multishot recv is still armed (io_uring). The kernel request
// holds the socket, so unless the close cancels it first the peer never sees the FIN.
TEST_P(PooledRecvTest, ClosingWhileARecvIsArmedSendsFinToThePeer) {
    Scheduler sched(small_pool());
    sched.block_on([]() -> Task<void> {
        for (int round = 0; round < 3; ++round) {
            auto [c, s] = co_await test::loopback_pair();
            CO_ASSERT(co_await c.send_all(std::string_view("hi")));
            EXPECT_EQ(co_await read_pooled(s, 2), "hi"); // arms the multishot recv
            {
                TcpStream gone = std::move(s); // destroyed here: close with the recv armed
            }
            std::array<char, 16> buf;
            auto n = co_await c.recv(buf).timeout(10s);
            CO_ASSERT(n); // a timeout here means the FIN never left
            EXPECT_EQ(*n, 0u);
        }
    }());
}

// A closed stream's fd number is usually reused by the next accept at once. Cancelling the old
// connection's requests must not touch the new one's.
TEST_P(PooledRecvTest, AReusedFdNumberIsNotCancelledByTheOldClose) {
    // The second connection must be accepted after the first is closed, so that it gets the
    // same fd number: a multishot accept would take it into a new fd as soon as it connects.
    SchedulerOptions options = small_pool();
    options.multishot_accept = false;
    Scheduler sched(options);
    sched.block_on([]() -> Task<void> {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        CO_ASSERT(l);
        const auto addr = SocketAddr::loopback_v4(l->local_addr()->port());
        for (int round = 0; round < 3; ++round) {
            auto c1 = co_await TcpStream::connect(addr);
            auto s1 = co_await l->accept();
            CO_ASSERT(c1 && s1);
            CO_ASSERT(co_await c1->send_all(std::string_view("a")));
            EXPECT_EQ(co_await read_pooled(*s1, 1), "a");
            const int old_fd = s1->fd();
            auto c2 = co_await TcpStream::connect(addr); // (takes a new fd number itself)
            { TcpStream gone = std::move(*s1); }
            auto s2 = co_await l->accept();
            CO_ASSERT(c2 && s2);
            EXPECT_EQ(s2->fd(), old_fd); // the case under test
            CO_ASSERT(co_await c2->send_all(std::string_view("bc")));
            EXPECT_EQ(co_await read_pooled(*s2, 2), "bc");
            CO_ASSERT(co_await c2->send_all(std::string_view("de")));
            EXPECT_EQ(co_await read_pooled(*s2, 2), "de");
        }
    }());
}

// On io_uring a stream that has transferred data sits in its scheduler's registered-file table,
// which holds the socket open by itself. Destroying the stream on another thread (here one with
// no scheduler at all) must still get the slot cleared, or the peer would never see the FIN.
TEST_P(PooledRecvTest, AStreamDestroyedOnAnotherThreadStillSendsFin) {
    auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
    ASSERT_TRUE(l);
    const std::uint16_t port = l->local_addr()->port();
    std::promise<TcpStream> handoff;
    auto stream = handoff.get_future();
    const Backend backend = GetParam();
    std::thread server([&] {
        Scheduler sched(SchedulerOptions{.backend = backend});
        sched.block_on([&]() -> Task<void> {
            auto data = co_await l->accept();
            auto control = co_await l->accept();
            CO_ASSERT(data && control);
            std::string got = co_await read_pooled(*data, 2);
            EXPECT_EQ(got, "hi");
            for (char ch : std::string_view("ok!")) // (its fourth transfer registers the fd)
                CO_ASSERT(co_await data->send_all(std::string_view(&ch, 1)));
            handoff.set_value(std::move(*data));
            std::array<char, 8> buf; // keep the loop running until the test says stop
            auto n = co_await control->recv(buf).timeout(30s);
            EXPECT_TRUE(n && *n == 0);
        }());
    });
    int data = test::connect_blocking(port);
    int control = test::connect_blocking(port);
    ASSERT_GE(data, 0);
    ASSERT_GE(control, 0);
    ASSERT_EQ(::send(data, "hi", 2, 0), 2);
    char buf[8];
    ssize_t got;
    do // (a socket with SO_RCVTIMEO is not restarted after an interruption: EINTR under load)
        got = ::recv(data, buf, 3, MSG_WAITALL);
    while (got < 0 && errno == EINTR);
    ASSERT_EQ(got, 3) << "errno " << errno;
    {
        TcpStream s = stream.get(); // destroyed right here, on a thread without a scheduler
    }
    ssize_t n;
    do
        n = ::recv(data, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    EXPECT_EQ(n, 0) << "no FIN: errno " << errno;
    ::close(control);
    server.join();
    ::close(data);
}

// release() hands the fd to the caller, who closes it with close(2): that must close the socket
// for real (no registered-file slot left holding it).
TEST_P(PooledRecvTest, AReleasedFdClosedByTheCallerSendsFin) {
    Scheduler sched(small_pool());
    sched.block_on([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        CO_ASSERT(co_await c.send_all(std::string_view("hi")));
        EXPECT_EQ(co_await read_pooled(s, 2), "hi");
        for (char ch : std::string_view("ok!")) // (its fourth transfer registers the fd)
            CO_ASSERT(co_await s.send_all(std::string_view(&ch, 1)));
        std::array<char, 3> ok3;
        auto ok = co_await c.recv_exact(ok3).timeout(10s);
        CO_ASSERT(ok);
        std::array<char, 16> buf;
        int fd = s.release(); // (its multishot recv is still armed on io_uring)
        CO_ASSERT(fd >= 0);
        ::close(fd);
        auto n = co_await c.recv(buf).timeout(10s);
        CO_ASSERT(n);
        EXPECT_EQ(*n, 0u);
    }());
}

// A client sends 1 MiB chunks and never reads, and its connection's task stops receiving: on
// io_uring a multishot recv that went on receiving for it into the shared pool would hold every
// buffer and starve every other connection. A connection may hold only a bounded share of the
// pool; a consumer that stops reading slows only itself. The pool is small here (64 x 4 KiB) so
// that an unbounded share would exhaust it after 256 KiB.
enum class Stall {
    task_sleeps,         // the task receives once, then waits on something else
    echo_blocks_in_send, // bench_server's echo: send_all waits for a client that never reads
};

class GreedyClientTest : public PooledRecvTest {
protected:
    static constexpr unsigned kBuffers = 64;

    void run_greedy(Stall stall) {
        Scheduler sched(
            {.backend = GetParam(), .pool_buffers = kBuffers, .pool_buffer_size = 4096});
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        ASSERT_TRUE(l);
        const std::uint16_t port = l->local_addr()->port();
        // The greedy client: a plain blocking socket on a thread of its own, sending 1 MiB chunks
        // until the test shuts it down. Small socket buffers, so that an echo to it blocks soon.
        int greedy = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_GE(greedy, 0);
        int small = 4096;
        ::setsockopt(greedy, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(::connect(greedy, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        std::thread writer([greedy] {
            std::vector<char> chunk(1 << 20, 'x');
            while (::send(greedy, chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) {
            }
        });
        auto echo = [](TcpStream s) -> Task<void> {
            for (;;) {
                auto b = co_await s.recv_pooled();
                if (!b || b->empty()) co_return;
                if (!co_await s.send_all(b->bytes())) co_return;
            }
        };
        auto sleeper = [](TcpStream s) -> Task<void> {
            auto b = co_await s.recv_pooled();
            (void)co_await sleep(1h); // destroyed with the scheduler
        };
        std::string pong;
        std::size_t held_by_greedy = 0;
        std::size_t in_use = 0;
        sched.block_on([&]() -> Task<void> {
            auto g = co_await l->accept();
            CO_ASSERT(g);
            const int greedy_fd = g->fd();
            CO_ASSERT(g->set_send_buffer_size(4096));
            spawn(stall == Stall::task_sleeps ? sleeper(std::move(*g)) : echo(std::move(*g)));
            // Wait until the greedy connection has stopped receiving ahead with bytes queued (its
            // share is used up; before the fix: the pool ran dry). epoll receives nothing
            // ahead: nothing to wait for there.
            detail::Driver& d = detail::SchedulerAccess::driver(current_scheduler());
            for (int i = 0; i < 10'000 && GetParam() == Backend::io_uring; ++i) {
                if (d.pool_buffers_queued(greedy_fd) > 0 && !d.receives_ahead(greedy_fd)) break;
                co_await sleep(1ms); // (a bound on the wait, not a synchronisation)
            }
            auto c = co_await TcpStream::connect(SocketAddr::loopback_v4(port));
            auto s = co_await l->accept();
            CO_ASSERT(c && s);
            spawn(echo(std::move(*s)));
            CO_ASSERT(co_await c->send_all(std::string_view("ping")));
            std::array<char, 4> buf;
            auto n = co_await c->recv_exact(buf).timeout(10s); // a failure bound, not speed
            if (n) pong.assign(buf.data(), buf.size());
            held_by_greedy = d.pool_buffers_queued(greedy_fd);
            in_use = d.pool_buffers_in_use();
        }());
        ::shutdown(greedy, SHUT_RDWR); // the writer's send fails
        writer.join();
        ::close(greedy);
        EXPECT_EQ(pong, "ping") << "the second client was not served: pool buffers in use "
                                << in_use << " of " << kBuffers;
        EXPECT_LE(held_by_greedy, kBuffers / 8) << "the greedy connection holds too much";
        EXPECT_LT(in_use, kBuffers / 4);
    }
};

TEST_P(GreedyClientTest, AConnectionWhoseTaskStopsReceivingHoldsABoundedShare) {
    run_greedy(Stall::task_sleeps);
}

TEST_P(GreedyClientTest, AClientThatNeverReadsDoesNotStarveTheOthers) {
    run_greedy(Stall::echo_blocks_in_send);
}

// The bytes a stalled connection's recv brought (some queued in pool buffers, some copied out of
// the pool) and the bytes that waited in the socket while it was stopped all arrive, in order,
// once its task receives again.
TEST_P(GreedyClientTest, AStalledConnectionLosesNoByteWhenItResumes) {
    Scheduler sched({.backend = GetParam(), .pool_buffers = kBuffers, .pool_buffer_size = 4096});
    constexpr std::size_t kTotal = 4 << 20;
    auto byte_at = [](std::size_t i) { return static_cast<char>((i * 7 + i / 4093) & 0xff); };
    sched.block_on([&]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        auto sender = [&]() -> Task<void> {
            std::vector<char> chunk(1 << 20);
            for (std::size_t off = 0; off < kTotal; off += chunk.size()) {
                for (std::size_t i = 0; i < chunk.size(); ++i)
                    chunk[i] = byte_at(off + i);
                CO_ASSERT(co_await c.send_all(chunk));
            }
            CO_ASSERT(c.shutdown(Shutdown::write));
        };
        auto receiver = [&]() -> Task<void> {
            std::size_t got = 0;
            auto check = [&](const PooledBuffer& b) {
                for (std::size_t i = 0; i < b.size(); ++i)
                    if (b.data()[i] != byte_at(got + i)) return false;
                got += b.size();
                return true;
            };
            auto first = co_await s.recv_pooled().timeout(10s);
            CO_ASSERT(first && !first->empty() && check(*first));
            // Stop receiving until the connection's share is used up and its recv stopped.
            detail::Driver& d = detail::SchedulerAccess::driver(current_scheduler());
            for (int i = 0; i < 10'000 && GetParam() == Backend::io_uring; ++i) {
                if (d.pool_buffers_queued(s.fd()) > 0 && !d.receives_ahead(s.fd())) break;
                (void)co_await sleep(1ms); // (a bound on the wait, not a synchronisation)
            }
            if (GetParam() == Backend::io_uring) {
                EXPECT_LE(d.pool_buffers_queued(s.fd()), 8u);
            }
            for (;;) {
                auto b = co_await s.recv_pooled().timeout(10s);
                CO_ASSERT(b);
                if (b->empty()) break;
                CO_ASSERT(check(*b));
            }
            EXPECT_EQ(got, kTotal);
        };
        co_await when_all(sender(), receiver());
    }());
    EXPECT_EQ(detail::SchedulerAccess::driver(sched).pool_buffers_in_use(),
              0u); // every buffer and chunk came back
}

GALAY_INSTANTIATE_BACKENDS(GreedyClientTest);

GALAY_INSTANTIATE_BACKENDS(PooledRecvTest);
