// bench_server [port]: a TCP echo server on galay's Runtime, for bench_client and the harnesses.
//   bench_server 8080 --backend io_uring --threads 2 --listen dispatch
//   bench_server --unix /tmp/echo.sock      the same echo over a Unix stream socket (one worker)
//
// --threads N runs N workers (one thread and one io_uring/epoll scheduler each). --listen picks
// how connections reach them: `sharded` (a SO_REUSEPORT listener per worker, the kernel hashes
// each connection to one) or `dispatch` (one acceptor hands each connection to the worker with
// the fewest open ones). A port held by anything else (another bench_server, any process) is an
// error, never shared. Port 0 takes a free port; the "listening on" line gives the real one.
//
// SIGINT or SIGTERM stop it: the listeners are closed, the connections cancelled, the workers
// joined, and per-worker figures printed (connections that carried data, echoes, bytes; --json:
// one object, with `accepted` counting every connection, probes included). Exit
// status: 0 after a signal, 1 when it cannot listen or start, 2 on bad flags.
//
// --metrics PORT serves GET /metrics (the Prometheus text of galay/metrics.hpp) and GET /tasks
// (a task dump, galay/task_dump.hpp; ?format=json for galay-top) on the bind address;
// --empty-hooks installs task hooks that do nothing and --stall-ms MS the stall detector, to
// measure what they cost (bench/studies/echo.py --observe). --idle-spin US sets
// SchedulerOptions::idle_spin (each worker polls up to US microseconds before it sleeps).
#include "common/tool_support.hpp"

#include <galay/galay.hpp>
#include <nlohmann/json.hpp>
#include <pthread.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace galay;

/// Per worker, written only by that worker (read after the workers are joined).
struct alignas(64) WorkerStats {
    std::uint64_t connections = 0; // that echoed something (a readiness probe does not count)
    std::uint64_t echoes = 0;      // receives echoed back
    std::uint64_t bytes = 0;
};
std::vector<WorkerStats> g_stats;

WorkerStats& my_stats() {
    return g_stats[static_cast<std::size_t>(this_worker())];
}

/// Echo through a per-connection buffer (`--recv copy`, TCP or `--unix PATH`). Accepted TCP streams
/// have TCP_NODELAY already (galay's default).
template <class Stream>
Task<void> echo_copy(Stream conn, std::size_t buffer_size) {
    WorkerStats& st = my_stats();
    bool first = true;
    std::vector<char> buf(buffer_size);
    for (;;) {
        auto n = co_await conn.recv(buf);
        if (!n || *n == 0) co_return;
        auto sent = co_await conn.send_all(std::span(buf.data(), *n));
        if (!sent) co_return;
        ++st.echoes;
        if (std::exchange(first, false)) ++st.connections;
        st.bytes += *n;
    }
}

/// Echo through buffers lent by the scheduler (`--recv pooled`, the default, TCP or Unix): on
/// io_uring one multishot recv per connection over a provided-buffer ring; idle connections hold no
/// buffer.
template <class Stream>
Task<void> echo_pooled(Stream conn) {
    WorkerStats& st = my_stats();
    bool first = true;
    for (;;) {
        auto b = co_await conn.recv_pooled();
        if (!b || b->empty()) co_return;
        auto sent = co_await conn.send_all(b->bytes());
        if (!sent) co_return;
        ++st.echoes;
        if (std::exchange(first, false)) ++st.connections;
        st.bytes += b->size();
    }
}

Task<void> accept_unix(UnixListener& listener, bool pooled, std::size_t buffer_size) {
    for (;;) {
        auto c = co_await listener.accept();
        if (!c) {
            if (c.error() == std::errc::operation_canceled) co_return;
            std::fprintf(stderr, "bench_server: accept on the Unix socket: %s\n",
                         c.error().message().c_str());
            continue;
        }
        if (pooled)
            spawn(echo_pooled(std::move(*c)));
        else
            spawn(echo_copy(std::move(*c), buffer_size));
    }
}

