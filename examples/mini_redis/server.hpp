// mini_redis/server.hpp: what the whole server shares: its options, the keyspace, the counters.
#pragma once

#include "mini_redis/commands.hpp"
#include "mini_redis/keyspace.hpp"

#include <galay/galay.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mini_redis {

struct Options {
    std::uint16_t port = 6379;
    unsigned workers = 1;
    unsigned max_connections = 10000; ///< Redis's maxclients
    galay::Backend backend = galay::Backend::automatic;
    /// A connection's replies are sent once this many bytes are waiting, before its next
    /// request is read: what bounds the memory of a client that never reads its replies.
    std::size_t flush_at = 64 * 1024;
    std::vector<Command> extra_commands; ///< for tests: commands beside the builtin ones
};

/// Counters of one worker. Each is written by its worker only (a relaxed load and store, no
/// locked instruction) and read by INFO from any worker.
struct WorkerStats {
    std::atomic<std::uint64_t> commands{0};
    std::atomic<std::uint64_t> connections{0};
    std::atomic<std::uint64_t> rejected{0};
    std::atomic<std::uint64_t> parser_bytes{0}; ///< bytes the request parsers scanned
    /// The most bytes one connection held: replies not yet sent, requests not yet run.
    std::atomic<std::uint64_t> max_output{0}, max_input{0};

    static void add(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
        c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    static void peak(std::atomic<std::uint64_t>& c, std::uint64_t v) noexcept {
        if (v > c.load(std::memory_order_relaxed)) c.store(v, std::memory_order_relaxed);
    }
};

struct Server {
    explicit Server(Options o)
        : options(std::move(o))
        , keyspace(options.workers)
        , stats(options.workers)
        , started(std::chrono::steady_clock::now()) {}

    WorkerStats& local_stats() noexcept { return stats[Keyspace::here()]; }
    std::uint64_t total(std::atomic<std::uint64_t> WorkerStats::*counter) const noexcept;
    std::uint64_t largest(std::atomic<std::uint64_t> WorkerStats::*counter) const noexcept;

    Options options;
    Keyspace keyspace;
    std::vector<WorkerStats> stats;
    std::atomic<std::uint64_t> open{0}; ///< connections open now, on every worker
    std::atomic<bool> draining{false};  ///< SIGTERM: finish the requests read, then close
    std::chrono::steady_clock::time_point started;
};

/// Serve `server` on every worker of `rt` (which has options.workers workers), plus each
/// worker's periodic expiry. Errors: what binding the port gives.
galay::Result<galay::TcpServer> start(galay::Runtime& rt, std::shared_ptr<Server> server);

} // namespace mini_redis
