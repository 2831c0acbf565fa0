// Runtime metrics (galay/metrics.hpp) on every backend: the figures that have a defined value
// after a known workload, and the Prometheus text they are exposed in, parsed strictly.
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

constexpr int kConnections = 10;
constexpr int kEchoes = 100; // per connection: 1,000 in all
constexpr std::size_t kMessage = 64;

Task<void> echo(TcpStream s) {
    std::array<char, 4096> buf;
    for (;;) {
        auto n = co_await s.recv(buf);
        if (!n || *n == 0) co_return;
        if (!co_await s.send_all(std::span(buf.data(), *n))) co_return;
    }
}

Task<void> accept_loop(TcpListener l) {
    for (;;) {
        auto c = co_await l.accept();
        if (!c) co_return;
        spawn(echo(std::move(*c)));
    }
}

/// A blocking client on a plain thread: `kEchoes` round trips of `kMessage` bytes, each reply
/// read in full before the next request.
void blocking_client(std::uint16_t port, std::atomic<int>& failures) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ++failures;
        ::close(fd);
        return;
    }
    char out[kMessage], in[kMessage];
    for (int i = 0; i < kEchoes; ++i) {
        std::memset(out, 'a' + i % 26, sizeof out);
        if (::send(fd, out, sizeof out, 0) != static_cast<ssize_t>(sizeof out)) ++failures;
        std::size_t got = 0;
        while (got < sizeof in) {
            ssize_t r = ::recv(fd, in + got, sizeof in - got, 0);
            if (r <= 0) break;
            got += static_cast<std::size_t>(r);
        }
        if (got != sizeof in || std::memcmp(in, out, sizeof in) != 0) ++failures;
    }
    ::close(fd);
}

/// Waits (bounded) until `done(snapshot)` holds; the figures move on the worker's thread.
template <class F>
metrics::RuntimeMetrics wait_for(const Runtime& rt, F done) {
    for (int i = 0; i < 2'000'000; ++i) {
        metrics::RuntimeMetrics m = metrics::snapshot(rt);
        if (done(m)) return m;
        std::this_thread::yield();
    }
    ADD_FAILURE() << "the metrics never reached the expected state";
    return metrics::snapshot(rt);
}

class MetricsTest : public test::BackendTest {
protected:
    void SetUp() override {
        if (!GALAY_METRICS) GTEST_SKIP() << "SKIP: built with GALAY_METRICS=OFF (counters read 0)";
        test::BackendTest::SetUp();
    }
    RuntimeOptions runtime_options() const {
        RuntimeOptions o;
        o.workers = 1;
        o.scheduler = options();
        return o;
    }

    /// 1,000 echoes over kConnections connections, all closed at the end; returns the port.
    void run_echo_workload(Runtime& rt) {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        ASSERT_TRUE(l);
        const std::uint16_t port = l->local_addr()->port();
        rt.spawn(accept_loop(std::move(*l)));
        std::atomic<int> failures{0};
        std::vector<std::thread> clients;
        for (int i = 0; i < kConnections; ++i)
            clients.emplace_back(blocking_client, port, std::ref(failures));
        for (std::thread& t : clients)
            t.join();
        ASSERT_EQ(failures.load(), 0);
    }
};

