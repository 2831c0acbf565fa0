// Listening on every worker: bind_sharded (and the port it refuses to share), serve() in the
// sharded and dispatch modes, stop and rebind; and galay::signal.
#include "runtime/thread_signals.hpp"
#include "support/backends.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <latch>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

class ServerTest : public test::BackendTest {};

/// A blocking client socket connected to `to` (the kernel completes the handshake from the
/// backlog, whether or not the server has accepted yet).
int connect_to(const SocketAddr& to) {
    const int fd = ::socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, to.data(), to.size()) != 0)
        throw Error(errno_code(errno), "connect " + to.to_string());
    return fd;
}

/// Send `msg` and read it back (5 s at most for the answer).
std::string echo_once(int fd, const std::string& msg) {
    if (::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(msg.size()))
        return "send failed";
    std::string got;
    while (got.size() < msg.size()) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1) return "timed out";
        char buf[256];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return "closed";
        got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
}

Task<void> echo(TcpStream s) {
    std::array<char, 256> buf;
    for (;;) {
        auto n = co_await s.recv(buf);
        if (!n || *n == 0) co_return;
        auto sent = co_await s.send_all(std::span(buf.data(), *n));
        if (!sent) co_return;
    }
}

std::size_t open_connections(const TcpServer& server, unsigned workers) {
    std::size_t n = 0;
    for (unsigned w = 0; w < workers; ++w)
        n += server.connections(w);
    return n;
}

/// True when the server side closed `fd` (EOF within 5 s).
bool closed_by_server(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return false;
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
}

} // namespace

TEST_P(ServerTest, BindShardedSharesOnePortAmongItsListeners) {
    auto group = TcpListener::bind_sharded(SocketAddr::loopback_v4(0), 3);
    ASSERT_TRUE(group) << group.error().message();
    ASSERT_EQ(group->size(), 3u);
    const auto port = (*group)[0].local_addr()->port();
    EXPECT_NE(port, 0);
    for (auto& l : *group)
        EXPECT_EQ(l.local_addr()->port(), port);
}

TEST_P(ServerTest, BindShardedRefusesAPortHeldByAPlainListener) {
    auto holder = TcpListener::bind(SocketAddr::loopback_v4(0));
    ASSERT_TRUE(holder);
    const auto port = holder->local_addr()->port();
    auto group = TcpListener::bind_sharded(SocketAddr::loopback_v4(port), 2);
    ASSERT_FALSE(group);
    EXPECT_EQ(group.error(), std::errc::address_in_use);
}

TEST_P(ServerTest, BindShardedRefusesAPortHeldByAnotherReusePortListener) {
    // What another process's SO_REUSEPORT listener (an older bench_server) looks like: Linux
    // would let a plain SO_REUSEPORT bind of the same user join it and take half its connections.
    auto holder = TcpListener::bind(SocketAddr::loopback_v4(0), {.reuse_port = true});
    ASSERT_TRUE(holder);
    const auto port = holder->local_addr()->port();
    auto group = TcpListener::bind_sharded(SocketAddr::loopback_v4(port), 2);
    ASSERT_FALSE(group);
    EXPECT_EQ(group.error(), std::errc::address_in_use);
    // And a second sharded group on a port a first group holds.
    auto first = TcpListener::bind_sharded(SocketAddr::loopback_v4(0), 2);
    ASSERT_TRUE(first);
    auto second = TcpListener::bind_sharded(*(*first)[0].local_addr(), 2);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error(), std::errc::address_in_use);
}

TEST_P(ServerTest, ServeRefusesABusyPort) {
    Runtime rt(rt_options(2));
    auto holder = TcpListener::bind(SocketAddr::loopback_v4(0));
    ASSERT_TRUE(holder);
    for (ListenMode mode : {ListenMode::sharded, ListenMode::dispatch}) {
        auto server = serve(rt, *holder->local_addr(), echo, {.mode = mode});
        ASSERT_FALSE(server);
        EXPECT_EQ(server.error(), std::errc::address_in_use);
    }
}

