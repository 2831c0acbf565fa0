// mini_redis/store.cpp: one shard's keys (see store.hpp).
#include "mini_redis/store.hpp"

#include <galay/galay.hpp>

namespace mini_redis {

Millis now_ms() noexcept {
    // The scheduler's clock: the steady clock, or a test's paused one.
    return galay::Scheduler::now_ns() / 1'000'000;
}

Store::Entry* Store::find(std::string_view key) {
    Entry* e = map_.find(key);
    if (e == nullptr) return nullptr;
    // Only a key with a deadline costs a look at the clock.
    if (e->deadline != 0 && e->deadline <= now_ms()) {
        erase(key);
        return nullptr;
    }
    return e;
}

Store::Entry& Store::set(std::string_view key, std::string_view value) {
    Entry& e = *map_.try_emplace(key).first;
    e.value.assign(value);
    if (e.deadline != 0) forget_deadline(e);
    return e;
}

bool Store::erase(std::string_view key) {
    Entry* e = map_.find(key);
    if (e == nullptr) return false;
    const bool live = e->deadline == 0 || e->deadline > now_ms();
    if (e->deadline != 0) forget_deadline(*e);
    map_.erase(key);
    return live;
}

void Store::set_deadline(std::string_view key, Entry& e, Millis at) {
    if (at == 0) {
        if (e.deadline != 0) forget_deadline(e);
        return;
    }
    if (e.deadline == 0) {
        e.slot = static_cast<std::uint32_t>(volatile_.size());
        volatile_.emplace_back(key);
    }
    e.deadline = at;
}

void Store::forget_deadline(Entry& e) {
    // Swap-remove from volatile_: the last key takes e's place (and its entry is told so).
    if (e.slot + 1 != volatile_.size()) {
        map_.find(volatile_.back())->slot = e.slot;
        volatile_[e.slot] = std::move(volatile_.back());
    }
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
            // A copy: erasing the key reorders volatile_.
            const std::string key = volatile_[rng_() % volatile_.size()];
            if (map_.find(key)->deadline <= now) {
                erase(key);
                ++expired;
            }
        }
        deleted += expired;
        if (expired * 4 <= n) break; // few expired: the rest can wait for the next cycle
    }
    return deleted;
}

} // namespace mini_redis
