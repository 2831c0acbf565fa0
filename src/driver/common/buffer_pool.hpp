// Fixed-size buffers lent by `recv_pooled`: one contiguous allocation per scheduler, handed out by
// id. The io_uring driver gives the free ids to a kernel buffer ring; the epoll driver keeps them
// on a free list. Either way memory is per scheduler, not per connection.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace galay::detail {

class BufferPool {
public:
    BufferPool(unsigned count, unsigned size)
        : count_(count)
        , size_(size) {
        bytes_ = std::size_t{count} * size;
        // mmap: page-aligned, and pages are only resident once a buffer is first used.
        void* p =
            ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        base_ = static_cast<char*>(p);
        free_.reserve(count);
        for (unsigned i = count; i-- > 0;)
            free_.push_back(static_cast<std::uint16_t>(i));
    }
    ~BufferPool() { ::munmap(base_, bytes_); }
    BufferPool(const BufferPool&) = delete;
    BufferPool& operator=(const BufferPool&) = delete;

    unsigned count() const noexcept { return count_; }
    unsigned size() const noexcept { return size_; }
    char* address(std::uint16_t id) const noexcept { return base_ + std::size_t{id} * size_; }

    bool empty() const noexcept { return free_.empty(); }

    /// Free-list use (epoll, or io_uring without buffer rings). Returns -1 when exhausted.
    int take() noexcept {
        if (free_.empty()) return -1;
        int id = free_.back();
        free_.pop_back();
        return id;
    }
    void put(std::uint16_t id) noexcept { free_.push_back(id); }

private:
    unsigned count_;
    unsigned size_;
    std::size_t bytes_;
    char* base_ = nullptr;
    std::vector<std::uint16_t> free_;
};

} // namespace galay::detail