TEST_P(ServerTest, ShardedServerEchoesOnEveryConnection) {
    Runtime rt(rt_options(2));
    auto server = serve(rt, SocketAddr::loopback_v4(0), echo);
    ASSERT_TRUE(server) << server.error().message();
    EXPECT_NE(server->local_addr().port(), 0);
    std::vector<int> fds;
    for (int i = 0; i < 16; ++i)
        fds.push_back(connect_to(server->local_addr()));
    for (std::size_t i = 0; i < fds.size(); ++i) {
        const std::string msg = "hello " + std::to_string(i);
        EXPECT_EQ(echo_once(fds[i], msg), msg);
    }
    EXPECT_EQ(server->accepted(0) + server->accepted(1), 16u);
    for (int fd : fds)
        ::close(fd);
}

TEST_P(ServerTest, DispatchModeSpreadsLongLivedConnectionsEvenly) {
    for (unsigned workers : {2u, 3u}) {
        Runtime rt(rt_options(workers));
        static std::array<std::atomic<int>, 3> per_worker;
        static std::atomic<int> started;
        for (auto& c : per_worker)
            c = 0;
        started = 0;
        auto server = serve(rt, SocketAddr::loopback_v4(0),
                            [](TcpStream s) -> Task<void> {
                                ++per_worker[static_cast<std::size_t>(this_worker())];
                                ++started;
                                started.notify_all();
                                co_await echo(std::move(s)); // until the client closes
                            },
                            {.mode = ListenMode::dispatch});
        ASSERT_TRUE(server) << server.error().message();
        const int conns = 4 * static_cast<int>(workers);
        std::vector<int> fds;
        for (int i = 0; i < conns; ++i)
            fds.push_back(connect_to(server->local_addr()));
        for (int s; (s = started.load()) < conns;)
            started.wait(s);
        for (unsigned w = 0; w < workers; ++w) {
            EXPECT_EQ(per_worker[w].load(), 4) << "worker " << w << " of " << workers;
            EXPECT_EQ(server->connections(w), 4u);
            EXPECT_EQ(server->accepted(w), 4u);
        }
        for (int fd : fds)
            EXPECT_EQ(echo_once(fd, "x"), "x");
        for (int fd : fds)
            ::close(fd);
    }
}

TEST_P(ServerTest, StopClosesTheListenersWhileConnectionsGoOn) {
    Runtime rt(rt_options(2));
    for (ListenMode mode : {ListenMode::sharded, ListenMode::dispatch}) {
        auto server = serve(rt, SocketAddr::loopback_v4(0), echo, {.mode = mode});
        ASSERT_TRUE(server);
        const SocketAddr addr = server->local_addr();
        const int fd = connect_to(addr);
        EXPECT_EQ(echo_once(fd, "before"), "before");
        server->stop(); // returns once the listeners are closed
        // The port is free again: a new group can take it...
        auto again = TcpListener::bind_sharded(addr, 2);
        EXPECT_TRUE(again) << again.error().message();
        // ...and the open connection is still served.
        EXPECT_EQ(echo_once(fd, "after"), "after");
        ::close(fd);
    }
}

TEST_P(ServerTest, DrainWithoutConnectionsStopsAcceptingAndCutsNothing) {
    Runtime rt(rt_options(2));
    auto server = serve(rt, SocketAddr::loopback_v4(0), echo);
    ASSERT_TRUE(server);
    const SocketAddr addr = server->local_addr();
    EXPECT_EQ(rt.spawn(server->drain(std::chrono::steady_clock::now() + 10s)).join(), 0u);
    auto again = TcpListener::bind_sharded(addr, 2); // the listeners are closed
    EXPECT_TRUE(again) << again.error().message();
}

TEST_P(ServerTest, DrainWaitsForConnectionsThatFinishBeforeTheDeadline) {
    Runtime rt(rt_options(2));
    for (ListenMode mode : {ListenMode::sharded, ListenMode::dispatch}) {
        auto server = serve(rt, SocketAddr::loopback_v4(0), echo, {.mode = mode});
        ASSERT_TRUE(server);
        std::vector<int> fds;
        for (int i = 0; i < 3; ++i) {
            fds.push_back(connect_to(server->local_addr()));
            EXPECT_EQ(echo_once(fds.back(), "hi"), "hi");
        }
        EXPECT_EQ(open_connections(*server, 2), 3u);
        auto drained = rt.spawn(server->drain(std::chrono::steady_clock::now() + 60s));
        EXPECT_EQ(echo_once(fds[0], "still served"), "still served");
        for (int fd : fds)
            ::close(fd); // the clients finish: every handler returns
        EXPECT_EQ(drained.join(), 0u);
        EXPECT_EQ(open_connections(*server, 2), 0u);
    }
}

