// recv_pooled: receiving into buffers lent by the scheduler (io_uring: multishot recv over a
// provided-buffer ring; epoll: a free list), on both backends.
#include "support/backends.hpp"

#include <array>
#include <cstring>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

Task<std::pair<TcpStream, TcpStream>> pair_on_loopback() {
    auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
    if (!l) throw Error(l.error(), "bind");
    auto [c, s] = co_await when_all(
        as_task(TcpStream::connect(SocketAddr::loopback_v4(l->local_addr()->port()))),
        as_task(l->accept()));
    if (!c || !s) throw std::runtime_error("connect/accept failed");
    co_return std::pair{std::move(*c), std::move(*s)};
}

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
        const auto addr = SocketAddr::loopback_v4(l->local_addr()->port());
        constexpr int kConns = 50, kMsgs = 200;
        auto serve = [](TcpStream s) -> Task<void> {
            (void)s.set_nodelay(true); // the echo leaves in pieces: don't let Nagle hold them
            for (;;) {
                auto b = co_await s.recv_pooled();
                if (!b || b->empty()) co_return;
                if (!co_await s.send_all(b->bytes())) co_return;
            }
        };
        auto server = [&]() -> Task<void> {
            std::vector<Task<void>> conns;
            for (int i = 0; i < kConns; ++i) {
                auto s = co_await l->accept();
                if (!s) throw Error(s.error(), "accept");
                conns.push_back(serve(std::move(*s)));
            }
            co_await when_all(std::move(conns));
        };
        auto client = [&](int id) -> Task<std::uint64_t> {
            auto s = co_await TcpStream::connect(addr);
            if (!s) throw Error(s.error(), "connect");
            std::array<char, 700> out, in; // bigger than one pool buffer: arrives in pieces
            std::uint64_t ok = 0;
            for (int m = 0; m < kMsgs; ++m) {
                for (std::size_t i = 0; i < out.size(); ++i)
                    out[i] = static_cast<char>(id * 31 + m * 7 + static_cast<int>(i));
                if (!co_await s->send_all(out)) throw std::runtime_error("send");
                if (!co_await s->recv_exact(in)) throw std::runtime_error("recv");
                if (std::memcmp(in.data(), out.data(), in.size()) != 0)
                    throw std::runtime_error("mismatch");
                ++ok;
            }
            co_return ok;
        };
        std::vector<Task<std::uint64_t>> clients;
        for (int i = 0; i < kConns; ++i)
            clients.push_back(client(i));
        auto [counts, _] = co_await when_all(when_all(std::move(clients)), server());
        std::uint64_t total = 0;
        for (auto c : counts)
            total += c;
        co_return total;
    }());
    EXPECT_EQ(ok, 50u * 200u);
}

TEST_P(PooledRecvTest, TimeoutConsumesNothingAndLaterBytesArrive) {
    run([]() -> Task<void> {
        auto [c, s] = co_await pair_on_loopback();
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
        auto [c, s] = co_await pair_on_loopback();
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
        auto [c, s] = co_await pair_on_loopback();
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
            auto [c, s] = co_await pair_on_loopback();
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

GALAY_INSTANTIATE_BACKENDS(PooledRecvTest);
