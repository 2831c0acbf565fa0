// bench_udp: UDP echo benchmark on galay-kernel, with the UDP study's defaults: 4 server workers on
// one port (UdpSocket::bind_group: SO_REUSEPORT among themselves, and a port another process
// holds is an error), 100 clients, 1000 messages each, 256 bytes, 10 datagrams in flight per
// client. Every echo is checked (client id, sequence number, payload); a datagram not echoed by
// the end of the drain timeout is lost, a wrong payload is an error (exit code 1).
//
//   bench_udp                                   server thread + client thread in one process
//   bench_udp -c 100 -n 1000 -s 256 -w 4 -P 10 [-d 5 --warmup 1] [--backend epoll] [--json]
//   bench_udp server -p 9000 [-w 4] [--backend io_uring]           split mode: pin each side
//   bench_udp client -h 127.0.0.1 -p 9000 [-c 100 -n 1000 ...] [--server-pid PID]
//
// Exit codes: 0 success, 1 runtime failure (bind, I/O errors, wrong payloads, no echo, loss above
// --max-loss), 2 usage error. Ctrl-C (SIGINT) or SIGTERM: the clients stop sending, drain, and the
// report of what was measured is printed (marked interrupted); the server prints its counters and
// exits 0. A second signal exits at once.
#include "args/bench_udp.hpp"
#include "common/tool_support.hpp"
#include "common/udp_echo.hpp"

#include <galay/galay.hpp>

#include <nlohmann/json.hpp>

#include <pthread.h>
#include <time.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <future>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace galay;
namespace udp = galay::tools::udp;
namespace args = galay::tools::bench_udp;
using Clock = std::chrono::steady_clock;

using tools::bench_udp::ClientOptions;
using tools::bench_udp::ServerOptions;

std::chrono::nanoseconds seconds(double s) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

// --- server -----------------------------------------------------------------------------------

/// Bind `workers` sockets on one port, shared among themselves only (port 0: any free port).
Result<std::vector<UdpSocket>> bind_workers(const ServerOptions& o) {
    auto addr = SocketAddr::from_ip(o.bind, o.port);
    if (!addr) return std::unexpected(addr.error());
    return UdpSocket::bind_group(
        *addr, o.workers,
        {.recv_buffer_size = o.rcvbuf, .segmentation_offload = o.gso, .receive_offload = o.gro});
}

/// "cannot bind 0.0.0.0 port 9000: Address already in use (another process holds the port:
/// a server still running?)"
std::string bind_error(const ServerOptions& o, std::error_code e) {
    std::string msg = "cannot bind " + o.bind + " port " + std::to_string(o.port) + ": ";
    if (e == std::errc::invalid_argument && !SocketAddr::from_ip(o.bind, o.port))
        return msg + "'" + o.bind + "' is not a numeric IPv4 or IPv6 address";
    msg += e.message();
    if (e == std::errc::address_in_use)
        msg += " (another socket holds the port: a server still running? pick another -p)";
    return msg;
}

Task<void> serve_all(std::vector<UdpSocket>& socks, std::vector<udp::ServerCounters>& counters,
                     std::size_t buffer) {
    std::vector<Task<void>> workers;
    for (std::size_t i = 0; i < socks.size(); ++i)
        workers.push_back(udp::serve_echo(socks[i], counters[i], buffer));
    co_await when_all(std::move(workers));
}

Task<void> cancel_here(CancelSource& source) {
    source.cancel();
    co_return;
}

/// The server on a thread of its own, for the one-process mode.
class ServerThread {
public:
    ServerThread(std::vector<UdpSocket> socks, const ServerOptions& o)
        : socks_(std::move(socks))
        , counters_(socks_.size()) {
        auto ready = started_.get_future();
        thread_ = std::thread([this, o] {
            std::optional<Scheduler> sched;
            try {
                sched.emplace(SchedulerOptions{.backend = o.backend});
            } catch (...) {
                started_.set_exception(std::current_exception());
                return;
            }
            sched_ = &*sched;
            started_.set_value();
            sched->block_on(with_cancel(stop_, serve_all(socks_, counters_, o.buffer)));
            std::lock_guard lock(mutex_); // no post() reaches a scheduler being destroyed
            sched_ = nullptr;
        });
        try {
            ready.get();
        } catch (...) {
            thread_.join();
            throw;
        }
        backend_ = sched_->backend_name();
        pthread_getcpuclockid(thread_.native_handle(), &cpu_clock_);
    }
    ~ServerThread() { stop(); }