TEST_P(ServerTest, DrainCutsTheConnectionsStillOpenAtTheDeadline) {
    Runtime rt(rt_options(2));
    for (ListenMode mode : {ListenMode::sharded, ListenMode::dispatch}) {
        auto server = serve(rt, SocketAddr::loopback_v4(0), echo, {.mode = mode});
        ASSERT_TRUE(server);
        std::vector<int> fds;
        for (int i = 0; i < 4; ++i) {
            fds.push_back(connect_to(server->local_addr()));
            EXPECT_EQ(echo_once(fds.back(), "hi"), "hi");
        }
        // Idle clients that never close: all four are cut once the deadline passes.
        EXPECT_EQ(rt.spawn(server->drain(std::chrono::steady_clock::now() + 1ms)).join(), 4u);
        EXPECT_EQ(open_connections(*server, 2), 0u);
        for (int fd : fds) {
            EXPECT_TRUE(closed_by_server(fd));
            ::close(fd);
        }
    }
}

// --- max_connections ---

Task<void> say_busy(TcpStream s) {
    static constexpr std::string_view kBusy = "-ERR max number of clients reached\r\n";
    auto sent = co_await s.send_all(std::span(kBusy.data(), kBusy.size())).timeout(5s);
    (void)sent;
}

/// Everything the server sends until it closes `fd` (5 s at most per read).
std::string read_to_eof(int fd) {
    std::string got;
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1) return got + "<timed out>";
        char buf[256];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return got;
        got.append(buf, static_cast<std::size_t>(n));
    }
}

std::uint64_t refused(const TcpServer& server, unsigned workers) {
    std::uint64_t n = 0;
    for (unsigned w = 0; w < workers; ++w)
        n += server.refused(w);
    return n;
}

TEST_P(ServerTest, MaxConnectionsRefusesBeyondTheLimitAndCountsIt) {
    Runtime rt(rt_options(2));
    for (ListenMode mode : {ListenMode::sharded, ListenMode::dispatch}) {
        const std::uint64_t before = metrics::snapshot(rt).total().connections_refused;
        auto server = serve(rt, SocketAddr::loopback_v4(0), echo,
                            {.mode = mode, .max_connections = 2, .on_refused = say_busy});
        ASSERT_TRUE(server);
        std::vector<int> fds;
        for (int i = 0; i < 2; ++i) {
            fds.push_back(connect_to(server->local_addr()));
            EXPECT_EQ(echo_once(fds.back(), "hi"), "hi"); // accepted and served
        }
        const int third = connect_to(server->local_addr());
        EXPECT_EQ(read_to_eof(third), "-ERR max number of clients reached\r\n");
        ::close(third);
        EXPECT_EQ(refused(*server, 2), 1u);
        EXPECT_EQ(open_connections(*server, 2), 2u);
        EXPECT_EQ(metrics::snapshot(rt).total().connections_refused - before, 1u);
        EXPECT_EQ(echo_once(fds[0], "still"), "still"); // the admitted ones go on
        for (int fd : fds)
            ::close(fd);
        EXPECT_EQ(rt.spawn(server->drain(std::chrono::steady_clock::now() + 60s)).join(), 0u);
    }
    // Without a hook, a refused connection is closed at once.
    auto server = serve(rt, SocketAddr::loopback_v4(0), echo, {.max_connections = 1});
    ASSERT_TRUE(server);
    const int first = connect_to(server->local_addr());
    EXPECT_EQ(echo_once(first, "hi"), "hi");
    const int second = connect_to(server->local_addr());
    EXPECT_TRUE(closed_by_server(second));
    EXPECT_EQ(refused(*server, 2), 1u);
    ::close(second);
    ::close(first);
}

