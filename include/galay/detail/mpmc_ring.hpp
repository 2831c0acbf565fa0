// galay/detail/mpmc_ring.hpp: the buffer of galay::Channel (galay/sync/channel.hpp): Vyukov's
// bounded multi-producer multi-consumer queue, lock-free, its cells allocated once.
//
// Positions carry a lap number in their high bits (index | lap * one_lap_), so that any capacity
// works without a division. Each cell holds a sequence number: == position, free for the push at
// that position; == position + 1, written, for the pop there.
//
// The two positions (tail: where the next push goes, head: where the next pop comes from) are
// the caller's atomics, passed to push/pop: the channel keeps each on a cache line with the
// other counters its side writes anyway, which a ring owning them could not.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <utility>

namespace galay::detail {

template <class T>
class MpmcRing {
public:
    /// Room for `capacity` (>= 1, at most 2^40: the caller checks) values.
    explicit MpmcRing(std::size_t capacity)
        : capacity_(capacity)
        , one_lap_(std::bit_ceil(capacity + 1)) {
        cells_ = std::allocator<Cell>().allocate(capacity_);
        for (std::size_t i = 0; i < capacity_; ++i)
            std::construct_at(&cells_[i].seq, i);
    }
    MpmcRing(const MpmcRing&) = delete;
    MpmcRing& operator=(const MpmcRing&) = delete;
    /// Frees the cells; the owner pops what is still buffered first.
    ~MpmcRing() {
        for (std::size_t i = 0; i < capacity_; ++i)
            std::destroy_at(&cells_[i].seq);
        std::allocator<Cell>().deallocate(cells_, capacity_);
    }

    std::size_t capacity() const noexcept { return capacity_; }
    /// How many pushes (or pops) came before `pos`: lap * capacity + index.
    std::size_t ordinal(std::size_t pos) const noexcept {
        return (pos / one_lap_) * capacity_ + (pos & (one_lap_ - 1));
    }
    /// Move `v` into a free cell; false (and `v` untouched) when the ring is full (or its oldest
    /// cell is still being read).
    bool push(std::atomic<std::size_t>& tail, T& v) {
        std::size_t pos = tail.load(std::memory_order_relaxed);
        for (;;) {
            Cell& c = cells_[pos & (one_lap_ - 1)];
            const std::size_t stamp = c.seq.load(std::memory_order_acquire);
            if (stamp == pos) { // free for this lap
                if (tail.compare_exchange_weak(pos, next_position(pos),
                                               std::memory_order_relaxed)) {
                    std::construct_at(c.value(), std::move(v));
                    c.seq.store(pos + 1, std::memory_order_release);
                    return true;
                }
            } else if (stamp + one_lap_ == pos + 1) {
                return false; // still holds the previous lap's value
            } else {
                pos = tail.load(std::memory_order_relaxed); // another sender took it
            }
        }
    }
    /// Move the oldest value into `out`; false when the ring is empty (or its oldest cell is
    /// still being written).
    bool pop(std::atomic<std::size_t>& head, std::optional<T>& out) {
        std::size_t pos = head.load(std::memory_order_relaxed);
        for (;;) {
            Cell& c = cells_[pos & (one_lap_ - 1)];
            const std::size_t stamp = c.seq.load(std::memory_order_acquire);
            if (stamp == pos + 1) { // written this lap
                if (head.compare_exchange_weak(pos, next_position(pos),
                                               std::memory_order_relaxed)) {
                    T* p = c.value();
                    out.emplace(std::move(*p));
                    std::destroy_at(p);
                    c.seq.store(pos + one_lap_, std::memory_order_release);
                    return true;
                }
            } else if (stamp == pos) {
                return false; // not written yet
            } else {
                pos = head.load(std::memory_order_relaxed); // another receiver took it
            }
        }
    }

private:
    struct Cell {
        std::atomic<std::size_t> seq; // == position: free for that push; position + 1: written
        alignas(T) unsigned char storage[sizeof(T)];
        T* value() noexcept { return std::launder(reinterpret_cast<T*>(storage)); }
    };

    std::size_t next_position(std::size_t pos) const noexcept {
        const std::size_t index = pos & (one_lap_ - 1);
        return index + 1 < capacity_ ? pos + 1 : (pos & ~(one_lap_ - 1)) + one_lap_;
    }

    Cell* cells_ = nullptr;
    std::size_t capacity_;
    std::size_t one_lap_ = 0; // a power of two > capacity_: the lap unit of a position
};

} // namespace galay::detail
