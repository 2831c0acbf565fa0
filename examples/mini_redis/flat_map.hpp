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
// A key of up to 24 bytes is kept in its slot (redis-benchmark's are 16), and a slot starts a cache
// line: a lookup that finds its key at home reads one line of memory, the key's bytes and the
// value's included (a std::string key of more than 15 bytes would be a second miss).
//
// Slots move on an insert that grows the array and on an erase: a pointer from find() is valid
// until the next insert or erase.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mini_redis {

/// A key's bytes: in the object itself up to 24 of them, else in a block of their own.
class Key {
public:
    Key() noexcept { inline_[0] = 0; }
    Key(Key&& o) noexcept
        : size_(std::exchange(o.size_, 0)) {
        std::memcpy(inline_, o.inline_, sizeof inline_); // the bytes, or the block's pointer
    }
    Key& operator=(Key&& o) noexcept {
        if (this != &o) {
            release();
            size_ = std::exchange(o.size_, 0);
            std::memcpy(inline_, o.inline_, sizeof inline_);
        }
        return *this;
    }
    ~Key() { release(); }

    void assign(std::string_view s) {
        release();
        if (s.size() > sizeof inline_) {
            char* p = new char[s.size()];
            std::memcpy(p, s.data(), s.size());
            std::memcpy(inline_, &p, sizeof p);
        } else {
            std::memcpy(inline_, s.data(), s.size());
        }
        size_ = static_cast<std::uint32_t>(s.size());
    }
    std::string_view view() const noexcept { return {data(), size_}; }
    bool operator==(std::string_view s) const noexcept {
        return s.size() == size_ && std::memcmp(data(), s.data(), size_) == 0;
    }

private:
    const char* data() const noexcept {
        if (size_ <= sizeof inline_) return inline_;
        const char* p = nullptr;
        std::memcpy(&p, inline_, sizeof p);
        return p;
    }
    void release() noexcept {
        if (size_ > sizeof inline_) delete[] data();
        size_ = 0;
    }

    std::uint32_t size_ = 0;
    char inline_[24];
};

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
    struct alignas(64) Slot {
        std::uint64_t hash = 0; // 0: empty
        Key key;
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
