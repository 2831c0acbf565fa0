// mini_redis/store.hpp: one shard of the keyspace: string keys and values, each with an optional
// deadline.
//
// A Store belongs to one worker and is only ever touched from it (thread per core: no lock, no
// atomic). Expiry is lazy and periodic, as in Redis: a key whose deadline has passed is deleted
// when it is next looked up, and expire_some() (called by each worker ten times a second)
// samples the keys that have a deadline and deletes the expired ones, so keys nobody reads again
// do not stay in memory.
#pragma once

#include "mini_redis/flat_map.hpp"

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace mini_redis {

/// Milliseconds on the steady clock (the scheduler's: a test may pause it): what deadlines are
/// measured in.
using Millis = std::int64_t;
Millis now_ms() noexcept;

class Store {
public:
    struct Entry {
        std::string value;
        Millis deadline = 0;    // 0: none
        std::uint32_t slot = 0; // its key's place in volatile_ (when it has a deadline)
    };

    /// The live entry for `key`, or null (a key past its deadline is deleted here). Valid until
    /// the next set() or erase().
    Entry* find(std::string_view key);
    /// Set `key` to `value` with no deadline (SET and MSET clear it); gives the entry.
    Entry& set(std::string_view key, std::string_view value);
    /// Delete `key`; false when it was not there (or had expired).
    bool erase(std::string_view key);
    /// Give `e`, the entry of `key`, the deadline `at` (0: none).
    void set_deadline(std::string_view key, Entry& e, Millis at);
    /// Keys, including any whose deadline has passed and that nobody has looked up yet (as
    /// Redis's DBSIZE counts them).
    std::size_t size() const noexcept { return map_.size(); }
    /// Keys that have a deadline.
    std::size_t with_deadline() const noexcept { return volatile_.size(); }
    /// Delete everything.
    void clear();

    /// Active expiry: sample up to `samples` keys that have a deadline and delete those past it,
    /// again while more than a quarter of a sample had expired (Redis's cycle, simplified), at
    /// most `rounds` times. Gives how many it deleted.
    std::size_t expire_some(Millis now, unsigned samples = 20, unsigned rounds = 16);

private:
    void forget_deadline(Entry& e);

    FlatMap<Entry> map_;
    // The keys that have a deadline, so that expire_some() can pick among them at random (each
    // entry knows its key's place here: Entry::slot).
    std::vector<std::string> volatile_;
    std::minstd_rand rng_{12345};
};

} // namespace mini_redis
