// bench_client: TCP echo load generator on galay-kernel (single thread, one coroutine per
// connection). Every echoed byte is compared with what was sent; a mismatch, a short echo, a
// reset, a timeout or a failed connect is an error and makes the exit code non-zero.
//
//   bench_client -h 127.0.0.1 -p 8080 -c 100 -s 256 -d 10 [-P 16] [--warmup 1]
//                [--server-pid PID] [--backend io_uring|epoll] [--json]
#include "common/histogram.hpp"
#include "common/tool_support.hpp"

#include <galay/galay.hpp>

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace galay;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;
    unsigned connections = 100;
    std::size_t size = 256;
    double duration = 10;
    unsigned pipeline = 1;
    double warmup = 0;
    int server_pid = 0;
    double op_timeout = 10;
    bool json = false;
    Backend backend = Backend::automatic;
};

struct State {
    const Options& opt;
    bool measuring = false;
    bool stop = false;
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

Task<void> worker(TcpStream s, unsigned id, State& st) {
    const Options& o = st.opt;
    const auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(o.op_timeout));
    std::vector<char> out(o.size * o.pipeline), in(o.size * o.pipeline);
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<char>('a' + (i + id) % 26);
    (void)s.set_nodelay(true);
    for (std::uint64_t seq = 0; !st.stop; ++seq) {
        stamp(out, o.size, id, seq, o.pipeline);
        const auto t0 = Clock::now();
        auto w = co_await s.send_all(out).timeout(timeout);
        if (!w) {
            st.error(id, "send", w.error().message());
            co_return;
        }
        auto r = co_await s.recv_exact(in).timeout(timeout);
        if (!r) {
            st.error(id, "recv",
                     r.error() == errc::unexpected_eof ? "the server closed the connection mid-echo"
                                                       : r.error().message());
            co_return;
        }
        if (std::memcmp(in.data(), out.data(), in.size()) != 0) {
            st.error(id, "verify", "the echoed bytes differ from what was sent");
            co_return;
        }
        if (st.measuring) {
            const auto ns = static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
            st.ok += o.pipeline;
            for (unsigned k = 0; k < o.pipeline; ++k)
                st.hist.record(ns);
        }
    }
}

struct Report {
    double seconds = 0;
    std::optional<double> server_cpu;
    unsigned connected = 0;
};

