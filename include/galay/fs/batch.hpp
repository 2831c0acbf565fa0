// galay/fs/batch.hpp: queue several file operations, submit them at once, resume when all are
// done.
//
//     galay::fs::Batch batch;
//     for (std::size_t i = 0; i < 8; ++i)
//         batch.read_exact_at(file, bufs[i], i * 4096);  // returns the op's index
//     auto ok = co_await batch.submit().timeout(1s);     // Result<void>: the first error, if any
//     for (std::size_t i = 0; i < batch.size(); ++i)
//         if (auto n = batch.result(i); !n) report(i, n.error());
//     batch.clear();                                     // reuse (no allocation once warmed up)
//
// On io_uring the batch is N SQEs in one io_uring_enter; on epoll the O_DIRECT operations are N
// iocbs in one io_submit (buffered ones go to the thread pool, see galay/fs/file.hpp). Buffers
// and iovecs must stay valid until `submit()` has been awaited. A misaligned O_DIRECT request
// fails on its own (`errc::misaligned_direct_io`) without keeping the others from running.
// Cancelling the awaiting task or a timeout cancels every operation still pending; all of them
// have finished before the awaiting coroutine resumes.
#pragma once

#include "galay/detail/file_ops.hpp"
#include "galay/fs/file.hpp"

#include <chrono>
#include <coroutine>
#include <vector>

namespace galay::fs {

/// A reusable list of file operations submitted together. Not copyable; do not move or modify it
/// while a `submit()` is being awaited.
class Batch {
public:
    Batch() noexcept = default;
    /// An empty batch with room for `capacity` operations, allocated now.
    explicit Batch(std::size_t capacity) { entries_.reserve(capacity); }
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;
    /// Takes over the operations of `o` (not while either is being submitted).
    Batch(Batch&& o) noexcept;
    /// Takes over the operations of `o` (not while either is being submitted).
    Batch& operator=(Batch&& o) noexcept;
    ~Batch();

    // Each adds one operation and returns its index (for result()).
    /// Queue a read of up to `buf.size()` bytes of `f` at `offset`; returns its index.
    template <MutableBuffer B>
    std::size_t read_at(const File& f, B&& buf, std::uint64_t offset) {
        return add_transfer(f, galay::detail::OpCode::read_at, std::ranges::data(buf),
                            std::ranges::size(buf), offset, galay::detail::FileXfer::some);
    }
    /// Queue a read of exactly `buf.size()` bytes (`errc::unexpected_eof` at the end of the file);
    /// returns its index.
    template <MutableBuffer B>
    std::size_t read_exact_at(const File& f, B&& buf, std::uint64_t offset) {
        return add_transfer(f, galay::detail::OpCode::read_at, std::ranges::data(buf),
                            std::ranges::size(buf), offset, galay::detail::FileXfer::exact);
    }
    /// Queue a write of up to `buf.size()` bytes to `f` at `offset`; returns its index.
    template <ConstBuffer B>
    std::size_t write_at(const File& f, const B& buf, std::uint64_t offset) {
        return add_transfer(f, galay::detail::OpCode::write_at, std::ranges::data(buf),
                            std::ranges::size(buf), offset, galay::detail::FileXfer::some);
    }
    /// Queue a write of all of `buf`; returns its index.
    template <ConstBuffer B>
    std::size_t write_all_at(const File& f, const B& buf, std::uint64_t offset) {
        return add_transfer(f, galay::detail::OpCode::write_at, std::ranges::data(buf),
                            std::ranges::size(buf), offset, galay::detail::FileXfer::all);
    }
    /// The same on a registered buffer or a slice of one (fs::FixedBuffer): READ_FIXED /
    /// WRITE_FIXED on io_uring where it is registered with this thread's ring.
    std::size_t read_at(const File& f, FixedSlice buf, std::uint64_t offset);
    /// read_exact_at into a registered buffer.
    std::size_t read_exact_at(const File& f, FixedSlice buf, std::uint64_t offset);
    /// write_at from a registered buffer.
    std::size_t write_at(const File& f, FixedSlice buf, std::uint64_t offset);
    /// write_all_at from a registered buffer.
    std::size_t write_all_at(const File& f, FixedSlice buf, std::uint64_t offset);
    /// Queue a vectored read (preadv) at `offset`; returns its index.
    std::size_t readv_at(const File& f, std::span<const iovec> iov, std::uint64_t offset);
    /// Queue a vectored write (pwritev) at `offset`; returns its index.
    std::size_t writev_at(const File& f, std::span<const iovec> iov, std::uint64_t offset);
    /// Queue an fsync of `f`; returns its index.
    std::size_t fsync(const File& f);
    /// Queue an fdatasync of `f`; returns its index.
    std::size_t fdatasync(const File& f);

    /// Submit every queued operation at once; `co_await` resumes when all have finished.
    [[nodiscard]] galay::detail::BatchAwaitable submit() noexcept {
        return galay::detail::BatchAwaitable(*this);
    }

    /// Operations queued.
    std::size_t size() const noexcept { return entries_.size(); }
    /// True when no operation is queued.
    bool empty() const noexcept { return entries_.empty(); }
    /// The outcome of operation `i` after submit() completed: bytes moved (0 for fsync), or
    /// its error.
    Result<std::size_t> result(std::size_t i) const noexcept;
    /// Forget the queued operations (keeps the capacity).
    void clear() noexcept { entries_.clear(); }

private:
    friend class galay::detail::BatchAwaitable;
    struct Entry {
        galay::detail::IoOp op;
        std::error_code precheck; // set: fails without being submitted
        galay::detail::FileXfer mode = galay::detail::FileXfer::some;
    };

    std::size_t add_transfer(const File& f, galay::detail::OpCode code, const void* buf,
                             std::size_t len, std::uint64_t offset, galay::detail::FileXfer mode,
                             int fixed_slot = -1);
    std::size_t push(Entry e);

    std::vector<Entry> entries_;
    std::coroutine_handle<> countdown_; // resumed once per completion; created on first submit
};

} // namespace galay::fs
