// mini_redis/flat_map.hpp: an open-addressing hash map from byte strings to `V`: one shard's keys.
//
// Why not std::unordered_map: there a lookup reads the bucket array, then a node, then the node's
// key (three cache misses once the keyspace is larger than the cache), and with the hash not kept
// in the nodes it hashes every key of the bucket's chain again to see where the chain ends. It
// took half of mini_redis's CPU at GET -P 16 (docs/benchmarks/kv.md). Here the slots are one
// array: a lookup hashes its key once and reads the slot it lands on and the next ones, up to an
// empty one (linear probing, at most 7/8 full). The full hash is kept in each slot, so a slot of
// another key is passed over without reading that key's bytes. An erase moves the slots after it
// back into the gap (no tombstones), so probe sequences stay short whatever the mix of writes.
//
// Slots move on an insert that grows the array and on an erase: a pointer from find() is valid
// until the next insert or erase.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mini_redis {

template <class V>
class FlatMap {
public:
    /// The value of `key`, or null.
    V* find(std::string_view key) noexcept {
        if (size_ == 0) return nullptr;
        const std::size_t i = index_of(key, hash_of(key));
        return i == kNone ? nullptr : &slots_[i].value;
    }
    /// The value of `key`, made (`V{}`) when it was not there; and whether it was made.
    std::pair<V*, bool> try_emplace(std::string_view key) {
        if ((size_ + 1) * 8 > slots_.size() * 7) grow();
        const std::uint64_t h = hash_of(key);
        std::size_t i = h & mask_;
        for (; slots_[i].hash != 0; i = (i + 1) & mask_)
            if (slots_[i].hash == h && slots_[i].key == key) return {&slots_[i].value, false};
        slots_[i].hash = h;
        slots_[i].key.assign(key);
        ++size_;
        return {&slots_[i].value, true};
    }
    /// Remove `key`; false when it was not there.
    bool erase(std::string_view key) noexcept {
        if (size_ == 0) return false;
        std::size_t hole = index_of(key, hash_of(key));
        if (hole == kNone) return false;
        // Each slot after the hole, up to an empty one, moves back into it when the hole lies on
        // that slot's probe path (between its home and where it is, going round the array).
        for (std::size_t j = (hole + 1) & mask_; slots_[j].hash != 0; j = (j + 1) & mask_) {
            const std::size_t home = slots_[j].hash & mask_;
            if (((j - home) & mask_) >= ((j - hole) & mask_)) {
                slots_[hole] = std::move(slots_[j]);
                hole = j;
            }
        }
        slots_[hole] = Slot{};
        --size_;
        return true;
    }
    std::size_t size() const noexcept { return size_; }
    /// Remove everything (and give the memory back).
    void clear() noexcept {
        std::vector<Slot>().swap(slots_);
        size_ = 0;
        mask_ = 0;
    }

private:
    struct Slot {
        std::uint64_t hash = 0; // 0: empty
        std::string key;
        V value{};
    };
    static constexpr std::size_t kNone = ~std::size_t{0};

    static std::uint64_t hash_of(std::string_view key) noexcept {
        const std::uint64_t h = std::hash<std::string_view>{}(key);
        return h != 0 ? h : 1;
    }
    std::size_t index_of(std::string_view key, std::uint64_t h) const noexcept {
        for (std::size_t i = h & mask_; slots_[i].hash != 0; i = (i + 1) & mask_)
            if (slots_[i].hash == h && slots_[i].key == key) return i;
        return kNone;
    }
    void grow() {
        std::vector<Slot> old(std::max<std::size_t>(16, slots_.size() * 2));
        old.swap(slots_);
        mask_ = slots_.size() - 1;
        for (Slot& s : old) {
            if (s.hash == 0) continue;
            std::size_t i = s.hash & mask_;
            while (slots_[i].hash != 0)
                i = (i + 1) & mask_;
            slots_[i] = std::move(s);
        }
    }

    std::vector<Slot> slots_; // a power of two of them (or none)
    std::size_t size_ = 0;
    std::size_t mask_ = 0;
};

} // namespace mini_redis
