// The queue behind UnboundedChannel (galay/sync/unbounded_channel.hpp): a FIFO in fixed-size
// blocks whose emptied blocks are kept for reuse.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <utility>

namespace galay::detail {

/// A FIFO of `T` in fixed-size blocks; emptied blocks are kept for reuse. Not thread-safe.
template <class T>
class SegmentedQueue {
public:
    static constexpr std::size_t kPerBlock = std::max<std::size_t>(16, 4096 / sizeof(T));

    SegmentedQueue() = default;
    SegmentedQueue(const SegmentedQueue&) = delete;
    SegmentedQueue& operator=(const SegmentedQueue&) = delete;
    ~SegmentedQueue() {
        while (size_ != 0)
            drop_front();
        free_chain(head_);
        free_chain(spare_);
    }

    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    /// Values the allocated blocks hold.
    std::size_t capacity() const noexcept { return blocks_ * kPerBlock; }

    void push(T&& v) {
        if (tail_ == nullptr || tail_index_ == kPerBlock) add_block();
        ::new (static_cast<void*>(tail_->slot(tail_index_))) T(std::move(v));
        ++tail_index_;
        ++size_;
    }
    /// Moves the first value into `out`; false when empty.
    bool pop(std::optional<T>& out) {
        if (size_ == 0) return false;
        out.emplace(std::move(*head_->slot(head_index_)));
        drop_front();
        return true;
    }

private:
    struct Block {
        Block* next = nullptr;
        alignas(T) unsigned char bytes[kPerBlock * sizeof(T)];
        T* slot(std::size_t i) noexcept { return std::launder(reinterpret_cast<T*>(bytes) + i); }
    };

    void add_block() {
        Block* b = spare_;
        if (b != nullptr) {
            spare_ = b->next;
            b->next = nullptr;
        } else {
            b = new Block;
            ++blocks_;
        }
        if (tail_ != nullptr) tail_->next = b;
        tail_ = b;
        tail_index_ = 0;
        if (head_ == nullptr) {
            head_ = b;
            head_index_ = 0;
        }
    }
    void drop_front() noexcept {
        head_->slot(head_index_)->~T();
        ++head_index_;
        if (--size_ == 0) { // empty (so tail_ == head_): reuse the block from its start
            head_index_ = tail_index_ = 0;
        } else if (head_index_ == kPerBlock) { // a value follows, so a block follows
            Block* done = head_;
            head_ = done->next;
            head_index_ = 0;
            done->next = spare_;
            spare_ = done;
        }
    }
    void free_chain(Block* b) noexcept {
        while (b != nullptr)
            delete std::exchange(b, b->next);
    }

    Block* head_ = nullptr; // the first value is head_->slot(head_index_)
    Block* tail_ = nullptr; // the next value goes to tail_->slot(tail_index_)
    Block* spare_ = nullptr;
    std::size_t head_index_ = 0;
    std::size_t tail_index_ = 0;
    std::size_t size_ = 0;
    std::size_t blocks_ = 0;
};

} // namespace galay::detail