void report_accept_error(const SocketAddr& where, std::error_code e, std::uint64_t count) {
    const bool fds =
        e == std::errc::too_many_files_open || e == std::errc::too_many_files_open_in_system;
    std::string times =
        count > 1 ? " (" + std::to_string(count) + " times since the last report)" : "";
    std::fprintf(stderr, "bench_server: accept on %s: %s%s%s\n", where.to_string().c_str(),
                 e.message().c_str(), fds ? " (raise ulimit -n)" : "", times.c_str());
}

const char* signal_name(int s) {
    return s == SIGINT ? "SIGINT" : s == SIGTERM ? "SIGTERM" : "a signal";
}

/// The command line.
struct Args {
    std::uint16_t port = 8080;
    unsigned threads = 1;
    std::size_t buffer_size = 64 * 1024;
    std::string bind_ip = "0.0.0.0";
    std::string listen_mode = "sharded";
    std::string recv_mode = "pooled";
    std::string unix_path; // --unix: echo over a Unix stream socket instead
    bool no_register_files = false, pin = false, json = false, empty_hooks = false;
    int metrics_port = -1; // -1: no metrics endpoint
    unsigned stall_ms = 0; // 0: no stall detector
    unsigned spin_us = 0;  // SchedulerOptions::idle_spin
    Backend backend = Backend::automatic;
};

