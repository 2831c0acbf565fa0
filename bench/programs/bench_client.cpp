// bench_client: TCP echo load generator on galay-kernel (single thread, two coroutines per
// connection: one sends, one receives). Every echoed byte is compared with what was sent; a
// mismatch, a short echo, a reset, a timeout or a failed connect is an error and makes the exit
// code 1 (usage errors: 2).
//
//   bench_client -h 127.0.0.1 -p 8080 -c 100 -s 256 -d 10 [-P 16] [--warmup 1]
//                [--server-pid PID] [--backend io_uring|epoll] [--json]
//
// A connection keeps one batch of -P messages in flight: its sender sends the batch while its
// receiver reads the echo, so a batch larger than the socket buffers of both ends (-s 16777216)
// flows instead of deadlocking. The receiver verifies the batch, then the sender sends the next.
//
// Ctrl-C (SIGINT) or SIGTERM ends the run early: the summary of the part measured so far is
// printed, marked interrupted. A second one exits at once (bench/programs/common/signals.hpp).
#include "args/bench_client.hpp"
#include "common/tool_support.hpp"
#include "measure/histogram.hpp"

#include <galay/galay.hpp>

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace galay;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using tools::bench_client::Options;

struct State {
    explicit State(const Options& o)
        : opt(o) {}
    const Options& opt;
    bool measuring = false;
    bool stop = false;        // no new batch
    bool interrupted = false; // SIGINT/SIGTERM: operations were cancelled, not failed
    std::uint64_t ok = 0;     // requests echoed and verified inside the measured window
    std::uint64_t errors = 0; // all errors, whenever they happened
    unsigned errors_printed = 0;
    tools::LatencyHistogram hist; // per-request latency inside the window

    void error(unsigned conn, const char* what, const std::string& detail) {
        ++errors;
        if (errors_printed++ < 10)
            std::fprintf(stderr, "bench_client: connection %u: %s: %s\n", conn, what,
                         detail.c_str());
        else if (errors_printed == 11)
            std::fprintf(stderr, "bench_client: (further errors are counted, not printed)\n");
    }
};

/// Message k of a batch carries the connection id and a running sequence number in its first
/// bytes, then a per-connection pattern: an echo from the wrong connection or out of order fails
/// the comparison.
void stamp(std::vector<char>& out, std::size_t size, unsigned conn, std::uint64_t seq,
           unsigned pipeline) {
    for (unsigned k = 0; k < pipeline; ++k) {
        char* m = out.data() + k * size;
        std::uint64_t tag = (std::uint64_t{conn} << 40) ^ (seq * pipeline + k);
        std::memcpy(m, &tag, std::min<std::size_t>(size, sizeof tag));
    }
}

/// One coroutine waits for the other of its connection (same scheduler, no allocation).
class Baton {
public:
    void pass() {
        if (waiter_) current_scheduler().schedule(std::exchange(waiter_, {}));
    }
    struct Awaiter {
        Baton& b;
        bool await_ready() const noexcept { return false; }
        void await_suspend(std::coroutine_handle<> h) noexcept { b.waiter_ = h; }
        void await_resume() const noexcept {}
    };
    /// Suspend until the next pass(); callers re-check their condition after it.
    [[nodiscard]] Awaiter wait() noexcept { return Awaiter{*this}; }

private:
    std::coroutine_handle<> waiter_;
};

/// One connection: the sender starts batch `started - 1` once the receiver has verified every
/// earlier one; the receiver reads and verifies batch `verified` once it has been started.
struct Conn {
    Conn(TcpStream stream, unsigned conn_id, const Options& o)
        : s(std::move(stream))
        , id(conn_id)
        , out(o.size * o.pipeline)
        , in(o.size * o.pipeline) {
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = static_cast<char>('a' + (i + id) % 26);
    }
    TcpStream s;
    unsigned id;
    std::vector<char> out, in;
    std::uint64_t started = 0, verified = 0;
    Clock::time_point t0;
    bool sender_done = false, receiver_done = false, failed = false;
    Baton to_sender, to_receiver;

    /// An error on one side: wake the other side out of its pending operation.
    void fail() {
        failed = true;
        (void)s.shutdown(Shutdown::both);
    }
};

std::chrono::nanoseconds op_timeout(const Options& o) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(o.op_timeout));
}

