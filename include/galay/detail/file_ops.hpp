// The awaitables of fs::File's operations and of fs::Batch::submit() (galay/fs/file.hpp,
// galay/fs/batch.hpp). Each is made only by File or Batch, from an op on the file they hold
// (docs/driver.md: who makes an operation).
#pragma once

#include "galay/detail/cancel.hpp"
#include "galay/detail/in_place.hpp"
#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <system_error>

namespace galay::fs {
class File;
class Batch;
} // namespace galay::fs

namespace galay::detail {

/// How a transfer treats a short count.
enum class FileXfer : std::uint8_t {
    some,  ///< read_at/write_at: return what the kernel moved
    exact, ///< read_exact_at: fewer bytes than asked (end of file) is `errc::unexpected_eof`
    all,   ///< write_all_at: continue short writes; fewer bytes at the end is an error
};

/// read_at/write_at/readv_at/writev_at (and their exact/all forms) -> Result<std::size_t>.
class [[nodiscard]] FileTransferAwaitable : public IoAwaitable<FileTransferAwaitable> {
public:
    bool await_ready() const noexcept { return static_cast<bool>(precheck_); }
    Result<std::size_t> result();

private:
    friend class fs::File;
    /// `precheck`: an error found before submitting (misaligned O_DIRECT, closed file); the
    /// operation then completes at once with it.
    FileTransferAwaitable(const IoOp& op, FileXfer mode, std::error_code precheck) noexcept;

    std::error_code precheck_;
    FileXfer mode_;
};

/// fsync/fdatasync/fallocate/close -> Result<void>.
class [[nodiscard]] FileSyncAwaitable : public IoAwaitable<FileSyncAwaitable> {
public:
    bool await_ready() const noexcept { return static_cast<bool>(precheck_); }
    Result<void> result();

private:
    friend class fs::File;
    FileSyncAwaitable(const IoOp& op, std::error_code precheck) noexcept;

    std::error_code precheck_;
};

/// The outcome of a finished transfer op under `mode` (shared with fs::Batch).
Result<std::size_t> file_transfer_result(const IoOp& op, FileXfer mode) noexcept;

/// What `co_await batch.submit()` suspends on.
class [[nodiscard]] BatchAwaitable final : public Cancellable,
                                           public AwaitedInPlace<BatchAwaitable> {
public:
    BatchAwaitable(BatchAwaitable&&) noexcept = default; // only before it is awaited
    BatchAwaitable& operator=(BatchAwaitable&&) = delete;

    /// Cancel the operations still pending after `d`; they then fail with `timed_out`.
    [[nodiscard]] BatchAwaitable&& timeout(Timeout d) &&;
    [[nodiscard]] BatchAwaitable&& deadline(std::chrono::steady_clock::time_point t) &&;

    bool await_ready() const noexcept;
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        return start(h, scope_of(h));
    }
    /// Success when every operation succeeded, else the first error in queue order.
    Result<void> await_resume() noexcept;

    void cancel() noexcept override;

private:
    friend class fs::Batch;
    explicit BatchAwaitable(fs::Batch& batch) noexcept
        : batch_(&batch) {}
    bool start(std::coroutine_handle<> h, CancelScope* scope);

    fs::Batch* batch_;
    CancelScope* scope_ = nullptr;
    std::int64_t deadline_ns_ = 0; // steady clock; 0: none (each op's timer, as in IoAwaitable)
};

} // namespace galay::detail
