// mini_redis/server.hpp: what the whole server shares: its options and the keyspace.
#pragma once

#include "mini_redis/commands.hpp"
#include "mini_redis/keyspace.hpp"

#include <galay/galay.hpp>

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

struct Server {
    /// Makes a shard on each worker of `rt` (which has `o.workers` workers): from a thread that
    /// is not one of them.
    Server(galay::Runtime& rt, Options o)
        : options(std::move(o))
        , keyspace(rt)
        , started(std::chrono::steady_clock::now()) {}

    Options options;
    Keyspace keyspace;
    std::chrono::steady_clock::time_point started;
};

/// Serve `server` on every worker of `rt`: a listener per worker, at most
/// `options.max_connections` clients (beyond: Redis's error, then closed). Stop it with the
/// TcpServer's drain(): connections waiting for their next request close at once, the others
/// after the requests they have received. Errors: what binding the port gives.
galay::Result<galay::TcpServer> start(galay::Runtime& rt, std::shared_ptr<Server> server);

} // namespace mini_redis
