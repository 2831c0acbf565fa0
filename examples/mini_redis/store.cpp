// mini_redis/store.cpp: one shard's keys (see store.hpp).
#include "mini_redis/store.hpp"

#include <galay/galay.hpp>

namespace mini_redis {

Millis now_ms() noexcept {
    // The scheduler's clock: the steady clock, or a test's paused one.
    return galay::Scheduler::now_ns() / 1'000'000;
}

Store::Entry* Store::find(std::string_view key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    // Only a key with a deadline costs a look at the clock.
    if (it->second.deadline != 0 && it->second.deadline <= now_ms()) {
        erase(it);
        return nullptr;
    }
    return &it->second;
}

Store::Entry& Store::set(std::string_view key, std::string_view value) {
    auto it = map_.find(key);
    if (it == map_.end()) {
        it = map_.emplace(std::string(key), Entry{}).first;
        it->second.key = &it->first;
    }
    Entry& e = it->second;
    e.value.assign(value);
    if (e.deadline != 0) forget_deadline(e);
    return e;
}

bool Store::erase(std::string_view key) {
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    const bool live = it->second.deadline == 0 || it->second.deadline > now_ms();
    erase(it);
    return live;
}

void Store::erase(Map::iterator it) {
    if (it->second.deadline != 0) forget_deadline(it->second);
    map_.erase(it);
}

void Store::set_deadline(Entry& e, Millis at) {
    if (at == 0) {
        if (e.deadline != 0) forget_deadline(e);
        return;
    }
    if (e.deadline == 0) {
        e.slot = static_cast<std::uint32_t>(volatile_.size());
        volatile_.push_back(&e);
    }
    e.deadline = at;
}

void Store::forget_deadline(Entry& e) {
    // Swap-remove from volatile_: the last entry takes e's slot.
    Entry* last = volatile_.back();
    volatile_[e.slot] = last;
    last->slot = e.slot;
    volatile_.pop_back();
    e.deadline = 0;
}

void Store::clear() {
    map_.clear();
    volatile_.clear();
}

std::size_t Store::expire_some(Millis now, unsigned samples, unsigned rounds) {
    std::size_t deleted = 0;
    for (unsigned r = 0; r < rounds && !volatile_.empty(); ++r) {
        unsigned expired = 0;
        const unsigned n = std::min<unsigned>(samples, static_cast<unsigned>(volatile_.size()));
        for (unsigned i = 0; i < n && !volatile_.empty(); ++i) {
            Entry* e = volatile_[rng_() % volatile_.size()];
            if (e->deadline <= now) {
                erase(map_.find(*e->key));
                ++expired;
            }
        }
        deleted += expired;
        if (expired * 4 <= n) break; // few expired: the rest can wait for the next cycle
    }
    return deleted;
}

} // namespace mini_redis