double mib(std::uint64_t requests, std::size_t size) {
    return double(requests) * double(size) * 2.0 / double(1 << 20); // sent + received
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
    for (unsigned first = 0; first < o.connections; first += kWave) {
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

    auto controller = [&]() -> Task<void> {
        if (o.warmup > 0)
            co_await sleep(std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::duration<double>(o.warmup)));
        std::optional<double> cpu0;
        if (o.server_pid > 0) cpu0 = tools::process_cpu_seconds(o.server_pid);
        const auto start = Clock::now();
        st.measuring = true;
        std::uint64_t last = 0;
        const auto whole = static_cast<int>(o.duration);
        for (int sec = 1; sec <= whole; ++sec) {
            co_await sleep_until(start + std::chrono::seconds(sec));
            const std::uint64_t now_ok = st.ok;
            std::FILE* out = o.json ? stderr : stdout;
            std::fprintf(out, "[%ds] QPS: %s | Throughput: %.2f MB/s | Total: %s | Errors: %s\n",
                         sec, tools::with_commas(now_ok - last).c_str(), mib(now_ok - last, o.size),
                         tools::with_commas(now_ok).c_str(), tools::with_commas(st.errors).c_str());
            std::fflush(out);
            last = now_ok;
        }
        if (o.duration > whole)
            co_await sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(o.duration)));
        st.measuring = false;
        rep.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (cpu0) {
            auto cpu1 = tools::process_cpu_seconds(o.server_pid);
            if (cpu1) rep.server_cpu = *cpu1 - *cpu0;
        }
        st.stop = true;
    };
    std::vector<Task<void>> workers;
    workers.reserve(conns.size());
    for (unsigned i = 0; i < conns.size(); ++i)
        workers.push_back(worker(std::move(conns[i]), i, st));
    co_await when_all(when_all(std::move(workers)), controller());
    co_return rep;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"TCP echo benchmark client on galay-kernel"};
    app.set_help_flag("--help",
                      "Print this help and exit"); // -h is the host, as in our users' reports
    app.add_option("-h,--host", o.host, "server host")->capture_default_str();
    app.add_option("-p,--port", o.port, "server port")->capture_default_str();
    app.add_option("-c,--connections", o.connections, "concurrent connections")
        ->check(CLI::Range(1u, 1'000'000u))
        ->capture_default_str();
    app.add_option("-s,--size", o.size, "message size in bytes")
        ->check(CLI::Range(std::size_t{1}, std::size_t{64} << 20))
        ->capture_default_str();
    app.add_option("-d,--duration", o.duration, "measured duration in seconds")
        ->check(CLI::Range(0.1, 86400.0))
        ->capture_default_str();
    app.add_option("-P,--pipeline", o.pipeline, "messages in flight per connection")
        ->check(CLI::Range(1u, 4096u))
        ->capture_default_str();
    app.add_option("--warmup", o.warmup, "seconds of traffic before measuring")
        ->check(CLI::Range(0.0, 3600.0))
        ->capture_default_str();
    app.add_option("--server-pid", o.server_pid,
                   "report the server's CPU time per request (reads /proc/PID/stat)");
    app.add_option("--timeout", o.op_timeout, "seconds before a silent server is an error")
        ->check(CLI::Range(0.01, 3600.0))
        ->capture_default_str();
    app.add_flag("--json", o.json, "print one JSON object instead of the text report");
    tools::add_backend_flag(app, &o.backend);
    CLI11_PARSE(app, argc, argv);

    if (o.server_pid > 0 && !tools::process_cpu_seconds(o.server_pid)) {
        std::fprintf(stderr, "bench_client: --server-pid %d: no such process\n", o.server_pid);
        return 2;
    }
    if (!tools::ensure_fd_limit(o.connections + 64ull, "bench_client")) return 1;
    std::signal(SIGPIPE, SIG_IGN);

    std::optional<Scheduler> sched;
    try {
        sched.emplace(SchedulerOptions{.backend = o.backend});
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_client: %s\n", e.what());
        return 1;
    }
    if (!o.json) {
        std::printf("=== Benchmark Client ===\nTarget: %s:%u\nConnections: %u\nMessage Size: %zu "
                    "bytes\nDuration: %g seconds\n",
                    o.host.c_str(), o.port, o.connections, o.size, o.duration);
        if (o.pipeline > 1) std::printf("Pipeline: %u\n", o.pipeline);
        if (o.warmup > 0) std::printf("Warmup: %g seconds\n", o.warmup);
        std::printf("Backend: %s\n========================\n\n", sched->backend_name());
        std::fflush(stdout);
    }
    State st{o};
    Report rep = sched->block_on(run(st));

    if (rep.connected == 0) return 1; // nothing was measured: no figures to print

    const std::uint64_t total = st.ok + st.errors;
    const double secs = rep.seconds;
    const double qps = secs > 0 ? double(st.ok) / secs : 0;
    const double mbps = secs > 0 ? mib(st.ok, o.size) / secs : 0;
    auto us = [&](double q) { return double(st.hist.percentile_ns(q)) / 1000.0; };
    std::optional<double> cpu_per_req;
    if (rep.server_cpu && st.ok > 0) cpu_per_req = *rep.server_cpu * 1e6 / double(st.ok);

    if (o.json) {
        nlohmann::json j = {
            {"tool", "bench_client"},
            {"backend", sched->backend_name()},
            {"host", o.host},
            {"port", o.port},
            {"connections", o.connections},
            {"connected", rep.connected},
            {"message_size", o.size},
            {"pipeline", o.pipeline},
            {"duration_s", secs},
            {"requests", total},
            {"successful", st.ok},
            {"errors", st.errors},
            {"bytes", st.ok * o.size * 2},
            {"qps", qps},
            {"throughput_mbps", mbps},
            {"latency_us",
             {{"mean", st.hist.mean_ns() / 1000.0},
              {"p50", us(0.50)},
              {"p99", us(0.99)},
              {"p999", us(0.999)},
              {"max", double(st.hist.max_ns()) / 1000.0}}},
            {"server_cpu_s", rep.server_cpu ? nlohmann::json(*rep.server_cpu) : nullptr},
            {"server_cpu_us_per_req", cpu_per_req ? nlohmann::json(*cpu_per_req) : nullptr},
        };
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("\n=== Final Results ===\n");
        std::printf("Total Requests: %s\n", tools::with_commas(total).c_str());
        std::printf("Successful: %s\n", tools::with_commas(st.ok).c_str());
        std::printf("Errors: %s\n", tools::with_commas(st.errors).c_str());
        std::printf("Total Data: %.2f MB\n", mib(st.ok, o.size));
        std::printf("Average QPS: %s\n",
                    tools::with_commas(static_cast<std::uint64_t>(qps)).c_str());
        std::printf("Average Throughput: %.2f MB/s\n", mbps);
        if (st.hist.count() > 0)
            std::printf("Latency (us): p50 %.1f | p99 %.1f | p99.9 %.1f | mean %.1f | max %.1f\n",
                        us(0.50), us(0.99), us(0.999), st.hist.mean_ns() / 1000.0,
                        double(st.hist.max_ns()) / 1000.0);
        if (cpu_per_req)
            std::printf("Server CPU: %.3f s, %.3f us per request\n", *rep.server_cpu, *cpu_per_req);
    }
    if (st.errors > 0) {
        std::fprintf(stderr, "bench_client: %s error%s (see above): exit code 1\n",
                     tools::with_commas(st.errors).c_str(), st.errors == 1 ? "" : "s");
        return 1;
    }
    if (st.ok == 0) {
        std::fprintf(stderr, "bench_client: no request completed in the measured window\n");
        return 1;
    }
    return 0;
}