TEST_P(MetricsTest, AfterOneThousandEchoesTheCountsAreThoseOfTheWorkload) {
    Runtime rt(runtime_options());
    run_echo_workload(rt);
    // Every connection closed: only the listener's task is alive.
    const metrics::RuntimeMetrics m = wait_for(rt, [](const metrics::RuntimeMetrics& s) {
        return s.total().tasks_alive == 1 &&
               s.total().op(OpKind::recv).completed >= kConnections * (kEchoes + 1);
    });
    const metrics::WorkerMetrics w = m.total();
    ASSERT_EQ(m.workers.size(), 1u);
    EXPECT_EQ(m.workers[0].worker, 0);
    EXPECT_EQ(w.backend, backend_name(GetParam()));
    EXPECT_EQ(w.tasks_alive, 1u);
    EXPECT_EQ(w.tasks_spawned, 1u + kConnections);
    EXPECT_EQ(w.tasks_finished, static_cast<std::uint64_t>(kConnections));
    // Each request is one receive of 64 bytes or more than one; each connection also reads EOF.
    const metrics::OpMetrics& recv = w.op(OpKind::recv);
    EXPECT_GE(recv.completed, static_cast<std::uint64_t>(kConnections * (kEchoes + 1)));
    EXPECT_EQ(recv.bytes, std::uint64_t{kConnections} * kEchoes * kMessage);
    EXPECT_EQ(recv.in_flight(), 0u);
    const metrics::OpMetrics& send = w.op(OpKind::send);
    EXPECT_GE(send.completed, static_cast<std::uint64_t>(kConnections * kEchoes));
    EXPECT_EQ(send.bytes, std::uint64_t{kConnections} * kEchoes * kMessage);
    EXPECT_EQ(send.failed, 0u);
    // The listener: kConnections accepted, one more waiting.
    const metrics::OpMetrics& accept = w.op(OpKind::accept);
    EXPECT_EQ(accept.completed, static_cast<std::uint64_t>(kConnections));
    EXPECT_EQ(accept.in_flight(), 1u);
    EXPECT_GE(w.remote_items, 1u); // the listener was spawned from this thread
    EXPECT_GE(w.remote_wakeups, 1u);
    EXPECT_GT(w.loop_turns, 0u);
    EXPECT_GT(w.busy_ns, 0u);
    std::uint64_t turns = 0;
    for (std::uint64_t b : w.completions_per_turn)
        turns += b;
    EXPECT_EQ(turns, w.loop_turns); // one histogram count per turn
    std::uint64_t completed = 0;
    for (const metrics::OpMetrics& o : w.ops)
        completed += o.completed;
    EXPECT_LE(w.completions_sum, completed);
    EXPECT_EQ(w.stalls, 0u); // no threshold set
    std::uint64_t timed = 0;
    for (std::uint64_t b : w.turn_lengths)
        timed += b;
    if (GALAY_TASK_DUMP) {
        // A turn's length is filed before the wait it ends in, its count after: the parked
        // worker has filed one more length than it has counted turns.
        EXPECT_GE(timed, w.loop_turns);
        EXPECT_LE(timed, w.loop_turns + 1);
        EXPECT_GT(w.turn_length_sum_ns, 0u);
    } else {
        EXPECT_EQ(timed, 0u);
    }
}

TEST_P(MetricsTest, TheLongestTurnIsThatSinceThePreviousSnapshot) {
    if (!GALAY_TASK_DUMP)
        GTEST_SKIP() << "SKIP: turn lengths are not kept with GALAY_TASK_DUMP=OFF";
    Scheduler s(options());
    (void)metrics::snapshot(s); // starts the period
    s.block_on([]() -> Task<void> {
        for (int i = 0; i < 3; ++i)
            (void)co_await sleep(1ms); // each a wait in the kernel, ending a turn
    }());
    const metrics::WorkerMetrics m = metrics::snapshot(s);
    EXPECT_GT(m.longest_turn_ns, 0u);
    EXPECT_LE(m.longest_turn_ns, m.turn_length_sum_ns);
    // No loop runs between the two snapshots: the next period has no turn.
    EXPECT_EQ(metrics::snapshot(s).longest_turn_ns, 0u);
}

TEST_P(MetricsTest, GaugesShowTheArmedTimersAndTheBlockingPool) {
    Scheduler s(options());
    s.block_on([](Scheduler& s) -> Task<void> {
        for (int i = 0; i < 3; ++i)
            spawn([]() -> Task<void> { (void)co_await sleep(1h); }());
        co_await yield_now(); // the sleepers arm their timers
        co_await yield_now(); // a turn starts with them armed
        const metrics::WorkerMetrics m = metrics::snapshot(s);
        CO_ASSERT(m.timers_armed == 3);
        CO_ASSERT(m.tasks_alive == 3);
        CO_ASSERT(m.tasks_spawned == 3);
        auto r = co_await spawn_blocking([] { return 7; });
        CO_ASSERT(r && *r == 7);
        CO_ASSERT(detail::blocking_stats().threads >= 1);
    }(s));
}

