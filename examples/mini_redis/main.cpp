// mini_redis: a Redis-protocol key-value server on galay-kernel, written as the example to learn
// thread per core from (Tokio's mini-redis plays that part for Tokio).
//
//   mini_redis [--port P] [--workers N] [--backend io_uring|epoll|auto] [--max-connections N]
//   mini_redis --port 6380 --workers 2      then: redis-cli -p 6380 set k v
//
// What to read, in order: resp.hpp (the protocol), store.hpp (one shard's keys), keyspace.hpp
// (galay::Sharded: a shard per worker, and how a connection asks another worker), commands.hpp
// (the commands and what is atomic), routing.cpp (which shard runs them), connection.cpp
// (pipelining, bounded memory, galay::idle), server.cpp (serve() and the connection limit), this
// file (the runtime, signals, draining). README.md in this folder says what it leaves out.
//
// It listens on 127.0.0.1 (it has no authentication). Port 0 takes a free port; the
// "listening on" line gives the real one. SIGINT or SIGTERM: it stops accepting, lets each
// connection finish the requests it has received (a second at most), closes them, prints a
// summary on stderr and exits 0. Exit 1: the port cannot be used; 2: bad arguments.
#include "galay_cli_backend.hpp"
#include "mini_redis/server.hpp"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

using namespace std::chrono_literals;

namespace {

/// The options from the command line, or the exit code when there is nothing to run (--help:
/// 0; a bad flag: 2, said in one line on stderr).
std::optional<int> parse_options(int argc, char** argv, mini_redis::Options& o) {
    cli::App app{"A Redis-protocol key-value server on galay-kernel, one shard of the keys per "
                 "worker.",
                 "mini_redis"};
    app.add_option("--port", o.port, "TCP port on 127.0.0.1 (0: any free port)")
        ->check(galay::tools::whole(0, 65535))
        ->capture_default_str();
    app.add_option("--workers", o.workers, "worker threads, one shard of the keys each")
        ->check(galay::tools::whole(1, 256))
        ->capture_default_str();
    galay::tools::add_backend_flag(app, &o.backend);
    app.add_option("--max-connections", o.max_connections, "clients beyond this are refused")
        ->check(galay::tools::whole(1, 1000000))
        ->capture_default_str();
    return galay::tools::parse_command_line(app, argc, argv, "mini_redis");
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
    if (auto code = parse_options(argc, argv, options)) return *code;
    raise_fd_limit();
    std::signal(SIGPIPE, SIG_IGN);
    // Caught from here on: a SIGTERM right after "listening on" is a clean stop.
    auto stop = galay::signal({SIGINT, SIGTERM});
    try {
        galay::RuntimeOptions ro;
        ro.workers = options.workers;
        ro.scheduler.backend = options.backend;
        galay::Runtime rt(ro); // worker i owns shard i of the keys
        auto server = std::make_shared<mini_redis::Server>(rt, std::move(options));
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
        // Drain: no new connections; the ones waiting for a request close at once, the others
        // after the requests they have received; what is still open after a second is cut.
        const std::size_t cut =
            rt.block_on(listening->drain(std::chrono::steady_clock::now() + 1s));
        const mini_redis::Stats total = rt.block_on(mini_redis::totals(server->keyspace));
        rt.block_on(server->keyspace.stop()); // each shard ends its expiry, on its own worker
        rt.shutdown();
        std::fprintf(stderr,
                     "mini_redis: %s: %llu commands on %llu connections, %llu refused, %zu cut "
                     "by the drain\n",
                     !sig             ? "stopped"
                     : *sig == SIGINT ? "SIGINT"
                                      : "SIGTERM",
                     static_cast<unsigned long long>(total.commands),
                     static_cast<unsigned long long>(total.connections),
                     static_cast<unsigned long long>(total.rejected), cut);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mini_redis: %s\n", e.what());
        return 1;
    }
    return 0;
}