// --- drain and idle connections ---

/// A line server whose connections wait for each request in galay::idle; a request "hold" waits
/// for `gate` (after counting `held` down) before its answer.
Task<void> line_server(TcpStream s, Event* gate, std::latch* held) {
    io::BufReader reader(s);
    for (;;) {
        auto line = co_await idle(reader.read_line());
        if (!line) co_return; // closed by the peer, or the server drains
        std::string reply(*line);
        if (reply == "hold") {
            held->count_down();
            auto opened = co_await gate->wait();
            if (!opened) co_return;
            reply = "done";
        }
        reply += '\n';
        auto sent = co_await s.send_all(std::span(reply.data(), reply.size()));
        if (!sent) co_return;
    }
}

/// A line_server on a Runtime, and `n` keep-alive clients it has served once: idle now.
struct IdleClients {
    IdleClients(const RuntimeOptions& o, int n)
        : rt(o)
        , server(serve(rt, SocketAddr::loopback_v4(0),
                       [this](TcpStream s) { return line_server(std::move(s), &gate, &held); })) {
        if (!server) throw Error(server.error(), "serve");
        for (int i = 0; i < n; ++i) {
            fds.push_back(connect_to(server->local_addr()));
            if (echo_once(fds.back(), "x\n") != "x\n") throw std::runtime_error("not served");
        }
    }
    Runtime rt;
    Event gate;
    std::latch held{1};
    Result<TcpServer> server;
    std::vector<int> fds;
};

TEST_P(ServerTest, DrainClosesIdleConnectionsAtOnce) {
    constexpr int kIdle = 1000;
    IdleClients c(rt_options(2), kIdle);
    Runtime& rt = c.rt;
    auto& server = c.server;
    std::vector<int>& fds = c.fds;
    ASSERT_EQ(open_connections(*server, 2), static_cast<std::size_t>(kIdle));
    // The deadline is far beyond any plausible run: a drain that waited for it would time the
    // test out; it returns as soon as the idle connections are closed, cutting none.
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(rt.spawn(server->drain(start + 600s)).join(), 0u);
    const auto took = std::chrono::steady_clock::now() - start;
    std::printf("drain of %d idle connections: %.1f ms\n", kIdle,
                std::chrono::duration<double, std::milli>(took).count());
    EXPECT_EQ(open_connections(*server, 2), 0u);
    for (int fd : fds) {
        EXPECT_TRUE(closed_by_server(fd));
        ::close(fd);
    }
}

TEST_P(ServerTest, DrainWaitsForTheActiveRequestOnly) {
    IdleClients c(rt_options(2), 3);
    Runtime& rt = c.rt;
    auto& server = c.server;
    std::vector<int>& idle_fds = c.fds;
    Event& gate = c.gate;
    std::latch& held = c.held;
    const int busy = connect_to(server->local_addr());
    ASSERT_EQ(::send(busy, "hold\n", 5, MSG_NOSIGNAL), 5);
    held.wait(); // its request is in progress on the server
    auto drained = rt.spawn(server->drain(std::chrono::steady_clock::now() + 600s));
    for (int fd : idle_fds) { // closed at once, while the request goes on
        EXPECT_TRUE(closed_by_server(fd));
        ::close(fd);
    }
    pollfd p{busy, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 0) << "the active connection was closed";
    // A peer sees EOF when the descriptor closes, a moment before the connection's task ends and
    // leaves the count; read on each worker's own thread, the count is past that moment.
    std::size_t open = 0;
    for (unsigned w = 0; w < 2; ++w)
        open += rt.invoke_on(w, [&, w] { return server->connections(w); }).join();
    EXPECT_EQ(open, 1u);
    // The request finishes: its answer arrives, then the connection, idle again, is closed.
    rt.invoke_on(0, [&gate] { gate.set(); }).join();
    EXPECT_EQ(read_to_eof(busy), "done\n");
    ::close(busy);
    EXPECT_EQ(drained.join(), 0u);
}

