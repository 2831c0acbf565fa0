// mini_redis/commands.hpp: the commands, and where each one runs.
//
// A command on one key runs on the key's shard. A command on several keys (DEL, EXISTS, MGET,
// MSET) is split: each shard runs the part for its keys, and the connection puts the answers
// together in the order of the keys. Each part is atomic on its shard; the whole is not when
// the keys are on different shards (another client can see an MSET half done, or an MGET can
// read one shard before and another after a write). DBSIZE and FLUSHALL visit every shard at
// once, with the same caveat. With one worker (one shard) every command is atomic, as in Redis.
#pragma once

#include "mini_redis/keyspace.hpp"
#include "mini_redis/resp.hpp"

#include <galay/galay.hpp>

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace mini_redis {

using Args = std::span<const std::string_view>;
struct Server;

/// Where a command runs.
enum class Route : std::uint8_t {
    here,  ///< on the connection's worker, touching no key (PING, ECHO, CONFIG, ...)
    key,   ///< on the shard of its first argument (GET, SET, INCR, EXPIRE, ...)
    keys,  ///< every argument a key: one part per shard (DEL, EXISTS, MGET)
    pairs, ///< key value pairs: one part per shard (MSET)
    all,   ///< every shard in turn (DBSIZE, FLUSHALL, INFO)
};

struct Command {
    std::string_view name; ///< lower case
    int arity;             ///< Redis's convention: n exactly, -n at least n (the name counts)
    Route route;
    /// Route::key: runs on the key's shard, writes its reply.
    void (*on_key)(Store&, Args, Replies&) = nullptr;
    /// Route::here: runs on the connection's worker.
    void (*here)(Server&, Args, Replies&) = nullptr;
};

/// The table: every command mini_redis knows, then the server's extra ones.
std::span<const Command> builtin_commands() noexcept;
/// `name` (any case) among the builtins and `extra`, or null.
const Command* find_command(std::string_view name, std::span<const Command> extra) noexcept;

/// Run the command in `args` when everything it touches is on this worker, writing its reply:
/// true. False when it needs another shard: co_await run_anywhere() instead. `here`: the shard of
/// the calling worker.
bool run_here(Server& server, Shard& here, const Command* cmd, Args args, Replies& out);
/// Run the command in `args`, asking other shards for their part.
galay::Task<void> run_anywhere(Server& server, Shard& here, const Command* cmd, Args args,
                               Replies& out);
/// The reply to a request naming no command we know, or with the wrong number of arguments;
/// null when `cmd` can run with `args`.
bool reject(const Command* cmd, Args args, Replies& out);

} // namespace mini_redis
