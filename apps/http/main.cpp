// An HTTP/1.1 server on galay-kernel: GET / answers a fixed plain-text body, other paths are
// static files from --root (see http/server.hpp for what it does and does not do).
//
//   http_server [port] [--workers N] [--root DIR] [--backend io_uring|epoll|auto]
//               [--idle-timeout SECONDS] [--header-timeout SECONDS] [--no-register-files]
//               [--fair | --batching] [--tls-cert FILE --tls-key FILE]
//               [--file-send sendfile|copy] [--max-handshakes N]
//   http_server 8080 --root /var/www      then: curl -i http://127.0.0.1:8080/
//   http_server 8443 --tls-cert cert.pem --tls-key key.pem   then: curl https://localhost:8443/
//
// With --tls-cert and --tls-key it serves HTTPS (TLS 1.2/1.3, ALPN http/1.1) on every
// connection: the TLS handshake (bounded by --header-timeout), then the same requests; the plain
// path is untouched by it. At most --max-handshakes (1024) handshakes are in progress at once: a
// connection accepted beyond them is closed at once and counted in the exit summary.
//
// It runs on a galay::Runtime of N workers (--workers, default 1), each with its own SO_REUSEPORT
// listener on the port (galay::serve, sharded mode: the kernel spreads connections over them and
// a connection stays on the worker that accepted it, so a request crosses no thread). Every
// listener is bound before anything is served, so a busy port is one error. Port 0 takes a free
// port; the "listening on" line gives the real one. SIGINT/SIGTERM stop it: the listeners are
// closed, open connections cancelled, the workers joined, a summary printed on stderr, exit 0.
// Exit 1: the port, root, certificate or key cannot be used; 2: bad arguments.
//
// GET /metrics answers the Runtime's figures in the Prometheus text format (galay/metrics.hpp):
// per-worker tasks, loop turns, busy and parked time, operations and bytes by kind. GET /tasks
// answers a task dump (galay/task_dump.hpp: every task, what it waits on, its async backtrace),
// GET /tasks?format=json the same as JSON (what galay-top reads).
//
// Its schedulers take the ready connections in bounded batches (the default, --batching: ~20
// completions per pass through the kernel on io_uring, 64 ready fds per epoll_wait), each batch's
// handlers run while its connections' memory is still in cache. --fair sets
// SchedulerOptions::fair_completions instead: every ready completion in the same turn, which
// costs more CPU per request at 1,000 busy connections for no lower p99
// (docs/benchmarks/experiments.md).
#include "http/server.hpp"

#include "galay_cli_backend.hpp"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

void report_accept_error(const galay::SocketAddr& where, std::error_code e, std::uint64_t count) {
    const bool fds =
        e == std::errc::too_many_files_open || e == std::errc::too_many_files_open_in_system;
    const std::string times =
        count > 1 ? " (" + std::to_string(count) + " times since the last report)" : "";
    std::fprintf(stderr, "http_server: accept on %s: %s%s%s\n", where.to_string().c_str(),
                 e.message().c_str(), fds ? " (raise ulimit -n)" : "", times.c_str());
}