TEST_P(ServerTest, ShutdownClosesEverythingAndThePortCanBeBoundAtOnce) {
    SocketAddr addr;
    int fd = -1;
    {
        Runtime rt(rt_options(2));
        auto server = serve(rt, SocketAddr::loopback_v4(0), echo);
        ASSERT_TRUE(server);
        addr = server->local_addr();
        fd = connect_to(addr);
        EXPECT_EQ(echo_once(fd, "ping"), "ping");
    } // ~Runtime: listeners and the connection closed
    char c;
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 5000), 1);
    EXPECT_EQ(::recv(fd, &c, 1, 0), 0); // the server side closed: EOF
    ::close(fd);
    auto again = TcpListener::bind_sharded(addr, 2);
    EXPECT_TRUE(again) << again.error().message();
}

TEST_P(ServerTest, ASignalWakesTheTaskWaitingForIt) {
    Runtime rt(rt_options(2));
    auto wait = galay::signal(SIGUSR1); // the handler is installed from here on
    auto h = rt.spawn(as_task(std::move(wait)));
    ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0); // before or after the wait starts: both work
    auto r = h.join();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, SIGUSR1);
    // Any of several signals; the result names the one that came.
    auto either = galay::signal({SIGUSR1, SIGUSR2});
    ::raise(SIGUSR2);
    auto r2 = rt.block_on(as_task(std::move(either)));
    ASSERT_TRUE(r2);
    EXPECT_EQ(*r2, SIGUSR2);
}

TEST_P(ServerTest, ASignalWaitTimesOutAndIsCancellable) {
    Runtime rt(rt_options(1));
    auto r = rt.block_on([]() -> Task<bool> {
        auto t = co_await galay::signal(SIGUSR2).timeout(2ms);
        if (t || t.error() != std::errc::timed_out) co_return false;
        auto any = co_await when_any(as_task(galay::signal(SIGUSR2)), sleep(1ms));
        co_return any.index() == 1;
    }());
    EXPECT_TRUE(r);
    auto bad = rt.block_on(as_task(galay::signal(SIGKILL)));
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(), std::errc::invalid_argument);
    auto zero = rt.block_on(as_task(galay::signal(0)));
    ASSERT_FALSE(zero);
}

TEST_P(ServerTest, SignalMasksAreTheProgramsExceptUnderTsanAndTheDispatcherTakesBlockedOnes) {
    // A normal build changes no mask: a process a task or a blocking job starts inherits the
    // program's, so SIGTERM still stops it. Under TSan galay's threads block the asynchronous
    // signals and leave them to galay::signal's dispatcher (runtime/thread_signals.hpp).
    const auto term_blocked = [] {
        sigset_t cur;
        ::pthread_sigmask(SIG_BLOCK, nullptr, &cur);
        return sigismember(&cur, SIGTERM) == 1 && sigismember(&cur, SIGINT) == 1 &&
               sigismember(&cur, SIGSEGV) == 0;
    };
    const bool expected = detail::kRouteSignalsToDispatcher;
    ASSERT_FALSE(term_blocked()) << "the test's own thread must start with SIGTERM unblocked";
    Runtime rt(rt_options(2));
    for (unsigned w = 0; w < 2; ++w) {
        const bool on_worker =
            rt.spawn_on(w, [&]() -> Task<bool> { co_return term_blocked(); }()).join();
        EXPECT_EQ(on_worker, expected) << "worker " << w;
    }
    auto in_pool = rt.block_on([&]() -> Task<Result<bool>> {
        co_return co_await spawn_blocking([&] { return term_blocked(); });
    }());
    ASSERT_TRUE(in_pool) << in_pool.error().message();
    EXPECT_EQ(*in_pool, expected) << "blocking-pool thread";
    // Even when the program's own thread blocks the signal, galay::signal still gets it (on a
    // worker, or under TSan on its dispatcher thread, the only one left that takes it).
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
    auto wait = galay::signal(SIGUSR1);
    auto h = rt.spawn([](detail::SignalAwaiter w) -> Task<Result<int>> {
        co_return co_await std::move(w).timeout(20s);
    }(std::move(wait)));
    ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
    auto r = h.join();
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, SIGUSR1);
}

GALAY_INSTANTIATE_BACKENDS(ServerTest);
