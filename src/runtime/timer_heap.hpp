// The scheduler's timers: a binary min-heap of deadlines whose removals are lazy. Per scheduler:
// timers never cross threads.
//
// Nearly every deadline is removed, not fired: each I/O op with a timeout arms one and disarms it
// when the op completes (an HTTP connection: two a request). An eager heap removal moves other
// entries and writes their nodes' positions, and the nodes live in coroutine frames all over
// memory: with a thousand connections that was ~3 cache misses a removal, 2.4 of them writes
// (cachegrind, epoll, 1,000 HTTP connections). So a node is found through a slot of a dense
// table the heap owns, and removing it only ends its slot's generation: its entry stays in the
// heap, dead, and is dropped when it reaches the top or when dead entries outnumber the live
// ones (then the heap is rebuilt from the live entries alone). Nothing the heap does writes a
// node but its own slot number, so sifts and rebuilds stay within the heap's two arrays.
//
// Each entry carries a copy of its node's deadline, so a sift compares within the heap's own
// array rather than following pointers into cold frames.
#pragma once

#include "galay/detail/io_op.hpp"

#include <cassert>
#include <cstdint>
#include <vector>

namespace galay::detail {

class TimerHeap {
public:
    /// Room for kReserved deadlines armed together from the start. Otherwise the arrays would grow
    /// the first time that many are armed, which can be any request of a server's life (on epoll
    /// an op arms its deadline only when it has to wait, so how many are armed together depends
    /// on timing): the request path would allocate at a moment no warm-up can foresee.
    TimerHeap() {
        slots_.reserve(kReserved);
        heap_.reserve(2 * kReserved + kSlack + 1); // (the most remove() leaves, and one push)
    }

    /// Deadlines that can be armed together before the heap's arrays first grow.
    static constexpr std::size_t kReserved = 64;

    /// No node is armed.
    bool empty() const noexcept { return live_ == 0; }
    /// Nodes armed.
    std::size_t size() const noexcept { return live_; }
    /// Entries held, armed and dead: at most twice size() plus kSlack (see remove).
    std::size_t entries() const noexcept { return heap_.size(); }

    /// The node with the earliest deadline (the heap must not be empty).
    TimerNode* top() noexcept {
        drop_dead_top();
        return slots_[heap_.front().slot].node;
    }
    /// The earliest deadline (the heap must not be empty).
    std::int64_t top_deadline() noexcept {
        drop_dead_top();
        return heap_.front().deadline_ns;
    }

    /// Arm `n` (it must not be armed). `n.deadline_ns` must not change while it is armed.
    void push(TimerNode& n) {
        assert(n.slot == kNone && "a node armed twice");
        std::uint32_t s = free_;
        if (s != kNone) {
            free_ = slots_[s].next_free;
        } else {
            s = static_cast<std::uint32_t>(slots_.size());
            slots_.push_back({});
        }
        Slot& slot = slots_[s];
        slot.node = &n;
        n.slot = s;
        ++live_;
        heap_.push_back({n.deadline_ns, s, slot.generation});
        sift_up(static_cast<std::uint32_t>(heap_.size() - 1));
    }

    /// Disarm `n`; nothing when it is not armed.
    void remove(TimerNode& n) noexcept {
        const std::uint32_t s = n.slot;
        if (s == kNone) return;
        n.slot = kNone;
        release(s);
        if (heap_.size() >= 2 * live_ + kSlack) compact();
    }

    /// Disarm the node with the earliest deadline and return it (the heap must not be empty).
    TimerNode* pop() noexcept {
        drop_dead_top();
        const std::uint32_t s = heap_.front().slot;
        TimerNode* n = slots_[s].node;
        pop_top();
        n->slot = kNone;
        release(s);
        return n;
    }

    /// Forget every node (used at shutdown, when the nodes' owners are being destroyed).
    void clear() noexcept {
        for (Slot& slot : slots_)
            if (slot.node != nullptr) slot.node->slot = kNone;
        slots_.clear();
        heap_.clear();
        free_ = kNone;
        live_ = 0;
    }

private:
    static constexpr std::uint32_t kNone = UINT32_MAX;
    /// Dead entries tolerated beyond the live count before a rebuild.
    static constexpr std::size_t kSlack = 64;

    struct Entry {
        std::int64_t deadline_ns;
        std::uint32_t slot;
        std::uint32_t generation; // the slot's generation when the entry was pushed
    };
    struct Slot {
        TimerNode* node = nullptr;    // null while free
        std::uint32_t generation = 0; // bumped when its node is disarmed: its entry is dead
        std::uint32_t next_free = kNone;
    };

    bool alive(const Entry& e) const noexcept { return slots_[e.slot].generation == e.generation; }

    void release(std::uint32_t s) noexcept {
        Slot& slot = slots_[s];
        slot.node = nullptr;
        ++slot.generation; // (wraps only after 2^32 reuses, long after its entry was dropped)
        slot.next_free = free_;
        free_ = s;
        --live_;
    }

    void drop_dead_top() noexcept {
        while (!alive(heap_.front()))
            pop_top();
    }

    void pop_top() noexcept {
        heap_.front() = heap_.back();
        heap_.pop_back();
        if (!heap_.empty()) sift_down(0);
    }

    /// Keep the live entries only and make them a heap again (Floyd: O(n)).
    void compact() noexcept {
        std::size_t kept = 0;
        for (const Entry& e : heap_)
            if (alive(e)) heap_[kept++] = e;
        heap_.resize(kept);
        for (std::size_t i = kept / 2; i-- > 0;)
            sift_down(static_cast<std::uint32_t>(i));
    }

    void sift_up(std::uint32_t i) noexcept {
        const Entry e = heap_[i];
        while (i > 0) {
            const std::uint32_t parent = (i - 1) / 2;
            if (!(e.deadline_ns < heap_[parent].deadline_ns)) break;
            heap_[i] = heap_[parent];
            i = parent;
        }
        heap_[i] = e;
    }
    void sift_down(std::uint32_t i) noexcept {
        const auto n = static_cast<std::uint32_t>(heap_.size());
        const Entry e = heap_[i];
        for (;;) {
            const std::uint32_t l = 2 * i + 1;
            if (l >= n) break;
            std::uint32_t m = l;
            if (l + 1 < n && heap_[l + 1].deadline_ns < heap_[l].deadline_ns) m = l + 1;
            if (!(heap_[m].deadline_ns < e.deadline_ns)) break;
            heap_[i] = heap_[m];
            i = m;
        }
        heap_[i] = e;
    }

    std::vector<Entry> heap_;
    std::vector<Slot> slots_;
    std::uint32_t free_ = kNone; // first free slot (LIFO: the one freed last is still in cache)
    std::size_t live_ = 0;
};

} // namespace galay::detail