    const char* backend_name() const { return backend_; }
    /// CPU time the server thread has used, in seconds (while it runs).
    double cpu_seconds() const {
        timespec ts{};
        clock_gettime(cpu_clock_, &ts);
        return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
    }
    /// Cancel the workers (on the server's own thread) and wait for them.
    void stop() {
        if (!thread_.joinable()) return;
        Task<void> stopper = cancel_here(stop_);
        {
            std::lock_guard lock(mutex_);
            if (sched_ != nullptr) sched_->post(stopper.handle());
        }
        thread_.join();
    }
    udp::ServerCounters totals() const {
        udp::ServerCounters t;
        for (const auto& c : counters_) {
            t.received += c.received;
            t.sent += c.sent;
            t.truncated += c.truncated;
            t.errors += c.errors;
        }
        return t;
    }

private:
    std::vector<UdpSocket> socks_;
    std::vector<udp::ServerCounters> counters_;
    CancelSource stop_;
    std::promise<void> started_;
    std::mutex mutex_;
    Scheduler* sched_ = nullptr; // guarded by mutex_ once the thread runs
    const char* backend_ = "";
    std::thread thread_;
    clockid_t cpu_clock_{};
};

/// Serve until SIGINT/SIGTERM; then print the counters.
Task<int> serve_until_stopped(std::vector<UdpSocket>& socks,
                              std::vector<udp::ServerCounters>& counters, std::size_t buffer) {
    auto r = co_await when_any(serve_all(socks, counters, buffer), tools::wait_for_stop_signal());
    co_return r.index() == 1 ? std::get<1>(r) : 0;
}

