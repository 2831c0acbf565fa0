// mini_redis: a Redis-protocol key-value server on galay-kernel, written as the example to learn
// thread per core from (Tokio's mini-redis plays that part for Tokio).
//
//   mini_redis [--port P] [--workers N] [--backend io_uring|epoll|auto] [--max-connections N]
//   mini_redis --port 6380 --workers 2      then: redis-cli -p 6380 set k v
//
// What to read, in order: resp.hpp (the protocol), store.hpp (one shard of keys), keyspace.hpp
// (a shard per worker, and how a connection asks another worker), commands.hpp (the commands
// and what is atomic), routing.cpp (which shard runs them), connection.cpp (pipelining, bounded
// memory), this file (the runtime, signals, draining). README.md in this folder says what it leaves
// out.
//
// It listens on 127.0.0.1 (it has no authentication). Port 0 takes a free port; the
// "listening on" line gives the real one. SIGINT or SIGTERM: it stops accepting, lets each
// connection finish the requests it has received (a second at most), closes them, prints a
// summary on stderr and exits 0. Exit 1: the port cannot be used; 2: bad arguments.
#include "mini_redis/server.hpp"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

using namespace std::chrono_literals;

namespace {

constexpr const char* kUsage =
    "usage: mini_redis [--port P] [--workers N] [--backend io_uring|epoll|auto]\n"
    "                  [--max-connections N]\n"
    "  --port P             TCP port on 127.0.0.1 (default 6379; 0: any free port)\n"
    "  --workers N          worker threads, one shard of the keys each (default 1)\n"
    "  --backend B          io_uring, epoll or auto (default auto)\n"
    "  --max-connections N  clients beyond this are refused (default 10000)\n";

/// The options from the command line, or the exit code when there is nothing to run (--help:
/// 0; a bad flag: 2, said in one line on stderr).
int parse_options(int argc, char** argv, mini_redis::Options& o) {
    auto fail = [](const std::string& what) {
        std::fprintf(stderr, "mini_redis: error: %s (see --help)\n", what.c_str());
        return 2;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "-h" || flag == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (flag != "--port" && flag != "--workers" && flag != "--backend" &&
            flag != "--max-connections")
            return fail(std::string(flag) + ": unknown option");
        if (i + 1 >= argc) return fail(std::string(flag) + ": needs a value");
        const char* value = argv[++i];
        if (flag == "--backend") {
            auto b = galay::parse_backend(value);
            if (!b)
                return fail("--backend: io_uring, epoll or auto, not '" + std::string(value) + "'");
            o.backend = *b;
            continue;
        }
        const long lo = flag == "--port" ? 0 : 1;
        const long hi = flag == "--port" ? 65535 : flag == "--workers" ? 256 : 1000000;
        char* end = nullptr;
        errno = 0;
        const long n = std::strtol(value, &end, 10);
        if (errno != 0 || end == value || *end != '\0' || n < lo || n > hi)
            return fail(std::string(flag) + ": a number from " + std::to_string(lo) + " to " +
                        std::to_string(hi) + ", not '" + value + "'");
        if (flag == "--port")
            o.port = static_cast<std::uint16_t>(n);
        else if (flag == "--workers")
            o.workers = static_cast<unsigned>(n);
        else
            o.max_connections = static_cast<unsigned>(n);
    }
    return -1;
}

/// As many descriptors as the hard limit allows: each client is one.
void raise_fd_limit() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)::setrlimit(RLIMIT_NOFILE, &rl);
    }
}

} // namespace

int main(int argc, char** argv) {
    mini_redis::Options options;
    if (const int code = parse_options(argc, argv, options); code >= 0) return code;
    raise_fd_limit();
    std::signal(SIGPIPE, SIG_IGN);
    // Caught from here on: a SIGTERM right after "listening on" is a clean stop.
    auto stop = galay::signal({SIGINT, SIGTERM});
    try {
        galay::RuntimeOptions ro;
        ro.workers = options.workers;
        ro.scheduler.backend = options.backend;
        galay::Runtime rt(ro); // worker i owns shard i of the keys
        auto server = std::make_shared<mini_redis::Server>(std::move(options));
        auto listening = mini_redis::start(rt, server);
        if (!listening) {
            std::fprintf(stderr, "mini_redis: cannot listen on 127.0.0.1:%u: %s\n",
                         server->options.port, listening.error().message().c_str());
            return 1;
        }
        std::printf("mini_redis: listening on 127.0.0.1:%u (%u worker%s, %s)\n",
                    server->options.port, rt.size(), rt.size() == 1 ? "" : "s", rt.backend_name());
        std::fflush(stdout);

        const galay::Result<int> sig = rt.block_on(galay::as_task(std::move(stop)));
        // Drain: no new connections; each open one finishes the requests it has received and
        // closes at its next request boundary; what is still open after a second is cut.
        server->draining = true;
        const std::size_t cut =
            rt.block_on(listening->drain(std::chrono::steady_clock::now() + 1s));
        rt.shutdown();
        std::fprintf(
            stderr,
            "mini_redis: %s: %llu commands on %llu connections, %llu refused, %zu cut "
            "by the drain\n",
            !sig             ? "stopped"
            : *sig == SIGINT ? "SIGINT"
                             : "SIGTERM",
            static_cast<unsigned long long>(server->total(&mini_redis::WorkerStats::commands)),
            static_cast<unsigned long long>(server->total(&mini_redis::WorkerStats::connections)),
            static_cast<unsigned long long>(server->total(&mini_redis::WorkerStats::rejected)),
            cut);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mini_redis: %s\n", e.what());
        return 1;
    }
    return 0;
}