void add_options(cli::App& app, Args& a) {
    app.add_option("port", a.port, "TCP port to listen on (0: any free port)")
        ->capture_default_str();
    app.add_option("-t,--threads", a.threads, "worker threads (one scheduler each)")
        ->check(cli::Range(1u, 256u))
        ->capture_default_str();
    app.add_option("--listen", a.listen_mode,
                   "sharded: a SO_REUSEPORT listener per worker (the kernel picks); dispatch: one "
                   "acceptor hands each connection to the least-loaded worker")
        ->check(cli::IsMember({"sharded", "dispatch"}))
        ->capture_default_str();
    app.add_option("--bind", a.bind_ip, "address to bind")->capture_default_str();
    app.add_option("--recv", a.recv_mode,
                   "pooled: buffers lent by the scheduler (io_uring: multishot recv + buffer "
                   "ring); copy: one buffer per connection")
        ->check(cli::IsMember({"pooled", "copy"}))
        ->capture_default_str();
    app.add_option("--buffer", a.buffer_size, "receive buffer per connection with --recv copy")
        ->check(cli::Range(std::size_t{1}, std::size_t{1} << 24))
        ->capture_default_str();
    app.add_flag("--no-register-files", a.no_register_files,
                 "io_uring: keep connections out of the ring's registered-file table (to measure "
                 "what it buys)");
    app.add_option("--unix", a.unix_path,
                   "echo over a Unix stream socket at PATH (\"@name\": abstract) instead of TCP")
        ->check(tools::non_empty());
    app.add_flag("--pin", a.pin, "pin worker i to the i-th CPU this process may use");
    app.add_flag("--json", a.json, "at exit, print the per-worker figures as one JSON object");
    app.add_option("--metrics", a.metrics_port,
                   "serve GET /metrics and GET /tasks on this port (0: any free port)")
        ->check(tools::whole(0, 65535));
    app.add_flag("--empty-hooks", a.empty_hooks,
                 "install task hooks that do nothing (what hooks cost)");
    app.add_option("--stall-ms", a.stall_ms,
                   "report loop turns and task resumes longer than this (0: off)")
        ->check(cli::Range(0u, 60'000u))
        ->capture_default_str();
    tools::add_idle_spin_flag(app, &a.spin_us, "every worker");
    tools::add_backend_flag(app, &a.backend);
}

/// This thread only waits: it leaves the stop signals to the other threads (galay::signal's
/// dispatcher among them). Under ThreadSanitizer a SIGTERM landing here just after start was
/// sometimes never handled (src/runtime/thread_signals.hpp); this program raises nothing and
/// starts no process, so the mask changes nothing else.
void leave_stop_signals_to_other_threads() {
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &stops, nullptr);
}

/// The figures of a stopped server, as JSON (--json prints it as is; the text report reads it).
nlohmann::json summary_of(const Args& a, const TcpServer& server, const Runtime& rt,
                          const Result<int>& sig) {
    nlohmann::json out;
    out["port"] = server.local_addr().port();
    out["backend"] = rt.backend_name();
    out["threads"] = a.threads;
    out["listen"] = a.listen_mode;
    out["signal"] = sig ? signal_name(*sig) : "?";
    for (unsigned w = 0; w < a.threads; ++w) {
        const WorkerStats& s = g_stats[w];
        out["workers"].push_back({{"accepted", server.accepted(w)},
                                  {"connections", s.connections},
                                  {"echoes", s.echoes},
                                  {"bytes", s.bytes}});
    }
    return out;
}

void print_summary_text(const Args& a, const nlohmann::json& out) {
    std::uint64_t conns = 0, echoes = 0;
    for (unsigned w = 0; w < a.threads; ++w) {
        conns += g_stats[w].connections;
        echoes += g_stats[w].echoes;
    }
    std::printf("stopped by %s: %s connections, %s echoes\n",
                out["signal"].get<std::string>().c_str(), tools::with_commas(conns).c_str(),
                tools::with_commas(echoes).c_str());
    for (unsigned w = 0; w < a.threads; ++w)
        std::printf("  worker %u: %s connections, %s echoes, %s bytes\n", w,
                    tools::with_commas(g_stats[w].connections).c_str(),
                    tools::with_commas(g_stats[w].echoes).c_str(),
                    tools::with_commas(g_stats[w].bytes).c_str());
}

/// Serve on `addr` until `stop` fires, then print the figures. Throws what the Runtime throws.
int serve_until_stopped(const Args& a, const SocketAddr& addr, detail::SignalAwaiter stop) {
    RuntimeOptions ro;
    ro.workers = a.threads;
    ro.pin_workers = a.pin;
    ro.scheduler.backend = a.backend;
    ro.scheduler.register_files = !a.no_register_files;
    static const metrics::TaskHooks empty_hooks{
        .context = nullptr,
        .on_spawn = [](void*, const metrics::TaskEvent&) {},
        .on_first_resume = [](void*, const metrics::TaskEvent&) {},
        .on_suspend = [](void*, const metrics::TaskEvent&) {},
        .on_resume = [](void*, const metrics::TaskEvent&) {},
        .on_exit = [](void*, const metrics::TaskEvent&) {},
    };
    if (a.empty_hooks) ro.scheduler.hooks = &empty_hooks;
    ro.scheduler.stall_threshold = std::chrono::milliseconds(a.stall_ms);
    ro.scheduler.idle_spin = std::chrono::microseconds(a.spin_us);
    Runtime rt(ro);

    std::function<Task<void>(TcpStream)> handler;
    if (a.recv_mode == "pooled")
        handler = echo_pooled<TcpStream>;
    else
        handler = [size = a.buffer_size](TcpStream c) { return echo_copy(std::move(c), size); };
    ServeOptions so;
    so.mode = a.listen_mode == "dispatch" ? ListenMode::dispatch : ListenMode::sharded;
    so.listen.backlog = 4096;
    so.on_accept_error = report_accept_error;
    auto server = serve(rt, addr, std::move(handler), std::move(so));
    if (!server) {
        std::fprintf(stderr, "bench_server: cannot listen on %s: %s%s\n", addr.to_string().c_str(),
                     server.error().message().c_str(),
                     server.error() == std::errc::address_in_use
                         ? " (another process or socket holds the port)"
                         : "");
        return 1;
    }
    std::optional<TcpServer> metrics_server;
    if (a.metrics_port >= 0) {
        const SocketAddr maddr =
            *SocketAddr::from_ip(a.bind_ip, static_cast<std::uint16_t>(a.metrics_port));
        // One answer per connection, the whole request head within 10 s (ScrapeOptions).
        auto m = serve(rt, maddr,
                       [&rt](TcpStream c) { return metrics::serve_scrape(std::move(c), rt); });
        if (!m) {
            std::fprintf(stderr, "bench_server: cannot serve metrics on %s: %s\n",
                         maddr.to_string().c_str(), m.error().message().c_str());
            return 1;
        }
        metrics_server.emplace(std::move(*m));
    }
    std::printf("listening on %s (bench_server, %s, %u thread%s, %s)\n",
                server->local_addr().to_string().c_str(), rt.backend_name(), a.threads,
                a.threads == 1 ? "" : "s", a.listen_mode.c_str());
    if (metrics_server)
        std::printf("metrics on http://%s/metrics\n",
                    metrics_server->local_addr().to_string().c_str());
    std::fflush(stdout);

    auto sig = rt.block_on(as_task(std::move(stop)));
    server->stop(); // the listeners are closed: the port is free again
    if (metrics_server) metrics_server->stop();
    rt.shutdown(); // connections cancelled, workers joined

    const nlohmann::json out = summary_of(a, *server, rt, sig);
    if (a.json)
        std::printf("%s\n", out.dump().c_str());
    else
        print_summary_text(a, out);
    std::fflush(stdout);
    return 0;
}

/// `--unix PATH`: one worker accepting on a Unix listener until `stop` fires.
int serve_unix_until_stopped(const Args& a, detail::SignalAwaiter stop) {
    auto addr = UnixAddr::parse(a.unix_path);
    if (!addr) {
        std::fprintf(stderr, "bench_server: --unix %s: %s\n", a.unix_path.c_str(),
                     addr.error().message().c_str());
        return 2;
    }
    auto listener = UnixListener::bind(*addr);
    if (!listener) {
        std::fprintf(stderr, "bench_server: cannot listen on %s: %s\n", a.unix_path.c_str(),
                     listener.error().message().c_str());
        return 1;
    }
    RuntimeOptions ro;
    ro.workers = 1;
    ro.pin_workers = a.pin;
    ro.scheduler.backend = a.backend;
    ro.scheduler.register_files = !a.no_register_files;
    ro.scheduler.idle_spin = std::chrono::microseconds(a.spin_us);
    Runtime rt(ro);
    auto acceptor = rt.spawn(accept_unix(*listener, a.recv_mode == "pooled", a.buffer_size));
    std::printf("listening on %s (bench_server, %s, unix)\n", a.unix_path.c_str(),
                rt.backend_name());
    std::fflush(stdout);
    auto sig = rt.block_on(as_task(std::move(stop)));
    acceptor.abort();
    rt.shutdown();
    nlohmann::json out;
    out["unix"] = a.unix_path;
    out["backend"] = rt.backend_name();
    out["threads"] = 1;
    out["signal"] = sig ? signal_name(*sig) : "?";
    out["workers"].push_back({{"connections", g_stats[0].connections},
                              {"echoes", g_stats[0].echoes},
                              {"bytes", g_stats[0].bytes}});
    if (a.json)
        std::printf("%s\n", out.dump().c_str());
    else
        std::printf("stopped by %s: %s connections, %s echoes\n",
                    out["signal"].get<std::string>().c_str(),
                    tools::with_commas(g_stats[0].connections).c_str(),
                    tools::with_commas(g_stats[0].echoes).c_str());
    std::fflush(stdout);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    cli::App app{"TCP echo server on galay-kernel's Runtime"};
    Args a;
    add_options(app, a);
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "bench_server")) return *code;

    auto addr = SocketAddr::from_ip(a.bind_ip, a.port);
    if (!addr) {
        std::fprintf(stderr, "bench_server: --bind %s is not a numeric IP address\n",
                     a.bind_ip.c_str());
        return 2;
    }
    tools::raise_fd_limit_to_max();
    std::signal(SIGPIPE, SIG_IGN);
    // Caught from here on: a SIGTERM right after "listening on" is a clean stop, not a kill.
    auto stop_signal = galay::signal({SIGINT, SIGTERM});
    leave_stop_signals_to_other_threads();
    g_stats.resize(a.threads);
    if (!a.unix_path.empty()) {
        g_stats.resize(1);
        try {
            return serve_unix_until_stopped(a, std::move(stop_signal));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_server: %s\n", e.what());
            return 1;
        }
    }
    try {
        return serve_until_stopped(a, *addr, std::move(stop_signal));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_server: %s\n", e.what());
        return 1;
    }
}