Task<void> sender(Conn& c, State& st) {
    const Options& o = st.opt;
    const auto timeout = op_timeout(o);
    while (!st.stop && !c.failed && !c.receiver_done) {
        if (c.verified < c.started) { // the last batch is still being echoed
            co_await c.to_sender.wait();
            continue;
        }
        stamp(c.out, o.size, c.id, c.started, o.pipeline);
        c.t0 = Clock::now();
        ++c.started;
        c.to_receiver.pass();
        auto w = co_await c.s.send_all(c.out).timeout(timeout);
        if (!w) {
            if (!c.failed && !st.interrupted) st.error(c.id, "send", w.error().message());
            c.fail();
            break;
        }
    }
    c.sender_done = true;
    c.to_receiver.pass();
}

Task<void> receiver(Conn& c, State& st) {
    const Options& o = st.opt;
    const auto timeout = op_timeout(o);
    for (;;) {
        if (c.verified == c.started) { // nothing in flight
            if (c.sender_done || c.failed) break;
            co_await c.to_receiver.wait();
            continue;
        }
        auto r = co_await c.s.recv_exact(c.in).timeout(timeout);
        if (!r) {
            if (!c.failed && !st.interrupted)
                st.error(c.id, "recv",
                         r.error() == errc::unexpected_eof
                             ? "the server closed the connection mid-echo"
                             : r.error().message());
            c.fail();
            break;
        }
        if (std::memcmp(c.in.data(), c.out.data(), c.in.size()) != 0) {
            st.error(c.id, "verify", "the echoed bytes differ from what was sent");
            c.fail();
            break;
        }
        if (st.measuring) {
            const auto ns = static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - c.t0).count());
            st.ok += o.pipeline;
            for (unsigned k = 0; k < o.pipeline; ++k)
                st.hist.record(ns);
        }
        ++c.verified;
        c.to_sender.pass();
    }
    c.receiver_done = true;
    c.to_sender.pass();
}

Task<void> connection(TcpStream s, unsigned id, State& st) {
    (void)s.set_nodelay(true);
    Conn c(std::move(s), id, st.opt);
    co_await when_all(sender(c, st), receiver(c, st));
}

struct Report {
    double seconds = 0;
    std::optional<double> server_cpu;
    unsigned connected = 0;
    int interrupted_by = 0; // the signal that ended the run early, or 0
};

/// MiB moved by `requests` requests of `size` bytes: sent + received.
double request_mib(std::uint64_t requests, std::size_t size) {
    return tools::mib(double(requests) * double(size) * 2.0);
}

/// The measured window: warm-up, then -d seconds with a line per second.
struct Window {
    State& st;
    Report& rep;
    std::optional<double> cpu0;
    Clock::time_point start;

    void open() {
        const Options& o = st.opt;
        if (o.server_pid > 0) cpu0 = tools::process_cpu_seconds(o.server_pid);
        start = Clock::now();
        st.measuring = true;
    }
    /// Close the window (at its end, or early on a stop signal): the figures stop here.
    void close() {
        if (!st.measuring) return;
        st.measuring = false;
        rep.seconds = tools::seconds_of(Clock::now() - start);
        if (cpu0) {
            auto cpu1 = tools::process_cpu_seconds(st.opt.server_pid);
            if (cpu1) rep.server_cpu = *cpu1 - *cpu0;
        }
    }
    Task<void> run() {
        const Options& o = st.opt;
        // Every sleep fails once the stop signal has won (cancelled): stop at once then.
        if (o.warmup > 0) {
            auto slept = co_await sleep(std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::duration<double>(o.warmup)));
            if (!slept) co_return;
        }
        open();
        std::uint64_t last = 0;
        const auto whole = static_cast<int>(o.duration);
        for (int sec = 1; sec <= whole; ++sec) {
            auto slept = co_await sleep_until(start + std::chrono::seconds(sec));
            if (!slept) co_return;
            const std::uint64_t now_ok = st.ok;
            std::FILE* out = o.json ? stderr : stdout;
            std::fprintf(out, "[%ds] QPS: %s | Throughput: %.2f MB/s | Total: %s | Errors: %s\n",
                         sec, tools::with_commas(now_ok - last).c_str(),
                         request_mib(now_ok - last, o.size), tools::with_commas(now_ok).c_str(),
                         tools::with_commas(st.errors).c_str());
            std::fflush(out);
            last = now_ok;
        }
        if (o.duration > whole)
            (void)co_await sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(o.duration)));
    }
};

