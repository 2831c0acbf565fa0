// An HTTP/1.1 server on galay-kernel: GET / answers a fixed plain-text body, other paths are
// static files from --root (see http/server.hpp for what it does and does not do).
//
//   http_server [port] [--workers N] [--root DIR] [--backend io_uring|epoll|auto]
//               [--idle-timeout SECONDS] [--header-timeout SECONDS]
//   http_server 8080 --root /var/www      then: curl -i http://127.0.0.1:8080/
//
// With --workers N, N threads each run a Scheduler with its own SO_REUSEPORT listener on the port
// (the kernel spreads connections over them). It prints one line when it listens, and a summary
// on SIGINT/SIGTERM, then exits 0. Exit 1: the port or root cannot be used; 2: bad arguments.
#include "http/server.hpp"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr const char* kUsage =
    "usage: http_server [port] [--workers N] [--root DIR] [--backend io_uring|epoll|auto]\n"
    "                   [--idle-timeout SECONDS] [--header-timeout SECONDS]\n";

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
    bool have_port = false;
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
        } else if (!arg.empty() && arg[0] != '-' && !have_port) {
            port = parse_number("port", argv[i], 0, 65535);
            have_port = true;
        } else {
            usage_error("unexpected argument '" + std::string(arg) + "'");
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
    // SIGINT/SIGTERM are taken by the main thread with sigwait; the workers never see them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    // Bind every listener before any worker starts, so a busy port is one clear error. With port
    // 0 the first listener picks the port and the others join it.
    auto addr = galay::SocketAddr::any_v4(static_cast<std::uint16_t>(port));
    std::vector<galay::TcpListener> listeners;
    for (long i = 0; i < workers; ++i) {
        if (i == 1) addr = galay::SocketAddr::any_v4(listeners[0].local_addr()->port());
        auto l = galay::TcpListener::bind(addr, {.backlog = 4096, .reuse_port = workers > 1});
        if (!l) {
            std::fprintf(stderr, "http_server: cannot listen on %s: %s\n", addr.to_string().c_str(),
                         l.error().message().c_str());
            return 1;
        }
        listeners.push_back(std::move(*l));
    }
    const std::uint16_t bound = listeners[0].local_addr()->port();

    std::vector<std::thread> threads;
    for (long i = 0; i < workers; ++i) {
        threads.emplace_back([&, i] {
            try {
                galay::Scheduler sched({.backend = backend});
                if (i == 0) {
                    std::printf("listening on 0.0.0.0:%u (http_server, %s, %ld worker%s%s%s)\n",
                                bound, sched.backend_name(), workers, workers == 1 ? "" : "s",
                                config.root.empty() ? "" : ", root ", config.root.c_str());
                    std::fflush(stdout);
                }
                sched.block_on((*server)->accept_loop(listeners[static_cast<std::size_t>(i)]));
            } catch (const std::exception& e) {
                std::fprintf(stderr, "http_server: %s\n", e.what());
                std::_Exit(1);
            }
        });
    }
    int sig = 0;
    sigwait(&stop_signals, &sig);
    const http::ServerStats st = (*server)->stats();
    std::fprintf(stderr,
                 "http_server: %s: %llu requests on %llu connections, %llu refused, %llu timed "
                 "out\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM",
                 static_cast<unsigned long long>(st.requests),
                 static_cast<unsigned long long>(st.connections),
                 static_cast<unsigned long long>(st.refused),
                 static_cast<unsigned long long>(st.timeouts));
    std::fflush(nullptr);
    std::_Exit(0); // the workers block in their event loops; nothing of theirs needs saving
}