TEST_P(MetricsTest, PooledBuffersInUseAndEnobufsFollowThePool) {
    SchedulerOptions o = options();
    o.pool_buffers = 8; // a small pool, so that holding it all is cheap
    o.pool_buffer_size = 512;
    Scheduler sched(o);
    sched.block_on([](Scheduler& sched) -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        const std::uint64_t enobufs_before = metrics::snapshot(sched).enobufs;
        // Hold every buffer of the pool, one receive at a time.
        std::vector<PooledBuffer> held;
        for (int i = 0; i < 8; ++i) {
            std::string piece(100, static_cast<char>('a' + i));
            CO_ASSERT(co_await c.send_all(piece));
            auto b = co_await s.recv_pooled().timeout(10s);
            CO_ASSERT(b && !b->empty());
            held.push_back(std::move(*b));
        }
        co_await yield_now(); // the gauge is sampled once per loop turn
        co_await yield_now();
        CO_ASSERT(metrics::snapshot(sched).pooled_buffers_in_use >= 8);
        // Bytes arrive while no buffer is free: the receive that wants them finds none.
        CO_ASSERT(co_await c.send_all(std::string(300, 'z')));
        auto releaser = [&]() -> Task<void> {
            co_await yield_now();
            held.clear();
            co_return;
        };
        auto [next, _] = co_await when_all(as_task(s.recv_pooled().timeout(10s)), releaser());
        CO_ASSERT(next && !next->empty());
        next->release();
        CO_ASSERT(metrics::snapshot(sched).enobufs > enobufs_before);
        // Everything given back: after a turn the gauge reads 0 again.
        co_await yield_now();
        co_await yield_now();
        CO_ASSERT(metrics::snapshot(sched).pooled_buffers_in_use == 0);
    }(sched));
}

TEST_P(MetricsTest, ACountedFileReadMovesItsBytes) {
    char path[] = "/tmp/galay-metrics-XXXXXX";
    int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "0123456789", 10), 10);
    ::close(fd);
    Scheduler s(options());
    s.block_on([](Scheduler& s, const char* path) -> Task<void> {
        auto f = fs::File::open(path, {.read = true});
        CO_ASSERT(f);
        char buf[10];
        auto n = co_await f->read_at(std::span(buf), 0);
        CO_ASSERT(n && *n == 10);
        const metrics::WorkerMetrics m = metrics::snapshot(s);
        CO_ASSERT(m.op(OpKind::read_at).completed == 1);
        CO_ASSERT(m.op(OpKind::read_at).bytes == 10);
        CO_ASSERT(m.op(OpKind::read_at).in_flight() == 0);
    }(s, path));
    ::unlink(path);
}

// --- the Prometheus text -----------------------------------------------------------------------

/// A strict reader of the text format 0.0.4: every line a HELP, a TYPE or a sample of a family
/// declared before it; names and label names by the format's grammar; values numbers.
struct Parsed {
    std::map<std::string, std::string> types; // family -> type
    // sample name -> (labels -> value)
    std::map<std::string, std::map<std::string, double>> samples;
    std::string error;
};

Parsed parse_prometheus(const std::string& text) {
    Parsed p;
    static const std::regex help(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
    static const std::regex type(
        R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
    static const std::regex sample(
        R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*)\})? ([-+]?(Inf|NaN|[0-9.eE+-]+))$)");
    std::istringstream in(text);
    std::string line;
    std::set<std::string> helped;
    while (std::getline(in, line)) {
        std::smatch m;
        if (std::regex_match(line, m, help)) {
            helped.insert(m[1]);
        } else if (std::regex_match(line, m, type)) {
            if (!helped.count(m[1])) return p.error = "TYPE before HELP: " + line, p;
            p.types[m[1]] = m[2];
        } else if (std::regex_match(line, m, sample)) {
            std::string name = m[1];
            std::string family = name;
            for (const char* suffix : {"_bucket", "_sum", "_count"}) {
                const std::string s = suffix;
                if (!p.types.count(family) && family.size() > s.size() &&
                    family.compare(family.size() - s.size(), s.size(), s) == 0)
                    family = family.substr(0, family.size() - s.size());
            }
            if (!p.types.count(family)) return p.error = "sample of no family: " + line, p;
            p.samples[name][m[3]] = std::stod(m[5]);
        } else {
            return p.error = "not the text format: " + line, p;
        }
    }
    return p;
}

