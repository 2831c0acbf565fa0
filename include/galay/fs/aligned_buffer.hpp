// galay/fs/aligned_buffer.hpp: an owning byte buffer whose address (and capacity) is a multiple of
// an alignment, as O_DIRECT file I/O requires.
//
//     auto file = galay::fs::File::open("/var/tmp/data", {.read = true, .direct = true});
//     galay::fs::AlignedBuffer buf(64 * 1024, file->logical_block_size());
//     auto n = co_await file->read_at(buf, 0);        // buf is a MutableBuffer
//     std::span<const std::byte> got = buf.span().first(*n);
//
// Move-only; a move hands over the allocation (no copy). The contents start zero-filled.
#pragma once

#include <bit>
#include <cstddef>
#include <cstring>
#include <new>
#include <span>
#include <stdexcept>
#include <utility>

namespace galay::fs {

/// Zeroed heap memory at an aligned address, as O_DIRECT reads and writes need. Move-only.
class AlignedBuffer {
public:
    /// Enough for any logical block size up to a page (512-byte sectors, 4 KiB-sector disks).
    static constexpr std::size_t kDefaultAlignment = 4096;

    AlignedBuffer() noexcept = default;
    /// `size` zeroed bytes at an address that is a multiple of `alignment` (a power of two).
    /// The allocation is rounded up to a whole number of `alignment` units.
    explicit AlignedBuffer(std::size_t size, std::size_t alignment = kDefaultAlignment)
        : size_(size)
        , alignment_(alignment) {
        if (alignment == 0 || !std::has_single_bit(alignment))
            throw std::invalid_argument("galay::fs::AlignedBuffer: alignment must be a power of 2");
        if (size == 0) return;
        const std::size_t capacity = (size + alignment - 1) / alignment * alignment;
        data_ = static_cast<std::byte*>(::operator new (capacity, std::align_val_t{alignment}));
        std::memset(data_, 0, capacity);
    }
    /// Takes over the memory of `o`, which is empty after.
    AlignedBuffer(AlignedBuffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr))
        , size_(std::exchange(o.size_, 0))
        , alignment_(o.alignment_) {}
    /// Frees its own memory, then takes over the memory of `o`.
    AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
        if (this != &o) {
            release();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            alignment_ = o.alignment_;
        }
        return *this;
    }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    ~AlignedBuffer() { release(); }

    /// The first byte (null when empty).
    std::byte* data() noexcept { return data_; }
    /// The first byte (null when empty).
    const std::byte* data() const noexcept { return data_; }
    /// Bytes usable (as asked, not rounded up).
    std::size_t size() const noexcept { return size_; }
    /// True when it holds no bytes.
    bool empty() const noexcept { return size_ == 0; }
    /// The alignment of data().
    std::size_t alignment() const noexcept { return alignment_; }

    /// Iteration over the bytes.
    std::byte* begin() noexcept { return data_; }
    /// Iteration over the bytes.
    std::byte* end() noexcept { return data_ + size_; }
    /// Iteration over the bytes.
    const std::byte* begin() const noexcept { return data_; }
    /// Iteration over the bytes.
    const std::byte* end() const noexcept { return data_ + size_; }

    /// The bytes as a span (what read_at and write_at take).
    std::span<std::byte> span() noexcept { return {data_, size_}; }
    /// The bytes as a span.
    std::span<const std::byte> span() const noexcept { return {data_, size_}; }
    /// The same bytes as `char`, for APIs that want text or `char*`.
    std::span<char> chars() noexcept { return {reinterpret_cast<char*>(data_), size_}; }
    /// The same bytes as `char`, read-only.
    std::span<const char> chars() const noexcept {
        return {reinterpret_cast<const char*>(data_), size_};
    }

private:
    void release() noexcept {
        if (data_ != nullptr) ::operator delete (data_, std::align_val_t{alignment_});
        data_ = nullptr;
    }

    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t alignment_ = kDefaultAlignment;
};

} // namespace galay::fs