int run_server(const ServerOptions& o) {
    auto socks = bind_workers(o);
    if (!socks) {
        std::fprintf(stderr, "bench_udp server: %s\n", bind_error(o, socks.error()).c_str());
        return 1;
    }
    const SocketAddr local = *socks->front().local_addr();
    try {
        Scheduler sched({.backend = o.backend});
        std::printf("listening on %s (bench_udp server, %s, %u worker%s)\n",
                    local.to_string().c_str(), sched.backend_name(), o.workers,
                    o.workers == 1 ? "" : "s");
        std::fflush(stdout);
        std::vector<udp::ServerCounters> counters(socks->size());
        const int sig = sched.block_on(serve_until_stopped(*socks, counters, o.buffer));
        udp::ServerCounters t;
        for (const auto& c : counters) {
            t.received += c.received;
            t.sent += c.sent;
            t.truncated += c.truncated;
            t.errors += c.errors;
        }
        std::printf("bench_udp server: stopped by %s: %s datagrams received, %s echoed, %s "
                    "truncated, %s errors\n",
                    sig == SIGINT ? "SIGINT" : "SIGTERM", tools::with_commas(t.received).c_str(),
                    tools::with_commas(t.sent).c_str(), tools::with_commas(t.truncated).c_str(),
                    tools::with_commas(t.errors).c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_udp server: %s\n", e.what());
        return 1;
    }
    return 0;
}

// --- client and report ------------------------------------------------------------------------

struct Outcome {
    udp::ClientReport report;
    std::optional<double> server_cpu;          // seconds, over the measured part
    std::optional<udp::ServerCounters> server; // one-process mode only
    std::string backend;
    bool resolved = true;
    int interrupted_by = 0; // SIGINT/SIGTERM ended the run early
};

Task<void> progress(const udp::LiveCounters& live, bool to_stderr) {
    std::uint64_t last_sent = 0, last_received = 0;
    const auto start = Clock::now();
    for (int sec = 1;; ++sec) {
        auto slept = co_await sleep_until(start + std::chrono::seconds(sec));
        if (!slept) co_return; // cancelled
        std::FILE* out = to_stderr ? stderr : stdout;
        std::fprintf(out, "[%ds] Sent: %s pkt/s | Received: %s pkt/s\n", sec,
                     tools::with_commas(live.sent - last_sent).c_str(),
                     tools::with_commas(live.received - last_received).c_str());
        std::fflush(out);
        last_sent = live.sent;
        last_received = live.received;
    }
}

/// Waits for SIGINT/SIGTERM, then ends the run early (the clients drain and report); then
/// waits to be cancelled, when the clients have finished.
Task<void> stop_on_signal(CancelSource& stop, int* signal) {
    *signal = co_await tools::wait_for_stop_signal();
    if (*signal == 0) co_return; // cancelled: the run finished first
    stop.cancel();
    for (;;) {
        auto slept = co_await sleep(std::chrono::hours(24));
        if (!slept) co_return;
    }
}

Task<udp::ClientReport> clients_with_progress(const udp::ClientConfig& cfg, bool progress_lines,
                                              bool to_stderr, int* signal) {
    udp::LiveCounters live;
    auto watch = [&]() -> Task<void> {
        if (progress_lines)
            co_await when_all(progress(live, to_stderr), stop_on_signal(*cfg.stop, signal));
        else
            co_await stop_on_signal(*cfg.stop, signal);
    };
    auto r = co_await when_any(udp::run_echo_clients(cfg, &live), watch());
    co_return std::move(std::get<0>(r));
}

/// Sample server CPU around the run; resolve the host first.
Task<Outcome> run_client(const ClientOptions& o, std::function<std::optional<double>()> cpu) {
    Outcome out;
    auto addrs = co_await resolve(o.host, o.port);
    if (!addrs || addrs->empty()) {
        std::fprintf(stderr, "bench_udp: cannot resolve %s: %s\n", o.host.c_str(),
                     addrs ? "no address" : addrs.error().message().c_str());
        out.resolved = false;
        co_return out;
    }
    udp::ClientConfig cfg;
    cfg.server = addrs->front();
    cfg.clients = o.clients;
    cfg.messages = o.messages;
    cfg.size = o.size;
    cfg.pipeline = o.pipeline;
    cfg.duration = seconds(o.duration);
    cfg.warmup = seconds(o.warmup);
    cfg.drain_timeout = seconds(o.drain);
    cfg.stall_timeout = seconds(o.stall);
    cfg.segmentation_offload = o.gso;
    cfg.receive_offload = o.gro;
    CancelSource stop; // cancelled by SIGINT/SIGTERM: the run ends early
    cfg.stop = &stop;
    const bool timed = o.duration > 0;
    // Duration mode: the CPU window is the measured window (sampled by a task beside the clients,
    // cut short with it by a stop signal).
    std::optional<double> cpu0, cpu1;
    auto sampler = [&]() -> Task<void> {
        (void)co_await sleep(cfg.warmup);
        cpu0 = cpu();
        (void)co_await sleep(cfg.duration);
        cpu1 = cpu();
    };
    int sig = 0;
    if (timed) {
        auto [rep, _] = co_await when_all(clients_with_progress(cfg, true, o.json, &sig),
                                          with_cancel(stop, sampler()));
        out.report = std::move(rep);
    } else {
        cpu0 = cpu();
        out.report = co_await clients_with_progress(cfg, false, false, &sig);
        cpu1 = cpu();
    }
    out.interrupted_by = sig;
    if (cpu0 && cpu1) out.server_cpu = *cpu1 - *cpu0;
    co_return out;
}

/// What a client run measured, ready to print.
struct UdpFigures {
    double secs = 0;
    double sent_pps = 0, recv_pps = 0; // in the measured window
    bool timed = false;                // -d: a measured window, not a message count
    std::optional<double> cpu_us;      // server CPU per echoed packet (--server-pid or -w)
};

UdpFigures figures_of(const ClientOptions& o, const Outcome& out) {
    const udp::ClientReport& r = out.report;
    UdpFigures f;
    f.secs = r.seconds;
    f.sent_pps = tools::per_second(double(r.window_sent), f.secs);
    f.recv_pps = tools::per_second(double(r.window_received), f.secs);
    f.timed = o.duration > 0;
    if (out.server_cpu && r.window_received > 0)
        f.cpu_us = *out.server_cpu * 1e6 / double(r.window_received);
    return f;
}

void print_json(const ClientOptions& o, const Outcome& out, const UdpFigures& f) {
    const udp::ClientReport& r = out.report;
    const udp::LossCounts& c = r.counts;
    nlohmann::json j = {
        {"tool", "bench_udp"},
        {"backend", out.backend},
        {"host", o.host},
        {"port", o.port},
        {"clients", o.clients},
        {"server_workers", o.workers ? nlohmann::json(*o.workers) : nullptr},
        {"messages_per_client", f.timed ? nlohmann::json(nullptr) : nlohmann::json(o.messages)},
        {"duration_mode_s", f.timed ? nlohmann::json(o.duration) : nlohmann::json(nullptr)},
        {"message_size", o.size},
        {"pipeline", o.pipeline},
        {"duration_s", f.secs},
        {"packets_sent", c.sent},
        {"packets_received", c.received},
        {"packets_lost", c.lost()},
        {"loss_percent", c.loss_percent()},
        {"loss_rate", c.loss_percent()}, // the name bench/suite.py reads (percent)
        {"errors", r.wrong_payload + r.io_errors},
        {"duplicates", c.duplicates},
        {"wrong_payload", r.wrong_payload},
        {"io_errors", r.io_errors},
        {"bytes_sent", c.sent * o.size},
        {"bytes_received", c.received * o.size},
        {"window_packets_sent", r.window_sent},
        {"window_packets_received", r.window_received},
        {"sent_pps", f.sent_pps},
        {"received_pps", f.recv_pps},
        {"sent_mbps", tools::mib(f.sent_pps * double(o.size))},
        {"received_mbps", tools::mib(f.recv_pps * double(o.size))},
        {"server_cpu_s", out.server_cpu ? nlohmann::json(*out.server_cpu) : nullptr},
        {"server_cpu_us_per_packet", f.cpu_us ? nlohmann::json(*f.cpu_us) : nullptr},
        {"interrupted", out.interrupted_by != 0},
    };
    if (out.server)
        j["server"] = {{"received", out.server->received},
                       {"sent", out.server->sent},
                       {"truncated", out.server->truncated},
                       {"errors", out.server->errors}};
    std::printf("%s\n", j.dump().c_str());
}

void print_text(const ClientOptions& o, const Outcome& out, const UdpFigures& f) {
    const udp::ClientReport& r = out.report;
    const udp::LossCounts& c = r.counts;
    std::printf("\n========== UDP Benchmark Results ==========\n");
    if (out.interrupted_by != 0)
        std::printf("Interrupted: %s (the clients stopped sending and drained)\n",
                    out.interrupted_by == SIGINT ? "SIGINT" : "SIGTERM");
    std::printf("Backend: %s\n", out.backend.c_str());
    std::printf("Test Duration: %.2f seconds%s\n", f.secs,
                f.timed ? " (measured window)" : " (first send to last echo)");
    std::printf("Concurrent Clients: %u\n", o.clients);
    if (o.workers)
        std::printf("Server Workers: %u\n", *o.workers);
    else
        std::printf("Server Workers: (separate server process)\n");
    if (f.timed)
        std::printf("Messages per Client: (duration mode, %g s)\n", o.duration);
    else
        std::printf("Messages per Client: %s\n", tools::with_commas(o.messages).c_str());
    std::printf("Message Size: %zu bytes\n", o.size);
    std::printf("Pipeline Depth: %u\n\n", o.pipeline);
    std::printf("Total Packets Sent: %s\n", tools::with_commas(c.sent).c_str());
    std::printf("Total Packets Received: %s\n", tools::with_commas(c.received).c_str());
    std::printf("Packet Loss Rate: %.2f%% (%s lost, %s duplicate%s)\n", c.loss_percent(),
                tools::with_commas(c.lost()).c_str(), tools::with_commas(c.duplicates).c_str(),
                c.duplicates == 1 ? "" : "s");
    if (r.wrong_payload + r.io_errors > 0)
        std::printf("Errors: %s wrong payload, %s I/O\n",
                    tools::with_commas(r.wrong_payload).c_str(),
                    tools::with_commas(r.io_errors).c_str());
    std::printf("\nTotal Data Sent: %.2f MB\n", tools::mib(double(c.sent) * double(o.size)));
    std::printf("Total Data Received: %.2f MB\n\n",
                tools::mib(double(c.received) * double(o.size)));
    std::printf("Average Throughput%s:\n", f.timed ? " (measured window)" : "");
    std::printf("  Sent: %s pkt/s (%.2f MB/s)\n", tools::with_commas_2dp(f.sent_pps).c_str(),
                tools::mib(f.sent_pps * double(o.size)));
    std::printf("  Received: %s pkt/s (%.2f MB/s)\n", tools::with_commas_2dp(f.recv_pps).c_str(),
                tools::mib(f.recv_pps * double(o.size)));
    if (f.cpu_us)
        std::printf("Server CPU: %.3f s, %.3f us per echoed packet\n", *out.server_cpu, *f.cpu_us);
    std::printf("===========================================\n");
}

/// 1 when the run lost data integrity, found no echo, or lost more than --max-loss; else 0.
int exit_code(const ClientOptions& o, const Outcome& out) {
    const udp::ClientReport& r = out.report;
    const udp::LossCounts& c = r.counts;
    for (const std::string& e : r.first_errors)
        std::fprintf(stderr, "bench_udp: %s\n", e.c_str());
    if (r.wrong_payload + r.io_errors > 0) {
        tools::print_error_count("bench_udp", r.wrong_payload + r.io_errors);
        return 1;
    }
    if (out.server && (out.server->truncated > 0 || out.server->errors > 0)) {
        std::fprintf(stderr, "bench_udp: the server saw %s truncated datagrams and %s errors\n",
                     tools::with_commas(out.server->truncated).c_str(),
                     tools::with_commas(out.server->errors).c_str());
        return 1;
    }
    if (c.received == 0) {
        std::fprintf(stderr, "bench_udp: no echo came back from %s:%u\n", o.host.c_str(), o.port);
        return 1;
    }
    if (o.max_loss >= 0 && c.loss_percent() > o.max_loss) {
        std::fprintf(stderr, "bench_udp: loss %.4f%% exceeds --max-loss %g%%: exit code 1\n",
                     c.loss_percent(), o.max_loss);
        return 1;
    }
    return 0;
}

int report(const ClientOptions& o, const Outcome& out) {
    const UdpFigures f = figures_of(o, out);
    if (o.json)
        print_json(o, out, f);
    else
        print_text(o, out, f);
    return exit_code(o, out);
}

void print_header(const ClientOptions& o, const char* backend) {
    if (o.json) return;
    std::printf("=== UDP Benchmark ===\nTarget: %s:%u\nClients: %u, pipeline %u, %zu bytes, ",
                o.host.c_str(), o.port, o.clients, o.pipeline, o.size);
    if (o.duration > 0)
        std::printf("%g s (warm-up %g s)\n", o.duration, o.warmup);
    else
        std::printf("%s messages each\n", tools::with_commas(o.messages).c_str());
    std::printf("Backend: %s\n", backend);
    std::fflush(stdout);
}

int run_split_client(const ClientOptions& o) {
    std::optional<Scheduler> sched;
    if (!tools::start_scheduler(sched, o.backend, "bench_udp")) return 1;
    print_header(o, sched->backend_name());
    const int pid = o.server_pid;
    Outcome out = sched->block_on(run_client(o, [pid]() -> std::optional<double> {
        if (pid <= 0) return std::nullopt;
        return tools::process_cpu_seconds(pid);
    }));
    if (!out.resolved) return 1;
    out.backend = sched->backend_name();
    return report(o, out);
}

int run_both(ClientOptions o, ServerOptions so) {
    auto socks = bind_workers(so);
    if (!socks) {
        std::fprintf(stderr, "bench_udp: %s\n", bind_error(so, socks.error()).c_str());
        return 1;
    }
    o.port = socks->front().local_addr()->port();
    std::optional<ServerThread> server;
    std::optional<Scheduler> sched;
    try {
        server.emplace(std::move(*socks), so);
        sched.emplace(SchedulerOptions{.backend = o.backend});
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_udp: %s\n", e.what());
        return 1;
    }
    print_header(o, sched->backend_name());
    ServerThread* srv = &*server;
    Outcome out = sched->block_on(
        run_client(o, [srv]() -> std::optional<double> { return srv->cpu_seconds(); }));
    server->stop();
    out.server = server->totals();
    out.backend = sched->backend_name();
    if (std::string(server->backend_name()) != out.backend)
        out.backend += std::string(" (server ") + server->backend_name() + ")";
    return report(o, out);
}

int run(const args::Options& a) {
    std::signal(SIGPIPE, SIG_IGN);
    if (a.mode == args::Mode::server) {
        tools::install_stop_handlers();
        return run_server(a.server);
    }
    const ClientOptions& o = a.client;
    if (o.server_pid > 0 && !tools::process_cpu_seconds(o.server_pid)) {
        std::fprintf(stderr, "bench_udp: --server-pid %d: no such process\n", o.server_pid);
        return 2;
    }
    const unsigned own_server = a.mode == args::Mode::both ? a.server.workers : 0;
    if (!tools::ensure_fd_limit(o.clients + own_server + 64ull, "bench_udp")) return 1;
    tools::install_stop_handlers(); // before the header: from then on Ctrl-C gives a summary
    return a.mode == args::Mode::client ? run_split_client(o) : run_both(o, a.server);
}

} // namespace

int main(int argc, char** argv) {
    auto parsed = tools::bench_udp::parse_args(tools::args_from(argc, argv));
    if (!parsed) return tools::print_exit(parsed.error());
    try {
        return run(*parsed);
    } catch (const std::bad_alloc&) { // the memory check passed, but the machine is short now
        std::fprintf(stderr, "bench_udp: out of memory\n");
        return 1;
    }
}
