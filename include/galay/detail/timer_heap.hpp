// A binary min-heap of TimerNode pointers with O(log n) removal (each node knows its index).
// Per scheduler: timers never cross threads.
//
// Each entry carries a copy of its node's deadline, so that a sift compares within the heap's
// own array: the nodes live in coroutine frames all over memory, and with a thousand
// connections each arming a deadline per request, following the pointers to compare took a
// cache miss per level (perf, epoll at 1,000 HTTP connections: most of the completion path's
// samples). A sift now only writes the moved nodes' indexes.
#pragma once

#include "galay/detail/io_op.hpp"

#include <cstdint>
#include <vector>

namespace galay::detail {

class TimerHeap {
public:
    bool empty() const noexcept { return heap_.empty(); }
    std::size_t size() const noexcept { return heap_.size(); }
    TimerNode* top() const noexcept { return heap_.front().node; }
    /// The earliest deadline (the heap must not be empty).
    std::int64_t top_deadline() const noexcept { return heap_.front().deadline_ns; }

    /// `n.deadline_ns` must not change while `n` is in the heap.
    void push(TimerNode& n) {
        n.heap_index = static_cast<std::uint32_t>(heap_.size());
        heap_.push_back({n.deadline_ns, &n});
        sift_up(n.heap_index);
    }

    void remove(TimerNode& n) noexcept {
        std::uint32_t i = n.heap_index;
        if (i == UINT32_MAX) return;
        n.heap_index = UINT32_MAX;
        const Entry last = heap_.back();
        heap_.pop_back();
        if (i == heap_.size()) return; // it was the last one
        heap_[i] = last;
        last.node->heap_index = i;
        sift_down(i);
        sift_up(last.node->heap_index);
    }

    TimerNode* pop() noexcept {
        TimerNode* n = heap_.front().node;
        remove(*n);
        return n;
    }

    /// Forget every node (used at shutdown, when the nodes' owners are being destroyed).
    void clear() noexcept {
        for (const Entry& e : heap_)
            e.node->heap_index = UINT32_MAX;
        heap_.clear();
    }

private:
    struct Entry {
        std::int64_t deadline_ns;
        TimerNode* node;
    };
    bool less(std::uint32_t a, std::uint32_t b) const noexcept {
        return heap_[a].deadline_ns < heap_[b].deadline_ns;
    }
    void swap_nodes(std::uint32_t a, std::uint32_t b) noexcept {
        std::swap(heap_[a], heap_[b]);
        heap_[a].node->heap_index = a;
        heap_[b].node->heap_index = b;
    }
    void sift_up(std::uint32_t i) noexcept {
        while (i > 0) {
            std::uint32_t parent = (i - 1) / 2;
            if (!less(i, parent)) break;
            swap_nodes(i, parent);
            i = parent;
        }
    }
    void sift_down(std::uint32_t i) noexcept {
        const auto n = static_cast<std::uint32_t>(heap_.size());
        for (;;) {
            std::uint32_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < n && less(l, m)) m = l;
            if (r < n && less(r, m)) m = r;
            if (m == i) break;
            swap_nodes(i, m);
            i = m;
        }
    }

    std::vector<Entry> heap_;
};

} // namespace galay::detail
