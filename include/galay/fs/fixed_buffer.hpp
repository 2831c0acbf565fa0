// galay/fs/fixed_buffer.hpp: a buffer registered with the current scheduler's io_uring ring, for
// file reads and writes without the per-request page mapping (io_uring "fixed buffers").
//
//     galay::Task<void> read_blocks(const galay::fs::File& file) {
//         auto buf = file.make_fixed_buffer(1 << 20);     // registered with this thread's ring
//         auto n = co_await file.read_at(buf, 0);          // IORING_OP_READ_FIXED
//         auto m = co_await file.read_exact_at(buf.slice(4096, 8192), 1 << 20); // part of it
//         bool fast = buf.registered();                    // false on epoll, or when refused
//     }
//
// What it buys: for every plain read or write on io_uring the kernel looks up and pins the pages
// of the buffer, and unpins them at completion; a registered buffer is pinned once, when it is
// created, and the kernel finds it by its slot number. That is a measurable share of the CPU of
// small O_DIRECT requests (docs/benchmarks/files.md), and nothing for large or buffered ones.
//
// Rules, all enforced:
//  - A FixedBuffer owns its memory (an AlignedBuffer) and is registered with the scheduler of the
//    thread that creates it. Its destructor unregisters it *before* freeing the memory, so the
//    ring never refers to freed memory, and a new buffer at the same address gets a registration
//    of its own.
//  - Unregistering must happen on the thread that registered (the ring is single-issuer).
//    Destroying or move-assigning over a registered FixedBuffer on another thread is detected:
//    the program stops with a message naming the problem (it cannot unregister there, and
//    freeing registered memory would let the kernel write into whatever reuses it). Moving it to
//    another thread is fine as long as it comes back to be destroyed, or outlives its scheduler:
//    when the scheduler goes first, the buffer is simply no longer registered.
//  - Registration can fail (RLIMIT_MEMLOCK for unprivileged users, a kernel before 5.19, more
//    than 1024 buffers on one ring, more than 1 GiB in one buffer) and is not possible on the
//    epoll backend or outside a scheduler: the buffer then works exactly like an AlignedBuffer,
//    read_at/write_at use the plain operations, `registered()` is false and
//    `registration_error()` says why. Used from another thread's scheduler it is a plain buffer
//    there too.
//  - On epoll (libaio and the thread pool) the operations are exactly the plain ones.
//  - As for any buffer, it must outlive the operations on it. A registered buffer refers to the
//    pages it had when it was registered: do not remap its memory (madvise(MADV_DONTNEED),
//    mremap) while it is registered.
//
// It is deliberately not a byte range (no begin/end): passing one to read_at/write_at always
// means "fixed"; `span()` gives the bytes to anything else.
#pragma once

#include "galay/fs/aligned_buffer.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <system_error>
#include <thread>

namespace galay::detail {
struct BufferRegistration; // the driver's handle on a registered buffer (internal)
} // namespace galay::detail

namespace galay::fs {

class FixedBuffer;

/// A byte range inside a FixedBuffer: what read_at/write_at take to use the registered buffer.
/// Does not own anything; the FixedBuffer must outlive it.
class FixedSlice {
public:
    /// The whole buffer.
    FixedSlice(FixedBuffer& buf) noexcept; // NOLINT: implicit on purpose
    /// The first byte of the slice.
    std::byte* data() const noexcept { return data_; }
    /// Bytes in the slice.
    std::size_t size() const noexcept { return size_; }
    /// The slice's bytes as a span.
    std::span<std::byte> span() const noexcept { return {data_, size_}; }

private:
    friend class FixedBuffer;
    friend class File;
    friend class Batch;
    FixedSlice(std::byte* data, std::size_t size, const detail::BufferRegistration* reg) noexcept
        : data_(data)
        , size_(size)
        , reg_(reg) {}

    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    const detail::BufferRegistration* reg_ = nullptr;
};

/// An owning, aligned buffer registered with the current thread's io_uring ring. Move-only.
class FixedBuffer {
public:
    FixedBuffer() noexcept = default;
    /// `size` zeroed bytes at a multiple of `alignment` (see AlignedBuffer), registered with the
    /// current thread's scheduler when it can be (see registered()).
    explicit FixedBuffer(std::size_t size,
                         std::size_t alignment = AlignedBuffer::kDefaultAlignment);
    /// Take over `memory` and register it.
    explicit FixedBuffer(AlignedBuffer memory);
    /// Takes over the memory and the registration of `o`, which is empty after.
    FixedBuffer(FixedBuffer&& o) noexcept;
    /// Unregisters and frees its own memory, then takes over `o`.
    FixedBuffer& operator=(FixedBuffer&& o) noexcept;
    FixedBuffer(const FixedBuffer&) = delete;
    FixedBuffer& operator=(const FixedBuffer&) = delete;
    /// Unregisters (on the registering thread; elsewhere: stops the program with a message), then
    /// frees the memory.
    ~FixedBuffer();

    /// Registered with a ring that still exists: read_at/write_at on that ring's thread use
    /// READ_FIXED/WRITE_FIXED.
    bool registered() const noexcept;
    /// Why it is not registered: `operation_not_supported` (epoll backend, no scheduler on this
    /// thread, or no sparse buffer tables in this kernel), `no_buffer_space` (the ring's 1024 slots
    /// are taken), `not_enough_memory` (RLIMIT_MEMLOCK), `bad_address` (memory the kernel cannot
    /// pin, or more than 1 GiB), `invalid_argument` (empty); empty while registered or after
    /// the scheduler that registered it is gone.
    std::error_code registration_error() const noexcept { return error_; }
    /// The slot in the ring's buffer table, -1 when not registered (for diagnostics).
    int slot() const noexcept;

    /// The first byte (null when empty).
    std::byte* data() noexcept { return mem_.data(); }
    /// The first byte (null when empty).
    const std::byte* data() const noexcept { return mem_.data(); }
    /// Bytes usable.
    std::size_t size() const noexcept { return mem_.size(); }
    /// True when it holds no bytes.
    bool empty() const noexcept { return mem_.empty(); }
    /// The alignment of data().
    std::size_t alignment() const noexcept { return mem_.alignment(); }
    /// The bytes as a span (plain memory; pass the FixedBuffer itself to use the registration).
    std::span<std::byte> span() noexcept { return mem_.span(); }
    /// The bytes as a span.
    std::span<const std::byte> span() const noexcept { return mem_.span(); }
    /// The same bytes as `char`.
    std::span<char> chars() noexcept { return mem_.chars(); }
    /// The same bytes as `char`, read-only.
    std::span<const char> chars() const noexcept { return mem_.chars(); }

    /// The bytes [offset, offset + len) for a read or write; throws std::out_of_range beyond
    /// the buffer.
    FixedSlice slice(std::size_t offset, std::size_t len);

private:
    friend class FixedSlice;
    void register_now();
    void unregister_now() noexcept;

    AlignedBuffer mem_;
    std::unique_ptr<detail::BufferRegistration> reg_; // stable address for the driver's table
    std::thread::id thread_;                          // where it was registered
    std::error_code error_;
};

inline FixedSlice::FixedSlice(FixedBuffer& buf) noexcept
    : data_(buf.data())
    , size_(buf.size())
    , reg_(buf.reg_.get()) {}

} // namespace galay::fs