TEST_P(MetricsTest, ThePrometheusTextParsesAndCarriesTheWorkloadsFigures) {
    RuntimeOptions o = runtime_options();
    o.workers = 2;
    Runtime rt(o);
    run_echo_workload(rt);
    wait_for(rt, [](const metrics::RuntimeMetrics& s) { return s.total().tasks_alive == 1; });
    const std::string text = metrics::prometheus_text(rt);
    const Parsed p = parse_prometheus(text);
    ASSERT_EQ(p.error, "") << text;
    for (const auto& [family, type] : p.types)
        EXPECT_EQ(family.rfind("galay_", 0), 0u) << family;
    EXPECT_EQ(p.types.at("galay_tasks_alive"), "gauge");
    EXPECT_EQ(p.types.at("galay_ops_completed_total"), "counter");
    EXPECT_EQ(p.types.at("galay_completions_per_turn"), "histogram");
    EXPECT_EQ(p.types.at("galay_loop_turn_seconds"), "histogram");
    EXPECT_EQ(p.types.at("galay_longest_loop_turn_seconds"), "gauge");
    EXPECT_EQ(p.samples.at("galay_longest_loop_turn_seconds").size(), 2u);
    // Per-worker series carry the worker label: both workers appear.
    const auto& alive = p.samples.at("galay_tasks_alive");
    ASSERT_EQ(alive.size(), 2u);
    EXPECT_EQ(alive.at("worker=\"0\"") + alive.at("worker=\"1\""), 1.0);
    double recv_bytes = 0;
    for (const auto& [labels, v] : p.samples.at("galay_op_bytes_total"))
        if (labels.find("op=\"recv\"") != std::string::npos) recv_bytes += v;
    EXPECT_EQ(recv_bytes, double(kConnections) * kEchoes * kMessage);
    // The histogram's buckets are cumulative and end in +Inf == _count.
    for (const char* w : {"0", "1"}) {
        double last = -1;
        const std::string lw = std::string("worker=\"") + w + "\"";
        std::vector<std::string> les = {"0", "1", "3", "7", "15", "31", "63", "127", "255", "+Inf"};
        for (const std::string& le : les) {
            const double v =
                p.samples.at("galay_completions_per_turn_bucket").at(lw + ",le=\"" + le + "\"");
            EXPECT_GE(v, last) << le;
            last = v;
        }
        EXPECT_EQ(last, p.samples.at("galay_completions_per_turn_count").at(lw));
        last = -1;
        for (const std::string le : {"1e-06", "2e-06", "4e-06", "8e-06", "1.6e-05", "3.2e-05",
                                     "6.4e-05", "0.000128", "0.000256", "0.000512", "0.001024",
                                     "0.002048", "0.004096", "0.008192", "0.016384", "+Inf"}) {
            const double v =
                p.samples.at("galay_loop_turn_seconds_bucket").at(lw + ",le=\"" + le + "\"");
            EXPECT_GE(v, last) << le;
            last = v;
        }
        EXPECT_EQ(last, p.samples.at("galay_loop_turn_seconds_count").at(lw));
    }
}