void raise_fd_limit() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)::setrlimit(RLIMIT_NOFILE, &rl);
    }
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    long port = 8080, workers = 1, idle_timeout = 0, header_timeout = 0;
    http::ServerConfig config;
    galay::Backend backend = galay::Backend::automatic;
    bool no_register_files = false, fair = false, batching = false;
    std::string tls_cert, tls_key, file_send;
    cli::App app{"An HTTP/1.1 server: GET / answers a fixed body, other paths are static files "
                 "from --root, GET /metrics the Runtime's figures.",
                 "http_server"};
    app.add_option("port", port, "TCP port (0: any free port)")
        ->check(tools::whole(0, 65535))
        ->capture_default_str();
    app.add_option("-w,--workers", workers, "worker threads")
        ->check(tools::whole(1, 256))
        ->capture_default_str();
    app.add_option("--root", config.root, "serve static files from DIR")->check(tools::non_empty());
    tools::add_backend_flag(app, &backend);
    app.add_option("--idle-timeout", idle_timeout, "seconds a kept-alive connection may idle")
        ->check(tools::whole(1, 86400));
    app.add_option("--header-timeout", header_timeout, "seconds to a complete request head")
        ->check(tools::whole(1, 86400));
    app.add_option("--file-send", file_send, "files over 16 KiB: sendfile (default) or copy")
        ->check(cli::IsMember({"sendfile", "copy"}));
    app.add_flag("--no-register-files", no_register_files,
                 "io_uring: keep fds out of the ring's file table");
    auto* fair_flag = app.add_flag("--fair", fair, "every ready completion each loop turn");
    app.add_flag("--batching", batching, "bounded batches of ready connections (the default)")
        ->excludes(fair_flag);
    auto* cert = app.add_option("--tls-cert", tls_cert, "HTTPS: PEM certificate chain")
                     ->check(tools::non_empty());
    auto* key =
        app.add_option("--tls-key", tls_key, "HTTPS: PEM private key")->check(tools::non_empty());
    cert->needs(key);
    key->needs(cert);
    app.add_option("--max-handshakes", config.max_handshakes,
                   "HTTPS: handshakes in progress at once (beyond: closed at once)")
        ->check(tools::whole(1, 1000000))
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "http_server")) return *code;
    if (idle_timeout != 0) config.keepalive_timeout = std::chrono::seconds(idle_timeout);
    if (header_timeout != 0) config.header_timeout = std::chrono::seconds(header_timeout);
    if (file_send == "copy") config.file_send = http::ServerConfig::FileSend::copy;
    if (file_send == "sendfile") config.file_send = http::ServerConfig::FileSend::sendfile;
    const bool register_files = !no_register_files;

    if (!tls_cert.empty()) {
        try {
            config.tls = galay::tls::Context::server(
                {.cert_file = tls_cert, .key_file = tls_key, .alpn = {"http/1.1"}});
        } catch (const galay::Error& e) {
            std::fprintf(stderr, "http_server: %s\n", e.what());
            return 1;
        }
    }

    auto server = http::Server::create(config);
    if (!server) {
        std::fprintf(stderr, "http_server: --root %s: %s\n", config.root.c_str(),
                     server.error().message().c_str());
        return 1;
    }
    raise_fd_limit();
    std::signal(SIGPIPE, SIG_IGN);
    // Caught from here on: a SIGTERM right after "listening on" is a clean stop, not a kill.
    auto stop_signal = galay::signal({SIGINT, SIGTERM});

    try {
        galay::RuntimeOptions ro;
        ro.workers = static_cast<unsigned>(workers);
        ro.scheduler.backend = backend;
        ro.scheduler.register_files = register_files;
        ro.scheduler.fair_completions = fair;
        galay::Runtime rt(ro);

        galay::ServeOptions so;
        so.mode = galay::ListenMode::sharded;
        so.listen.backlog = 4096;
        so.on_accept_error = report_accept_error;
        auto listening = galay::serve(
            rt, galay::SocketAddr::any_v4(static_cast<std::uint16_t>(port)),
            [s = *server](galay::TcpStream conn) { return s->serve_connection(std::move(conn)); },
            std::move(so));
        if (!listening) {
            std::fprintf(stderr, "http_server: cannot listen on 0.0.0.0:%ld: %s%s\n", port,
                         listening.error().message().c_str(),
                         listening.error() == std::errc::address_in_use
                             ? " (another process or socket holds the port)"
                             : "");
            return 1;
        }
        std::printf("listening on 0.0.0.0:%u (http_server%s, %s, %ld worker%s%s%s)\n",
                    listening->local_addr().port(), config.tls ? " https" : "", rt.backend_name(),
                    workers, workers == 1 ? "" : "s", config.root.empty() ? "" : ", root ",
                    config.root.c_str());
        std::fflush(stdout);

        const galay::Result<int> sig = rt.block_on(galay::as_task(std::move(stop_signal)));
        listening->stop(); // the listeners are closed: the port is free again
        rt.shutdown();     // open connections cancelled, workers joined

        const http::ServerStats st = (*server)->stats();
        std::fprintf(stderr,
                     "http_server: %s: %llu requests on %llu connections, %llu refused, %llu "
                     "timed out, %llu handshakes refused\n",
                     !sig             ? "stopped"
                     : *sig == SIGINT ? "SIGINT"
                                      : "SIGTERM",
                     static_cast<unsigned long long>(st.requests),
                     static_cast<unsigned long long>(st.connections),
                     static_cast<unsigned long long>(st.refused),
                     static_cast<unsigned long long>(st.timeouts),
                     static_cast<unsigned long long>(st.handshakes_refused));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "http_server: %s\n", e.what());
        return 1;
    }
    return 0;
}
