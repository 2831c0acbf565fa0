// Closing is prompt wherever it happens: a stream or listener destroyed inside a task, outside
// any task (after block_on returned, with its scheduler still alive), or on another thread,
// really closes the socket at once. On io_uring a socket that moved data sits in
// the ring's registered-file table and may have a multishot recv armed; both hold the socket open,
// so close(2) alone sends no FIN and frees no port until the ring lets go.
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <optional>
#include <string>
#include <thread>

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// What the peer reads next: 0 at EOF, -errno on error (EAGAIN: timed out waiting for the FIN).
ssize_t read_after_close(int fd) {
    char buf[64];
    ssize_t n;
    do
        n = ::recv(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

/// How the server side used the stream before it is closed: each leaves different kernel state
/// on io_uring (a registered-file slot after its fourth transfer; a multishot recv armed on the
/// plain fd, which one round trip does not register).
enum class Use { plain_transfer, pooled_recv };

Task<TcpStream> accept_and_exchange(TcpListener& l, Use use) {
    auto s = co_await l.accept();
    if (!s) throw Error(s.error(), "accept");
    if (use == Use::pooled_recv) {
        auto b = co_await s->recv_pooled().timeout(10s); // arms the multishot recv (io_uring)
        if (!b || b->size() != 4) throw std::runtime_error("recv_pooled");
    } else {
        std::array<char, 4> buf;
        auto n = co_await s->recv_exact(buf).timeout(10s);
        if (!n) throw Error(n.error(), "recv_exact");
    }
    if (use == Use::pooled_recv) {
        if (!co_await s->send_all(std::string_view("pong"))) throw std::runtime_error("send_all");
    } else { // a byte at a time: enough transfers that io_uring registers the fd
        for (char ch : std::string_view("pong"))
            if (!co_await s->send_all(std::string_view(&ch, 1)))
                throw std::runtime_error("send_all");
    }
    co_return std::move(*s);
}

} // namespace

class CloseTest : public test::BackendTest {
protected:
    /// `peer`: a blocking client of `l` that has sent "ping" (what accept_and_exchange receives).
    static void connect_and_ping(const TcpListener& l, int& peer) {
        peer = test::connect_blocking(l.local_addr()->port());
        ASSERT_GE(peer, 0);
        ASSERT_EQ(::send(peer, "ping", 4, 0), 4);
    }
    /// The peer receives the "pong" accept_and_exchange sent.
    static void read_pong(int peer) {
        char buf[4];
        ASSERT_EQ(::recv(peer, buf, 4, MSG_WAITALL), 4);
    }
    /// The peer's next read is the stream's FIN; then the peer is closed.
    static void expect_fin_and_close(int peer) {
        EXPECT_EQ(read_after_close(peer), 0) << "the peer saw no FIN (-11 = timed out)";
        ::close(peer);
    }

    /// A stream that exchanged ping and pong the `use` way is handed to `destroy` after block_on
    /// returned, with its scheduler alive and idle: the peer must still see EOF at once.
    template <class Destroy>
    void destroyed_after_block_on_sends_fin(Use use, Destroy destroy) {
        Scheduler sched(options());
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        ASSERT_TRUE(l);
        int peer = -1;
        ASSERT_NO_FATAL_FAILURE(connect_and_ping(*l, peer));
        TcpStream s = sched.block_on(accept_and_exchange(*l, use));
        ASSERT_NO_FATAL_FAILURE(read_pong(peer));
        destroy(std::move(s));
        expect_fin_and_close(peer);
    }
    /// Destroyed on the scheduler's own thread, outside any task.
    void destroyed_outside_a_task_sends_fin(Use use) {
        destroyed_after_block_on_sends_fin(use, [](TcpStream) {}); // closed here
    }
};

TEST_P(CloseTest, StreamDestroyedOutsideATaskSendsFinAtOnce) {
    destroyed_outside_a_task_sends_fin(Use::plain_transfer);
}

TEST_P(CloseTest, PooledStreamDestroyedOutsideATaskSendsFinAtOnce) {
    destroyed_outside_a_task_sends_fin(Use::pooled_recv);
}

// The same from a thread with no scheduler, while the owning scheduler is alive but not running
// (its thread is outside block_on): nothing will poll that ring for a while.
TEST_P(CloseTest, StreamDestroyedOnAnotherThreadWhileItsSchedulerIdlesSendsFin) {
    for (Use use : {Use::plain_transfer, Use::pooled_recv}) {
        ASSERT_NO_FATAL_FAILURE(destroyed_after_block_on_sends_fin(use, [](TcpStream s) {
            std::thread([gone = std::move(s)]() mutable { TcpStream g = std::move(gone); }).join();
        }));
    }
}

// Inside a task: a stream destroyed by its task has sent its FIN by the time the loop has
// submitted to the kernel once more (on io_uring the close goes with that submission, which
// costs no system call of its own); here the task yields once, then reads the peer's EOF with a
// blocking call. And a stream destroyed as the last thing the block_on task does is closed when
// block_on returns.
TEST_P(CloseTest, StreamDestroyedInsideATaskSendsFinWithinTheLoopTurn) {
    Scheduler sched(options());
    auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
    ASSERT_TRUE(l);
    for (Use use : {Use::plain_transfer, Use::pooled_recv}) {
        int peer = -1;
        ASSERT_NO_FATAL_FAILURE(connect_and_ping(*l, peer));
        ssize_t seen = sched.block_on([&]() -> Task<ssize_t> {
            {
                TcpStream s = co_await accept_and_exchange(*l, use);
                char buf[4];
                if (::recv(peer, buf, 4, MSG_WAITALL) != 4) co_return -1;
            }                     // destroyed here
            co_await yield_now(); // the loop turn ends
            co_return read_after_close(peer);
        }());
        EXPECT_EQ(seen, 0) << "the peer saw no FIN (-11 = timed out)";
        ::close(peer);
    }
}

TEST_P(CloseTest, StreamDestroyedAsTheLastActOfBlockOnIsClosedWhenItReturns) {
    Scheduler sched(options());
    auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
    ASSERT_TRUE(l);
    for (Use use : {Use::plain_transfer, Use::pooled_recv}) {
        int peer = -1;
        ASSERT_NO_FATAL_FAILURE(connect_and_ping(*l, peer));
        sched.block_on([&]() -> Task<void> {
            TcpStream s = co_await accept_and_exchange(*l, use);
        }()); // (destroyed when the task returns, just before block_on does)
        ASSERT_NO_FATAL_FAILURE(read_pong(peer));
        expect_fin_and_close(peer);
    }
}

// A listener destroyed inside a task frees its port at once: binding it again right away (before
// the task waits on anything) succeeds, even while another task was waiting in accept() on it (on
// io_uring the pending accept holds the socket until it is cancelled; it fails with
// operation_canceled).
static void listener_destroyed_inside_a_task_can_be_rebound_at_once(SchedulerOptions options) {
    Scheduler sched(options);
    sched.block_on([]() -> Task<void> {
        for (int round = 0; round < 3; ++round) {
            std::optional<TcpListener> l;
            {
                auto b = TcpListener::bind(SocketAddr::loopback_v4(0));
                CO_ASSERT(b);
                l = std::move(*b);
            }
            const std::uint16_t port = l->local_addr()->port();
            // Use it once: one accepted connection, kept open while the listener goes.
            auto used = co_await test::loopback_pair(&*l);
            auto acceptor = [&]() -> Task<Result<TcpStream>> {
                co_return co_await l->accept().timeout(10s); // (not cancelled: timed_out)
            };
            auto closer = [&]() -> Task<Result<TcpListener>> {
                co_await yield_now(); // the acceptor is now suspended in accept()
                l.reset();            // destroyed here...
                co_return TcpListener::bind(SocketAddr::loopback_v4(port)); // ...and rebound
            };
            auto [pending, rebound] = co_await when_all(acceptor(), closer());
            EXPECT_TRUE(rebound) << "port " << port << ": " << rebound.error().message();
            CO_ASSERT(!pending);
            EXPECT_EQ(pending.error(), std::errc::operation_canceled);
        }
    }());
}

TEST_P(CloseTest, ListenerDestroyedInsideATaskCanBeReboundAtOnce) {
    listener_destroyed_inside_a_task_can_be_rebound_at_once(options());
}

// The same with one accept request per call (kernels before 5.19): on io_uring that pending
// request is cancelled by fd when the listener is closed.
TEST_P(CloseTest, ListenerDestroyedInsideATaskCanBeReboundAtOnceWithOneShotAccepts) {
    SchedulerOptions o = options();
    o.multishot_accept = false;
    listener_destroyed_inside_a_task_can_be_rebound_at_once(o);
}

// A listener destroyed on another thread while its scheduler's task waits in accept() on it: the
// port is free at once (on io_uring the pending accept holds the socket open: it is made to fail).
// Destroying a socket another task is using is a bug of the program; what is tested is that the
// port does not stay bound. (The accept fails on io_uring; on epoll it waits for its timeout.)
TEST_P(CloseTest, ListenerDestroyedOnAnotherThreadDuringAcceptCanBeReboundAtOnce) {
    Scheduler sched(options());
    std::optional<TcpListener> l;
    {
        auto b = TcpListener::bind(SocketAddr::loopback_v4(0));
        ASSERT_TRUE(b);
        l = std::move(*b);
    }
    const std::uint16_t port = l->local_addr()->port();
    Result<TcpListener> rebound = fail(EINVAL);
    auto pending = sched.block_on([&]() -> Task<Result<TcpStream>> {
        auto closer = [&]() -> Task<void> {
            co_await yield_now(); // the acceptor is now suspended in accept()
            std::thread([&] {
                l.reset();
                rebound = TcpListener::bind(SocketAddr::loopback_v4(port));
            }).join();
        };
        auto [accepted, _] = co_await when_all(as_task(l->accept().timeout(200ms)), closer());
        co_return std::move(accepted);
    }());
    EXPECT_TRUE(rebound) << "port " << port << ": " << rebound.error().message();
    EXPECT_FALSE(pending);
}

GALAY_INSTANTIATE_BACKENDS(CloseTest);