/// One whole request, then everything the server sends until it closes (bounded: 10 s).
std::string exchange(std::uint16_t port, std::string_view request) {
    const int fd = test::connect_blocking(port);
    if (fd < 0) return "connect failed";
    std::string got;
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
        char buf[4096];
        pollfd p{fd, POLLIN, 0};
        while (::poll(&p, 1, 10'000) == 1) {
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    return got;
}

TEST_P(MetricsTest, AScrapeThatTricklesItsHeadIsClosedAtTheDeadlineAndOthersAreServed) {
    // One byte every 20 ms: each receive is quick, the head never ends. The deadline is for the
    // whole head (300 ms here), so the connection is closed then, however the bytes are spaced;
    // meanwhile and after, whole scrapes are answered.
    Runtime rt(runtime_options());
    auto listening = serve(rt, SocketAddr::loopback_v4(0), [&rt](TcpStream c) {
        return metrics::serve_scrape(std::move(c), rt, {.head_timeout = 300ms});
    });
    ASSERT_TRUE(listening) << listening.error().message();
    const std::uint16_t port = listening->local_addr().port();
    const int slow = test::connect_blocking(port);
    ASSERT_GE(slow, 0);
    const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: ";
    bool closed = false;
    std::string scraped;
    // At most 1,000 bytes (20 s): far more than the deadline, far less than max_head.
    for (std::size_t i = 0; i < 1000 && !closed; ++i) {
        const char c = i < head.size() ? head[i] : 'a';
        if (::send(slow, &c, 1, MSG_NOSIGNAL) != 1) {
            closed = true; // (reset: the server closed and a byte came after)
            break;
        }
        if (i == 5) scraped = exchange(port, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
        pollfd p{slow, POLLIN, 0};
        if (::poll(&p, 1, 20) == 1) { // the pace of the bytes, and the close seen at once
            char b;
            closed = ::recv(slow, &b, 1, 0) <= 0;
            EXPECT_TRUE(closed) << "the server answered an unfinished head";
        }
    }
    ::close(slow);
    EXPECT_TRUE(closed) << "a head trickled byte by byte kept its connection open";
    EXPECT_TRUE(scraped.starts_with("HTTP/1.1 200 OK\r\n")) << scraped;
    EXPECT_NE(scraped.find("\ngalay_tasks_spawned_total{worker=\"0\"}"), std::string::npos);
    const std::string after = exchange(port, "GET /metrics?x=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_TRUE(after.starts_with("HTTP/1.1 200 OK\r\n")) << after;
    EXPECT_TRUE(exchange(port, "GET /other HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    EXPECT_TRUE(exchange(port, "GET  HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400"));
    listening->stop();
}

TEST_P(MetricsTest, TasksAnswersATaskDumpAsTextAndAsJson) {
    Runtime rt(runtime_options());
    auto listening = serve(rt, SocketAddr::loopback_v4(0),
                           [&rt](TcpStream c) { return metrics::serve_scrape(std::move(c), rt); });
    ASSERT_TRUE(listening) << listening.error().message();
    const std::uint16_t port = listening->local_addr().port();
    const std::string text = exchange(port, "GET /tasks HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_TRUE(text.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/plain")) << text;
    // The listener's accept loops wait on accept, and the scrape's own connection is a task too.
    EXPECT_NE(text.find("galay task dump: "), std::string::npos) << text;
    EXPECT_NE(text.find("waits on accept fd "), std::string::npos) << text;
    const std::string json = exchange(port, "GET /tasks?format=json HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_TRUE(json.starts_with("HTTP/1.1 200 OK\r\nContent-Type: application/json")) << json;
    EXPECT_NE(json.find("\r\n\r\n{\"took_ns\":"), std::string::npos) << json;
    EXPECT_NE(json.find("\"what\":\"accept\""), std::string::npos) << json;
    EXPECT_TRUE(json.ends_with("]}")) << json;
    listening->stop();
}

TEST(ScrapeRequest, ReadsTheRequestLineAndBoundsTheHead) {
    using metrics::ScrapeRequest;
    const auto parse = [](std::string_view s, std::size_t max = 64) {
        return metrics::parse_scrape_request(s, max);
    };
    EXPECT_EQ(parse(""), ScrapeRequest::incomplete);
    EXPECT_EQ(parse("GET /metrics HTTP/1.1\r\n"), ScrapeRequest::incomplete);
    EXPECT_EQ(parse("GET /metrics HTTP/1.1\r\n\r\n"), ScrapeRequest::metrics);
    EXPECT_EQ(parse("GET /metrics?a=b HTTP/1.0\r\nHost: x\r\n\r\n"), ScrapeRequest::metrics);
    EXPECT_EQ(parse("GET /metricsx HTTP/1.1\r\n\r\n"), ScrapeRequest::not_found);
    EXPECT_EQ(parse("GET /tasks HTTP/1.1\r\n\r\n"), ScrapeRequest::tasks);
    EXPECT_EQ(parse("GET /tasks?format=text HTTP/1.1\r\n\r\n"), ScrapeRequest::tasks);
    EXPECT_EQ(parse("GET /tasks?format=json HTTP/1.1\r\n\r\n"), ScrapeRequest::tasks_json);
    EXPECT_EQ(parse("GET /tasks?a=1&format=json HTTP/1.1\r\n\r\n"), ScrapeRequest::tasks_json);
    EXPECT_EQ(parse("GET /tasks?format=jsonx HTTP/1.1\r\n\r\n"), ScrapeRequest::tasks);
    EXPECT_EQ(parse("GET /tasksx HTTP/1.1\r\n\r\n"), ScrapeRequest::not_found);
    EXPECT_EQ(parse("POST /tasks HTTP/1.1\r\n\r\n"), ScrapeRequest::not_found);
    EXPECT_EQ(parse("POST /metrics HTTP/1.1\r\n\r\n"), ScrapeRequest::not_found);
    EXPECT_EQ(parse("GET /metrics HTTP/2.0\r\n\r\n"), ScrapeRequest::bad);
    EXPECT_EQ(parse("GET /metrics\r\n\r\n"), ScrapeRequest::bad);
    EXPECT_EQ(parse(" GET /metrics HTTP/1.1\r\n\r\n"), ScrapeRequest::bad);
    EXPECT_EQ(parse("GET /me\x01trics HTTP/1.1\r\n\r\n"), ScrapeRequest::bad);
    EXPECT_EQ(parse(std::string(64, 'a')), ScrapeRequest::too_large);
    EXPECT_EQ(parse("GET /metrics HTTP/1.1\r\nX: " + std::string(40, 'a') + "\r\n\r\n"),
              ScrapeRequest::too_large);
}

GALAY_INSTANTIATE_BACKENDS(MetricsTest);

} // namespace
