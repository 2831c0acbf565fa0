// SchedulerOptions::idle_spin, on every backend: a loop that runs out of work polls without
// waiting before it sleeps, and whatever arrives during the spin (a completion, a post from
// another thread, a due timer) is run. The assertions are on completion and on the spin
// counters of galay/metrics.hpp, never on durations: with a one-hour spin, "no spin ended in a
// sleep" means every wait of the test was ended by the spin.
#include "runtime/scheduler_access.hpp" // the spin counters a test waits on
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

class IdleSpinTest : public test::BackendTest {
protected:
    void SetUp() override {
        test::BackendTest::SetUp();
        // The tests observe the spin through its counters (and two wait on one).
        if (!GALAY_METRICS) GTEST_SKIP() << "SKIP: built with GALAY_METRICS=OFF (counters read 0)";
    }
    SchedulerOptions spinning(std::chrono::microseconds spin) const {
        SchedulerOptions o = options();
        o.idle_spin = spin;
        return o;
    }
};

constexpr int kRounds = 200;
constexpr std::size_t kMessage = 100;

char pattern(int round, std::size_t i) {
    return static_cast<char>('a' + (round * 7 + static_cast<int>(i)) % 26);
}

bool send_all_fd(int fd, const char* p, std::size_t n) {
    while (n != 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

bool recv_all_fd(int fd, char* p, std::size_t n) {
    while (n != 0) {
        const ssize_t r = ::recv(fd, p, n, 0);
        if (r <= 0) return false;
        p += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

/// A blocking client on its own thread: `kRounds` round trips of `kMessage` bytes, each reply
/// compared with what was sent. Returns how many replies matched.
int blocking_ping_pong(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int matched = 0;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
        char out[kMessage], in[kMessage];
        for (int r = 0; r < kRounds; ++r) {
            for (std::size_t i = 0; i < kMessage; ++i)
                out[i] = pattern(r, i);
            if (!send_all_fd(fd, out, kMessage) || !recv_all_fd(fd, in, kMessage)) break;
            if (std::memcmp(in, out, kMessage) == 0) ++matched;
        }
    }
    ::close(fd);
    return matched;
}

TEST_P(IdleSpinTest, PingPongWithAThreadMovesEveryByte) {
    // The echo server spins while the client thread thinks: with a one-hour spin, every reply
    // the server waits for is found by a spin.
    Scheduler s(spinning(std::chrono::hours(1)));
    int matched = -1;
    std::uint64_t echoed = 0;
    s.block_on([&]() -> Task<void> {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        CO_ASSERT(l.has_value());
        const std::uint16_t port = l->local_addr()->port();
        std::thread client([&] { matched = blocking_ping_pong(port); });
        auto c = co_await l->accept();
        CO_ASSERT(c.has_value());
        char buf[4096];
        for (;;) {
            auto n = co_await c->recv(std::span(buf));
            CO_ASSERT(n.has_value());
            if (*n == 0) break;
            echoed += *n;
            CO_ASSERT(co_await c->send_all(std::span(buf, *n)));
        }
        client.join();
    }());
    EXPECT_EQ(matched, kRounds);
    EXPECT_EQ(echoed, kRounds * kMessage);
    const metrics::WorkerMetrics m = metrics::snapshot(s);
    EXPECT_GE(m.idle_spins_found_work, 1u);
    EXPECT_EQ(m.idle_spins_slept, 0u);
    EXPECT_GT(m.idle_spin_ns, 0u);
}

TEST_P(IdleSpinTest, PingPongInOneSchedulerMovesEveryByte) {
    // Both ends in the same loop: each wait for the peer's bytes is a spin that finds them.
    Scheduler s(spinning(std::chrono::hours(1)));
    s.block_on([&]() -> Task<void> {
        auto [client, server] = co_await test::loopback_pair();
        auto echo = [](TcpStream& t) -> Task<void> {
            char buf[kMessage];
            for (;;) {
                auto n = co_await t.recv(std::span(buf));
                CO_ASSERT(n.has_value());
                if (*n == 0) co_return;
                CO_ASSERT(co_await t.send_all(std::span(buf, *n)));
            }
        };
        JoinHandle<void> h = spawn(echo(server));
        char out[kMessage], in[kMessage];
        for (int r = 0; r < kRounds; ++r) {
            for (std::size_t i = 0; i < kMessage; ++i)
                out[i] = pattern(r, i);
            CO_ASSERT(co_await client.send_all(std::span(out, kMessage)));
            std::size_t got = 0;
            while (got < kMessage) {
                auto n = co_await client.recv(std::span(in + got, kMessage - got));
                CO_ASSERT(n.has_value() && *n > 0);
                got += *n;
            }
            CO_ASSERT(std::memcmp(in, out, kMessage) == 0);
        }
        CO_ASSERT(client.shutdown().has_value());
        co_await std::move(h);
    }());
    const metrics::WorkerMetrics m = metrics::snapshot(s);
    EXPECT_GE(m.idle_spins_found_work, 1u);
    EXPECT_EQ(m.idle_spins_slept, 0u);
}

TEST_P(IdleSpinTest, CrossThreadSpawnDuringASpinRuns) {
    // A one-worker Runtime spins after each task it runs; the next spawn, posted from this
    // thread, arrives during that spin and must be picked up by it (also: the Runtime hands
    // the option to its workers).
    RuntimeOptions o;
    o.workers = 1;
    o.scheduler = spinning(std::chrono::hours(1));
    Runtime rt(o);
    constexpr int kTasks = 50;
    const detail::Counter& started =
        detail::SchedulerAccess::counters(rt.scheduler(0)).spins_started;
    int sum = 0;
    for (int i = 0; i < kTasks; ++i) {
        const std::uint64_t before = started.get();
        sum += rt.block_on([](int v) -> Task<int> { co_return v; }(i));
        // Post the next spawn only once the worker spins (else it could land first).
        while (started.get() == before)
            std::this_thread::yield();
    }
    EXPECT_EQ(sum, kTasks * (kTasks - 1) / 2);
    const metrics::WorkerMetrics m = metrics::snapshot(rt.scheduler(0));
    EXPECT_GE(m.idle_spins_found_work, static_cast<std::uint64_t>(kTasks - 1));
    EXPECT_EQ(m.idle_spins_slept, 0u);
    EXPECT_GE(m.remote_wakeups, static_cast<std::uint64_t>(kTasks));
}

/// Suspends and hands its coroutine to a new thread, which posts it back to the scheduler once
/// the scheduler has begun a spin.
struct ResumedFromAnotherThread {
    Scheduler& s;
    std::thread& t;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) {
        const std::uint64_t before = detail::SchedulerAccess::counters(s).spins_started.get();
        t = std::thread([&s = s, h, before] {
            while (detail::SchedulerAccess::counters(s).spins_started.get() == before)
                std::this_thread::yield();
            s.post(h);
        });
    }
    void await_resume() const noexcept {}
};

TEST_P(IdleSpinTest, CrossThreadWakeDuringASpinRuns) {
    Scheduler s(spinning(std::chrono::hours(1)));
    constexpr int kWakes = 20;
    int resumed = 0;
    s.block_on([&]() -> Task<void> {
        for (int i = 0; i < kWakes; ++i) {
            std::thread t;
            co_await ResumedFromAnotherThread{s, t};
            t.join();
            ++resumed;
        }
    }());
    EXPECT_EQ(resumed, kWakes);
    const metrics::WorkerMetrics m = metrics::snapshot(s);
    EXPECT_GE(m.idle_spins_found_work, static_cast<std::uint64_t>(kWakes));
    EXPECT_EQ(m.idle_spins_slept, 0u);
}

TEST_P(IdleSpinTest, TimerDueDuringAVeryLongSpinFires) {
    // The spin stops at the next timer's deadline, not at the end of its hour.
    Scheduler s(spinning(std::chrono::hours(1)));
    int fired = 0;
    s.block_on([&]() -> Task<void> {
        for (int i = 0; i < 3; ++i) {
            co_await sleep(2ms);
            ++fired;
        }
    }());
    EXPECT_EQ(fired, 3);
    const metrics::WorkerMetrics m = metrics::snapshot(s);
    EXPECT_GE(m.idle_spins_found_work, 3u);
    EXPECT_EQ(m.idle_spins_slept, 0u);
}

TEST_P(IdleSpinTest, TheLongestSpinThatCanBeAskedStillStopsAtTheTimer) {
    Scheduler s(spinning(std::chrono::microseconds::max())); // (no overflow in its arithmetic)
    bool fired = false;
    s.block_on([&]() -> Task<void> {
        co_await sleep(1ms);
        fired = true;
    }());
    EXPECT_TRUE(fired);
    EXPECT_EQ(metrics::snapshot(s).idle_spins_slept, 0u);
}

TEST_P(IdleSpinTest, OperationTimeoutDuringAVeryLongSpinFires) {
    // A receive that never completes, with a timeout: the spin ends at the timeout's deadline.
    Scheduler s(spinning(std::chrono::hours(1)));
    s.block_on([&]() -> Task<void> {
        auto [client, server] = co_await test::loopback_pair();
        char b[8];
        auto n = co_await server.recv(std::span(b)).timeout(5ms);
        CO_ASSERT(!n.has_value() && n.error() == std::errc::timed_out);
    }());
    EXPECT_EQ(metrics::snapshot(s).idle_spins_slept, 0u);
}

TEST_P(IdleSpinTest, AnIdleSchedulerEndsItsSpinAndSleeps) {
    // Nothing arrives during a 50 us spin before a timer 20 ms ahead: the spin ends in a sleep,
    // and the timer still fires.
    Scheduler s(spinning(50us));
    std::uint64_t slept_before_fire = 0;
    s.block_on([&]() -> Task<void> {
        co_await sleep(20ms);
        slept_before_fire = metrics::snapshot(s).idle_spins_slept;
    }());
    EXPECT_GE(slept_before_fire, 1u);
    EXPECT_GT(metrics::snapshot(s).idle_spin_ns, 0u);
}

TEST_P(IdleSpinTest, NoSpinOnThePausedClock) {
    // The paused clock jumps to the next deadline when the loop is idle; a spin would wait for
    // it in real time instead.
    SchedulerOptions o = spinning(std::chrono::hours(1));
    o.paused_clock = true;
    Scheduler s(o);
    s.block_on([&]() -> Task<void> { co_await sleep(30s); }());
    const metrics::WorkerMetrics m = metrics::snapshot(s);
    EXPECT_EQ(m.idle_spins_found_work, 0u);
    EXPECT_EQ(m.idle_spins_slept, 0u);
}

TEST_P(IdleSpinTest, OffByDefault) {
    Scheduler s(options());
    s.block_on([&]() -> Task<void> { co_await sleep(1ms); }());
    const metrics::WorkerMetrics m = metrics::snapshot(s);
    EXPECT_EQ(m.idle_spins_found_work + m.idle_spins_slept, 0u);
}

TEST_P(IdleSpinTest, NegativeSpinIsRejected) {
    try {
        Scheduler s(spinning(-1us));
        ADD_FAILURE() << "a negative idle_spin was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), std::errc::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("idle_spin"), std::string::npos) << e.what();
    }
    RuntimeOptions o;
    o.workers = 1;
    o.scheduler = spinning(-1us);
    EXPECT_THROW(Runtime rt(o), Error);
}

TEST_P(IdleSpinTest, PrometheusTextHasTheSpinCounters) {
    RuntimeOptions o;
    o.workers = 1;
    o.scheduler = spinning(50us);
    Runtime rt(o);
    rt.block_on([]() -> Task<void> { co_await sleep(1ms); }());
    const std::string t = metrics::prometheus_text(rt);
    for (const char* name : {"galay_idle_spins_found_work_total{worker=\"0\"}",
                             "galay_idle_spins_slept_total{worker=\"0\"}",
                             "galay_idle_spin_seconds_total{worker=\"0\"}"})
        EXPECT_NE(t.find(name), std::string::npos) << name << " missing from:\n" << t;
}

GALAY_INSTANTIATE_BACKENDS(IdleSpinTest);

} // namespace