/// Run the window until its end or a stop signal, whichever comes first; then stop the
/// connections (on a signal: cancel what they are waiting on).
Task<void> control(State& st, Report& rep, CancelSource& connections) {
    Window w{st, rep, std::nullopt, {}};
    auto first = co_await when_any(w.run(), tools::wait_for_stop_signal());
    w.close();
    st.stop = true;
    if (first.index() == 1) {
        rep.interrupted_by = tools::stop_signal();
        st.interrupted = true;
        connections.cancel();
    }
}

Task<Report> run(State& st) {
    const Options& o = st.opt;
    Report rep;
    auto addrs = co_await resolve(o.host, o.port);
    if (!addrs || addrs->empty()) {
        std::fprintf(stderr, "bench_client: cannot resolve %s: %s\n", o.host.c_str(),
                     addrs ? "no address" : addrs.error().message().c_str());
        ++st.errors;
        co_return rep;
    }
    const SocketAddr addr = addrs->front();

    // Connect in waves so the listen backlog is never the reason a connection fails.
    std::vector<TcpStream> conns;
    conns.reserve(o.connections);
    constexpr unsigned kWave = 500;
    for (unsigned first = 0; first < o.connections && tools::stop_signal() == 0; first += kWave) {
        std::vector<Task<Result<TcpStream>>> wave;
        for (unsigned i = first; i < std::min(o.connections, first + kWave); ++i)
            wave.push_back(as_task(TcpStream::connect(addr).timeout(10s)));
        unsigned index = first;
        for (auto& c : co_await when_all(std::move(wave))) {
            if (c)
                conns.push_back(std::move(*c));
            else
                st.error(index, ("connect to " + addr.to_string()).c_str(), c.error().message());
            ++index;
        }
    }
    rep.connected = static_cast<unsigned>(conns.size());
    if (conns.empty()) {
        std::fprintf(stderr, "bench_client: could not connect to %s (0 of %u connections)\n",
                     addr.to_string().c_str(), o.connections);
        co_return rep;
    }

    std::vector<Task<void>> workers;
    workers.reserve(conns.size());
    for (unsigned i = 0; i < conns.size(); ++i)
        workers.push_back(connection(std::move(conns[i]), i, st));
    CancelSource cancel;
    co_await when_all(with_cancel(cancel, when_all(std::move(workers))), control(st, rep, cancel));
    co_return rep;
}

/// What the run measured, ready to print.
struct Figures {
    std::uint64_t total = 0; // requests: successful + errors
    double secs = 0;
    double qps = 0, mbps = 0;
    std::optional<double> cpu_per_req; // server CPU us per request (--server-pid)
};

Figures figures_of(const State& st, const Report& rep) {
    const Options& o = st.opt;
    Figures f;
    f.total = st.ok + st.errors;
    f.secs = rep.seconds;
    f.qps = tools::per_second(double(st.ok), f.secs);
    f.mbps = tools::per_second(request_mib(st.ok, o.size), f.secs);
    if (rep.server_cpu && st.ok > 0) f.cpu_per_req = *rep.server_cpu * 1e6 / double(st.ok);
    return f;
}

double us(const State& st, double q) {
    return double(st.hist.percentile_ns(q)) / 1000.0;
}

void print_header(const Options& o, const char* backend) {
    std::printf("=== Benchmark Client ===\nTarget: %s:%u\nConnections: %u\nMessage Size: %zu "
                "bytes\nDuration: %g seconds\n",
                o.host.c_str(), o.port, o.connections, o.size, o.duration);
    if (o.pipeline > 1) std::printf("Pipeline: %u\n", o.pipeline);
    if (o.warmup > 0) std::printf("Warmup: %g seconds\n", o.warmup);
    std::printf("Backend: %s\n========================\n\n", backend);
    std::fflush(stdout);
}

