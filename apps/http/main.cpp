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
// per-worker tasks, loop turns, busy and parked time, operations and bytes by kind.
//
// Its schedulers take the ready connections in bounded batches (the default, --batching: ~20
// completions per pass through the kernel on io_uring, 64 ready fds per epoll_wait), each batch's
// handlers run while its connections' memory is still in cache. --fair sets
// SchedulerOptions::fair_completions instead: every ready completion in the same turn, which
// costs more CPU per request at 1,000 busy connections for no lower p99
// (docs/benchmarks/experiments.md).
#include "http/server.hpp"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

constexpr const char* kUsage =
    "usage: http_server [port] [--workers N] [--root DIR] [--backend io_uring|epoll|auto]\n"
    "                   [--idle-timeout SECONDS] [--header-timeout SECONDS]\n"
    "                   [--file-send sendfile|copy]  (files over 16 KiB; sendfile)\n"
    "                   [--no-register-files]  (io_uring: keep fds out of the ring's file table)\n"
    "                   [--fair]  (every ready completion each loop turn: fair_completions)\n"
    "                   [--batching]  (the default: bounded batches of ready connections)\n"
    "                   [--tls-cert FILE --tls-key FILE]  (HTTPS; PEM certificate chain and key)\n"
    "                   [--max-handshakes N]  (HTTPS: handshakes in progress at once; 1024)\n";

[[noreturn]] void usage_error(const std::string& what) {
    std::fprintf(stderr, "http_server: %s\n%s", what.c_str(), kUsage);
    std::exit(2);
}

long parse_number(std::string_view flag, const char* text, long lo, long hi) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        usage_error(std::string(flag) + ": expected a number from " + std::to_string(lo) + " to " +
                    std::to_string(hi) + ", got '" + text + "'");
    return v;
}

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
    long port = 8080, workers = 1;
    http::ServerConfig config;
    galay::Backend backend = galay::Backend::automatic;
    bool have_port = false, register_files = true, fair = false;
    std::string tls_cert, tls_key;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) usage_error(std::string(arg) + " needs a value");
            return argv[++i];
        };
        if (arg == "-h" || arg == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (arg == "--workers" || arg == "-w") {
            workers = parse_number(arg, value(), 1, 256);
        } else if (arg == "--root") {
            config.root = value();
        } else if (arg == "--backend") {
            const char* b = value();
            auto parsed = galay::parse_backend(b);
            if (!parsed) usage_error(std::string("--backend: unknown backend '") + b + "'");
            backend = *parsed;
        } else if (arg == "--idle-timeout") {
            config.keepalive_timeout = std::chrono::seconds(parse_number(arg, value(), 1, 86400));
        } else if (arg == "--header-timeout") {
            config.header_timeout = std::chrono::seconds(parse_number(arg, value(), 1, 86400));
        } else if (arg == "--file-send") {
            const std::string_view how = value();
            if (how == "sendfile")
                config.file_send = http::ServerConfig::FileSend::sendfile;
            else if (how == "copy")
                config.file_send = http::ServerConfig::FileSend::copy;
            else
                usage_error("--file-send: sendfile or copy, not '" + std::string(how) + "'");
        } else if (arg == "--no-register-files") {
            register_files = false;
        } else if (arg == "--fair") {
            fair = true;
        } else if (arg == "--batching") {
            fair = false;
        } else if (arg == "--tls-cert") {
            tls_cert = value();
        } else if (arg == "--tls-key") {
            tls_key = value();
        } else if (arg == "--max-handshakes") {
            config.max_handshakes =
                static_cast<std::size_t>(parse_number(arg, value(), 1, 1000000));
        } else if (!arg.empty() && arg[0] != '-' && !have_port) {
            port = parse_number("port", argv[i], 0, 65535);
            have_port = true;
        } else {
            usage_error("unexpected argument '" + std::string(arg) + "'");
        }
    }

    if (tls_cert.empty() != tls_key.empty()) usage_error("--tls-cert and --tls-key go together");
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
