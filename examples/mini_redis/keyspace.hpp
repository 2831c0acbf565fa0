// mini_redis/keyspace.hpp: the keyspace split over the workers: a galay::Sharded<Shard>.
//
// Thread per core: worker i owns shard i (its keys, its counters, its expiry task), and only
// worker i touches it: no lock, no atomic anywhere. A key lives on the shard its hash picks, so
// every command on one key runs on one worker, in the order the commands reach it. A connection
// (on whatever worker accepted it) runs a command on its own worker's shard directly; for a key of
// another shard it asks that shard's worker with `keyspace.invoke_on(i, fn)`: a message to worker
// i, which runs `fn(shard)` between its own tasks, and the answer back; the connection's worker
// serves its other connections meanwhile. What the whole server needs (DBSIZE, INFO) is a
// `map_reduce` over the shards.
#pragma once

#include "mini_redis/store.hpp"

#include <galay/galay.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>

namespace mini_redis {

/// One worker's counters: plain integers, written only by that worker and added up across the
/// shards by `totals()` when someone asks (INFO, the summary at exit).
struct Stats {
    std::uint64_t commands = 0, connections = 0, open = 0, rejected = 0;
    std::uint64_t parser_bytes = 0; ///< bytes the request parsers scanned
    /// The most bytes one connection held: replies not yet sent, requests not yet run.
    std::uint64_t max_output = 0, max_input = 0;
    std::size_t keys = 0, with_deadline = 0; ///< filled in by totals()

    Stats& operator+=(const Stats& o) noexcept;
};

/// Worker i's part of the server, made on worker i by galay::Sharded (which keeps it at one
/// address until stop(): the expiry task refers to it).
class Shard {
public:
    /// Starts this worker's periodic expiry (store.hpp).
    Shard();
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;
    /// Ends the expiry task: Sharded::stop() calls it on this worker before destroying the shard.
    galay::Task<void> stop();

    const unsigned index; ///< the worker it belongs to
    Store store;
    Stats stats;

private:
    galay::JoinHandle<void> expiry_;
};

using Keyspace = galay::Sharded<Shard>;

/// The shard that owns `key`, among `shards`.
inline unsigned shard_of(std::string_view key, unsigned shards) noexcept {
    return shards == 1 ? 0 : static_cast<unsigned>(std::hash<std::string_view>{}(key) % shards);
}

/// Every shard's counters and sizes added up (maxima for the max_ fields), all shards at once;
/// `flush` first deletes every key (FLUSHALL). Each shard is read atomically, the whole is not a
/// snapshot: a shard may be read before a write and another after it.
galay::Task<Stats> totals(Keyspace& keyspace, bool flush = false);

} // namespace mini_redis