void print_json(const State& st, const Report& rep, const Figures& f, const char* backend) {
    const Options& o = st.opt;
    nlohmann::json j = {
        {"tool", "bench_client"},
        {"backend", backend},
        {"host", o.host},
        {"port", o.port},
        {"connections", o.connections},
        {"connected", rep.connected},
        {"message_size", o.size},
        {"pipeline", o.pipeline},
        {"duration_s", f.secs},
        {"requests", f.total},
        {"successful", st.ok},
        {"errors", st.errors},
        {"bytes", st.ok * o.size * 2},
        {"qps", f.qps},
        {"throughput_mbps", f.mbps},
        {"latency_us",
         {{"mean", st.hist.mean_ns() / 1000.0},
          {"p50", us(st, 0.50)},
          {"p99", us(st, 0.99)},
          {"p999", us(st, 0.999)},
          {"max", double(st.hist.max_ns()) / 1000.0}}},
        {"server_cpu_s", rep.server_cpu ? nlohmann::json(*rep.server_cpu) : nullptr},
        {"server_cpu_us_per_req", f.cpu_per_req ? nlohmann::json(*f.cpu_per_req) : nullptr},
        {"interrupted", rep.interrupted_by != 0},
    };
    std::printf("%s\n", j.dump().c_str());
}

void print_text(const State& st, const Report& rep, const Figures& f) {
    const Options& o = st.opt;
    std::printf("\n=== Final Results ===\n");
    if (rep.interrupted_by != 0)
        std::printf("Interrupted: %s after %.2f of %g measured seconds\n",
                    rep.interrupted_by == SIGINT ? "SIGINT" : "SIGTERM", f.secs, o.duration);
    std::printf("Total Requests: %s\n", tools::with_commas(f.total).c_str());
    std::printf("Successful: %s\n", tools::with_commas(st.ok).c_str());
    std::printf("Errors: %s\n", tools::with_commas(st.errors).c_str());
    std::printf("Total Data: %.2f MB\n", request_mib(st.ok, o.size));
    std::printf("Average QPS: %s\n", tools::with_commas(static_cast<std::uint64_t>(f.qps)).c_str());
    std::printf("Average Throughput: %.2f MB/s\n", f.mbps);
    if (st.hist.count() > 0)
        std::printf("Latency (us): p50 %.1f | p99 %.1f | p99.9 %.1f | mean %.1f | max %.1f\n",
                    us(st, 0.50), us(st, 0.99), us(st, 0.999), st.hist.mean_ns() / 1000.0,
                    double(st.hist.max_ns()) / 1000.0);
    if (f.cpu_per_req)
        std::printf("Server CPU: %.3f s, %.3f us per request\n", *rep.server_cpu, *f.cpu_per_req);
}

/// 0, or 1 when a request failed or none completed in the window.
int exit_code(const State& st) {
    if (st.errors > 0) {
        tools::print_error_count("bench_client", st.errors);
        return 1;
    }
    if (st.ok == 0) {
        std::fprintf(stderr, "bench_client: no request completed in the measured window\n");
        return 1;
    }
    return 0;
}

/// What must hold before anything runs; the exit code when it does not.
std::optional<int> prepare(const Options& o) {
    if (o.server_pid > 0 && !tools::process_cpu_seconds(o.server_pid)) {
        std::fprintf(stderr, "bench_client: --server-pid %d: no such process\n", o.server_pid);
        return 2;
    }
    if (!tools::ensure_fd_limit(o.connections + 64ull, "bench_client")) return 1;
    std::signal(SIGPIPE, SIG_IGN);
    tools::install_stop_handlers(); // before the header: from then on Ctrl-C gives a summary
    return std::nullopt;
}

} // namespace

int main(int argc, char** argv) {
    auto parsed = tools::bench_client::parse_args(tools::args_from(argc, argv));
    if (!parsed) return tools::print_exit(parsed.error());
    const Options& o = *parsed;
    if (auto code = prepare(o)) return *code;

    std::optional<Scheduler> sched;
    if (!tools::start_scheduler(sched, o.backend, "bench_client")) return 1;
    if (!o.json) print_header(o, sched->backend_name());
    State st(o);
    Report rep;
    try {
        rep = sched->block_on(run(st));
    } catch (const std::bad_alloc&) { // the memory check passed, but the machine is short now
        std::fprintf(stderr, "bench_client: out of memory (-c x -s x -P buffers)\n");
        return 1;
    }
    if (rep.connected == 0) return 1; // nothing was measured: no figures to print

    const Figures f = figures_of(st, rep);
    if (o.json)
        print_json(st, rep, f, sched->backend_name());
    else
        print_text(st, rep, f);
    return exit_code(st);
}
