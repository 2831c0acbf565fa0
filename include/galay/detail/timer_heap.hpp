// A binary min-heap of TimerNode pointers with O(log n) removal (each node knows its index).
// Per scheduler: timers never cross threads.
#pragma once

#include "galay/detail/io_op.hpp"

#include <cstdint>
#include <vector>

namespace galay::detail {

class TimerHeap {
public:
    bool empty() const noexcept { return heap_.empty(); }
    std::size_t size() const noexcept { return heap_.size(); }
    TimerNode* top() const noexcept { return heap_.front(); }

    void push(TimerNode& n) {
        n.heap_index = static_cast<std::uint32_t>(heap_.size());
        heap_.push_back(&n);
        sift_up(n.heap_index);
    }

    void remove(TimerNode& n) noexcept {
        std::uint32_t i = n.heap_index;
        if (i == UINT32_MAX) return;
        n.heap_index = UINT32_MAX;
        TimerNode* last = heap_.back();
        heap_.pop_back();
        if (i == heap_.size()) return; // it was the last one
        heap_[i] = last;
        last->heap_index = i;
        sift_down(i);
        sift_up(last->heap_index);
    }

    TimerNode* pop() noexcept {
        TimerNode* n = heap_.front();
        remove(*n);
        return n;
    }

    /// Forget every node (used at shutdown, when the nodes' owners are being destroyed).
    void clear() noexcept {
        for (TimerNode* n : heap_)
            n->heap_index = UINT32_MAX;
        heap_.clear();
    }

private:
    bool less(std::uint32_t a, std::uint32_t b) const noexcept {
        return heap_[a]->deadline_ns < heap_[b]->deadline_ns;
    }
    void swap_nodes(std::uint32_t a, std::uint32_t b) noexcept {
        std::swap(heap_[a], heap_[b]);
        heap_[a]->heap_index = a;
        heap_[b]->heap_index = b;
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

    std::vector<TimerNode*> heap_;
};

} // namespace galay::detail
