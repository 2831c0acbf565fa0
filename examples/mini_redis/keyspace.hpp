// mini_redis/keyspace.hpp: the keyspace split over the workers of a Runtime, one Store each.
//
// Thread per core: worker i owns shard i, and only worker i touches it. A key lives on the
// shard its hash picks, so every command on one key runs on one worker, in the order the
// commands reach it: no lock anywhere. A connection (on whatever worker accepted it) runs a
// command on its own shard directly; for a key of another shard it asks that shard's worker to
// run the command and waits for the answer (`on`), while its own worker serves other
// connections meanwhile.
//
// This class is the example's own cross-worker path, built on spawn_on: galay::Sharded<T> and
// Runtime::invoke_on are the library's form of the same thing and will replace it.
#pragma once

#include "mini_redis/store.hpp"

#include <galay/galay.hpp>

#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>
#include <vector>

namespace mini_redis {

class Keyspace {
public:
    /// `shards` stores, shard i for worker i of the runtime that serves them.
    explicit Keyspace(unsigned shards) {
        for (unsigned i = 0; i < shards; ++i)
            stores_.push_back(std::make_unique<Store>());
    }

    unsigned shards() const noexcept { return static_cast<unsigned>(stores_.size()); }
    /// The shard that owns `key`.
    unsigned shard_of(std::string_view key) const noexcept {
        return shards() == 1 ? 0
                             : static_cast<unsigned>(std::hash<std::string_view>{}(key) % shards());
    }
    /// The shard of the calling worker.
    static unsigned here() noexcept { return static_cast<unsigned>(galay::this_worker()); }
    /// The calling worker's store (from a task on a worker of the runtime).
    Store& local() noexcept { return *stores_[here()]; }

    /// Run `fn(store)` on shard `shard`'s worker and give back its result (or rethrow what it
    /// threw). `fn` must own everything it uses: if the caller is cancelled while waiting, `fn`
    /// still runs to its end on the other worker, after the caller's memory is gone.
    template <class F>
    galay::Task<std::invoke_result_t<F&, Store&>> on(unsigned shard, F fn) {
        co_return co_await galay::spawn_on(shard, call(std::move(fn), stores_[shard].get()));
    }

private:
    template <class F>
    static galay::Task<std::invoke_result_t<F&, Store&>> call(F fn, Store* store) {
        co_return fn(*store);
    }

    std::vector<std::unique_ptr<Store>> stores_;
};

} // namespace mini_redis
