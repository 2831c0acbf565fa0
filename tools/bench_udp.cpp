// bench_udp: UDP echo benchmark on galay-kernel, with our users' defaults: 4 server workers on
// SO_REUSEPORT sockets, 100 clients, 1000 messages each, 256 bytes, 10 datagrams in flight per
// client. Every echo is checked (client id, sequence number, payload); a datagram not echoed by
// the end of the drain timeout is lost, a wrong payload is an error (exit code 1).
//
//   bench_udp                                   server thread + client thread in one process
//   bench_udp -c 100 -n 1000 -s 256 -w 4 -P 10 [-d 5 --warmup 1] [--backend epoll] [--json]
//   bench_udp server -p 9000 [-w 4] [--backend io_uring]           split mode: pin each side
//   bench_udp client -h 127.0.0.1 -p 9000 [-c 100 -n 1000 ...] [--server-pid PID]
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
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace galay;
namespace udp = galay::tools::udp;
using Clock = std::chrono::steady_clock;

struct ServerOptions {
    std::string bind = "0.0.0.0";
    std::uint16_t port = 8080;
    unsigned workers = 4;
    int rcvbuf = 4 << 20;
    std::size_t buffer = 2048; // raised to the message size in the one-process mode
    bool gso = true;
    bool gro = true;
    Backend backend = Backend::automatic;
};

struct ClientOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;
    unsigned clients = 100;
    std::uint64_t messages = 1000;
    std::size_t size = 256;
    unsigned pipeline = 10;
    double duration = 0;
    double warmup = 0;
    double drain = 1.0;
    double stall = 0.2;
    std::optional<unsigned> workers; // for the report (split mode: the server's own -w)
    int server_pid = 0;
    double max_loss = -1; // percent; < 0: loss never fails the run
    bool json = false;
    bool gso = true;
    bool gro = true;
    Backend backend = Backend::automatic;
};

std::chrono::nanoseconds seconds(double s) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

/// 34977.264 -> "34,977.26"
std::string commas2(double v) {
    const auto whole = static_cast<std::uint64_t>(v);
    const auto cents = static_cast<unsigned>(std::llround((v - double(whole)) * 100.0));
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%02u", cents == 100 ? 0u : cents);
    return tools::with_commas(cents == 100 ? whole + 1 : whole) + frac;
}

double mib(std::uint64_t packets, std::size_t size) {
    return double(packets) * double(size) / double(1 << 20);
}

// --- server -----------------------------------------------------------------------------------

