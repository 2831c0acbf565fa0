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
#ifdef MAP_NORESERVE // Linux; macOS and FreeBSD never reserve swap for anonymous memory up front
    static constexpr int kNoReserve = MAP_NORESERVE;
#else
    static constexpr int kNoReserve = 0;
#endif

public:
    BufferPool(unsigned count, unsigned size)
        : count_(count)
        , size_(size)
        , stride_(coloured_stride(size)) {
        bytes_ = std::size_t{count} * stride_;
        // mmap: page-aligned, and pages are only resident once a receive writes them. NORESERVE:
        // the pool is mostly address space (4096 x 64 KiB by default), not a commitment.
        void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | kNoReserve, -1, 0);
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
    char* address(std::uint16_t id) const noexcept { return base_ + std::size_t{id} * stride_; }

    bool empty() const noexcept { return free_.empty(); }
    /// Free-list use: buffers on the free list.
    std::size_t available() const noexcept { return free_.size(); }

    /// Free-list use (epoll, or io_uring without buffer rings). Returns -1 when exhausted.
    int take() noexcept {
        if (free_.empty()) return -1;
        int id = free_.back();
        free_.pop_back();
        return id;
    }
    void put(std::uint16_t id) noexcept { free_.push_back(id); }

private:
    /// Buffers are one cache line more than a multiple of 1 KiB apart: with a power-of-two stride
    /// the first lines of every buffer (all a small message touches) would fall into the same few
    /// cache sets and evict each other.
    static std::size_t coloured_stride(unsigned size) noexcept {
        std::size_t s = (std::size_t{size} + 63) & ~std::size_t{63};
        return (s % 1024 == 0) ? s + 64 : s;
    }

    unsigned count_;
    unsigned size_;
    std::size_t stride_;
    std::size_t bytes_;
    char* base_ = nullptr;
    std::vector<std::uint16_t> free_;
};

} // namespace galay::detail