/// Bind `workers` SO_REUSEPORT sockets on one port (port 0: the first picks it for all).
Result<std::vector<UdpSocket>> bind_workers(const ServerOptions& o) {
    auto addr = SocketAddr::from_ip(o.bind, o.port);
    if (!addr) return std::unexpected(addr.error());
    std::vector<UdpSocket> socks;
    for (unsigned i = 0; i < o.workers; ++i) {
        auto s = UdpSocket::bind(*addr, {.reuse_port = true,
                                         .recv_buffer_size = o.rcvbuf,
                                         .segmentation_offload = o.gso,
                                         .receive_offload = o.gro});
        if (!s) return std::unexpected(s.error());
        if (i == 0 && addr->port() == 0) addr->set_port(s->local_addr()->port());
        socks.push_back(std::move(*s));
    }
    return socks;
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

int run_server(const ServerOptions& o) {
    auto socks = bind_workers(o);
    if (!socks) {
        std::fprintf(stderr, "bench_udp server: cannot bind %s port %u: %s\n", o.bind.c_str(),
                     o.port, socks.error().message().c_str());
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
        sched.block_on(serve_all(*socks, counters, o.buffer));
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
};

Task<void> progress(const udp::LiveCounters& live, bool to_stderr) {
    std::uint64_t last_sent = 0, last_received = 0;
    const auto start = Clock::now();
    for (int sec = 1;; ++sec) {
        if (!co_await sleep_until(start + std::chrono::seconds(sec))) co_return; // cancelled
        std::FILE* out = to_stderr ? stderr : stdout;
        std::fprintf(out, "[%ds] Sent: %s pkt/s | Received: %s pkt/s\n", sec,
                     tools::with_commas(live.sent - last_sent).c_str(),
                     tools::with_commas(live.received - last_received).c_str());
        std::fflush(out);
        last_sent = live.sent;
        last_received = live.received;
    }
}

Task<udp::ClientReport> clients_with_progress(const udp::ClientConfig& cfg, bool to_stderr) {
    udp::LiveCounters live;
    auto r = co_await when_any(udp::run_echo_clients(cfg, &live), progress(live, to_stderr));
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
    const bool timed = o.duration > 0;
    // Duration mode: the CPU window is the measured window (sampled by a task beside the clients).
    std::optional<double> cpu0, cpu1;
    auto sampler = [&]() -> Task<void> {
        co_await sleep(cfg.warmup);
        cpu0 = cpu();
        co_await sleep(cfg.duration);
        cpu1 = cpu();
    };
    if (timed) {
        auto [rep, _] = co_await when_all(clients_with_progress(cfg, o.json), sampler());
        out.report = std::move(rep);
    } else {
        cpu0 = cpu();
        out.report = co_await udp::run_echo_clients(cfg);
        cpu1 = cpu();
    }
    if (cpu0 && cpu1) out.server_cpu = *cpu1 - *cpu0;
    co_return out;
}

int report(const ClientOptions& o, const Outcome& out) {
    const udp::ClientReport& r = out.report;
    const udp::LossCounts& c = r.counts;
    const double secs = r.seconds;
    const double sent_pps = secs > 0 ? double(r.window_sent) / secs : 0;
    const double recv_pps = secs > 0 ? double(r.window_received) / secs : 0;
    const bool timed = o.duration > 0;
    std::optional<double> cpu_us;
    if (out.server_cpu && r.window_received > 0)
        cpu_us = *out.server_cpu * 1e6 / double(r.window_received);

    if (o.json) {
        nlohmann::json j = {
            {"tool", "bench_udp"},
            {"backend", out.backend},
            {"host", o.host},
            {"port", o.port},
            {"clients", o.clients},
            {"server_workers", o.workers ? nlohmann::json(*o.workers) : nullptr},
            {"messages_per_client", timed ? nlohmann::json(nullptr) : nlohmann::json(o.messages)},
            {"duration_mode_s", timed ? nlohmann::json(o.duration) : nlohmann::json(nullptr)},
            {"message_size", o.size},
            {"pipeline", o.pipeline},
            {"duration_s", secs},
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
            {"sent_pps", sent_pps},
            {"received_pps", recv_pps},
            {"sent_mbps", sent_pps * double(o.size) / double(1 << 20)},
            {"received_mbps", recv_pps * double(o.size) / double(1 << 20)},
            {"server_cpu_s", out.server_cpu ? nlohmann::json(*out.server_cpu) : nullptr},
            {"server_cpu_us_per_packet", cpu_us ? nlohmann::json(*cpu_us) : nullptr},
        };
        if (out.server)
            j["server"] = {{"received", out.server->received},
                           {"sent", out.server->sent},
                           {"truncated", out.server->truncated},
                           {"errors", out.server->errors}};
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("\n========== UDP Benchmark Results ==========\n");
        std::printf("Backend: %s\n", out.backend.c_str());
        std::printf("Test Duration: %.2f seconds%s\n", secs,
                    timed ? " (measured window)" : " (first send to last echo)");
        std::printf("Concurrent Clients: %u\n", o.clients);
        if (o.workers)
            std::printf("Server Workers: %u\n", *o.workers);
        else
            std::printf("Server Workers: (separate server process)\n");
        if (timed)
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
        std::printf("\nTotal Data Sent: %.2f MB\n", mib(c.sent, o.size));
        std::printf("Total Data Received: %.2f MB\n\n", mib(c.received, o.size));
        std::printf("Average Throughput%s:\n", timed ? " (measured window)" : "");
        std::printf("  Sent: %s pkt/s (%.2f MB/s)\n", commas2(sent_pps).c_str(),
                    sent_pps * double(o.size) / double(1 << 20));
        std::printf("  Received: %s pkt/s (%.2f MB/s)\n", commas2(recv_pps).c_str(),
                    recv_pps * double(o.size) / double(1 << 20));
        if (cpu_us)
            std::printf("Server CPU: %.3f s, %.3f us per echoed packet\n", *out.server_cpu,
                        *cpu_us);
        std::printf("===========================================\n");
    }
    for (const std::string& e : r.first_errors)
        std::fprintf(stderr, "bench_udp: %s\n", e.c_str());
    if (r.wrong_payload + r.io_errors > 0) {
        std::fprintf(stderr, "bench_udp: %s error%s (see above): exit code 1\n",
                     tools::with_commas(r.wrong_payload + r.io_errors).c_str(),
                     r.wrong_payload + r.io_errors == 1 ? "" : "s");
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
        std::fprintf(stderr, "bench_udp: loss %.4f%% exceeds --max-loss %g%%: exit code 3\n",
                     c.loss_percent(), o.max_loss);
        return 3;
    }
    return 0;
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
    try {
        sched.emplace(SchedulerOptions{.backend = o.backend});
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_udp: %s\n", e.what());
        return 1;
    }
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
    so.port = o.port;
    so.bind = o.host; // the server listens on the address the clients use
    auto socks = bind_workers(so);
    if (!socks) {
        std::fprintf(stderr, "bench_udp: cannot bind %s port %u: %s\n", so.bind.c_str(), so.port,
                     socks.error().message().c_str());
        return 1;
    }
    o.port = socks->front().local_addr()->port();
    o.workers = so.workers;
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

void add_client_options(CLI::App& app, ClientOptions& o) {
    app.add_option("-c,--clients", o.clients, "concurrent clients (one socket each)")
        ->check(CLI::Range(1u, 100'000u))
        ->capture_default_str();
    app.add_option("-n,--messages", o.messages, "messages per client")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
        ->capture_default_str();
    app.add_option("-s,--size", o.size, "message size in bytes")
        ->check(CLI::Range(udp::kHeaderSize, std::size_t{65507}))
        ->capture_default_str();
    app.add_option("-P,--pipeline", o.pipeline, "datagrams in flight per client")
        ->check(CLI::Range(1u, 4096u))
        ->capture_default_str();
    app.add_option("-d,--duration", o.duration,
                   "duration mode: send for this many seconds instead of -n messages")
        ->check(CLI::Range(0.0, 86400.0));
    app.add_option("--warmup", o.warmup, "duration mode: seconds of traffic before measuring")
        ->check(CLI::Range(0.0, 3600.0));
    app.add_option("--drain-timeout", o.drain,
                   "seconds to wait for the last echoes; later ones are lost")
        ->check(CLI::Range(0.001, 3600.0))
        ->capture_default_str();
    app.add_option("--stall-timeout", o.stall,
                   "seconds without an echo before a client stops waiting for its window "
                   "(late echoes still count)")
        ->check(CLI::Range(0.001, 3600.0))
        ->capture_default_str();
    app.add_option("--max-loss", o.max_loss, "exit with code 3 if the loss exceeds this percent")
        ->check(CLI::Range(0.0, 100.0));
    app.add_flag("--json", o.json, "print one JSON object instead of the text report");
    app.add_flag("!--no-gso", o.gso, "send every datagram as its own message (no UDP_SEGMENT)");
    app.add_flag("!--no-gro", o.gro, "receive every datagram on its own (no UDP_GRO)");
    tools::add_backend_flag(app, &o.backend);
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"UDP echo benchmark on galay-kernel (server and clients in one process, or "
                 "split with the `server` / `client` subcommands)"};
    app.set_help_flag("--help", "Print this help and exit"); // -h is the host
    ClientOptions both;
    ServerOptions both_server;
    both.port = 0; // one process: any free port
    app.add_option("-h,--host", both.host, "address the server binds and the clients target")
        ->capture_default_str();
    app.add_option("-p,--port", both.port, "UDP port (0: any free port)")->capture_default_str();
    app.add_option("-w,--workers", both_server.workers, "server worker coroutines (sockets)")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    add_client_options(app, both);

    ServerOptions so;
    CLI::App* server = app.add_subcommand("server", "run only the echo server");
    server->set_help_flag("--help", "Print this help and exit");
    server->add_option("-p,--port", so.port, "UDP port")->capture_default_str();
    server->add_option("-h,--host,--bind", so.bind, "address to bind")->capture_default_str();
    server->add_option("-w,--workers", so.workers, "worker coroutines (SO_REUSEPORT sockets)")
        ->check(CLI::Range(1u, 1024u))
        ->capture_default_str();
    server->add_option("--rcvbuf", so.rcvbuf, "SO_RCVBUF per socket, bytes (capped by rmem_max)")
        ->check(CLI::Range(0, 1 << 30))
        ->capture_default_str();
    server
        ->add_option("--buffer", so.buffer,
                     "largest datagram echoed whole, bytes (a longer one is echoed truncated, "
                     "reported, and fails the client's check)")
        ->check(CLI::Range(std::size_t{1}, std::size_t{65535}))
        ->capture_default_str();
    server->add_flag("!--no-gso", so.gso,
                     "echo every datagram as its own message (no UDP_SEGMENT)");
    server->add_flag("!--no-gro", so.gro, "receive every datagram on its own (no UDP_GRO)");
    tools::add_backend_flag(*server, &so.backend);

    ClientOptions co;
    unsigned co_workers = 0;
    CLI::App* client = app.add_subcommand("client", "run only the clients against a server");
    client->set_help_flag("--help", "Print this help and exit");
    client->add_option("-h,--host", co.host, "server host")->capture_default_str();
    client->add_option("-p,--port", co.port, "server port")->capture_default_str();
    client->add_option("-w,--workers", co_workers, "the server's worker count (for the report)");
    client->add_option("--server-pid", co.server_pid,
                       "report the server's CPU time per packet (reads /proc/PID/stat)");
    add_client_options(*client, co);
    app.require_subcommand(0, 1);
    CLI11_PARSE(app, argc, argv);

    std::signal(SIGPIPE, SIG_IGN);
    if (server->parsed()) return run_server(so);
    if (client->parsed()) {
        if (co_workers > 0) co.workers = co_workers;
        if (co.server_pid > 0 && !tools::process_cpu_seconds(co.server_pid)) {
            std::fprintf(stderr, "bench_udp: --server-pid %d: no such process\n", co.server_pid);
            return 2;
        }
        if (!tools::ensure_fd_limit(co.clients + 64ull, "bench_udp")) return 1;
        return run_split_client(co);
    }
    if (!tools::ensure_fd_limit(both.clients + both_server.workers + 64ull, "bench_udp")) return 1;
    both_server.backend = both.backend;
    both_server.gso = both.gso;
    both_server.buffer = std::max(both_server.buffer, both.size);
    both_server.gro = both.gro;
    return run_both(both, both_server);
}
