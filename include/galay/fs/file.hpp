// galay/fs/file.hpp: asynchronous positional file I/O.
//
//     galay::Task<void> copy_block() {
//         using galay::fs::File;
//         auto f = File::open("/var/tmp/data", {.read = true, .write = true, .create = true,
//                                               .direct = true});
//         if (!f) co_return; // galay::fs::describe_error("/var/tmp/data", f.error()) names it
//         galay::fs::AlignedBuffer buf(4096, f->logical_block_size());
//         auto w = co_await f->write_all_at(buf, 0);            // Result<std::size_t>
//         auto r = co_await f->read_exact_at(buf, 0).timeout(1s);
//         auto synced = co_await f->fdatasync();                 // Result<void>
//     }
//
// Every operation is an awaitable with `.timeout(d)` / `.deadline(t)` and is cancelled with the
// task that awaits it (when_any, CancelSource); a cancelled or timed-out operation has finished in
// the kernel before the awaiting coroutine resumes, so the buffer is never written after that.
// Several operations can be submitted at once with `fs::Batch` (galay/fs/batch.hpp).
// `send_to(stream, offset, len)` sends a range of the file to a TcpStream with sendfile(2).
//
// How each backend runs them:
//  - io_uring: every operation is one SQE (IORING_OP_READ/WRITE/READV/WRITEV/FSYNC/FALLOCATE),
//    submitted with everything else of the loop turn in one io_uring_enter. read_at/write_at on an
//    fs::FixedBuffer (a buffer registered with the ring) are READ_FIXED/WRITE_FIXED.
//  - epoll: files opened with `direct` go through Linux AIO (libaio): an operation is handed to
//    the kernel (io_submit) when its task suspends on it, an fs::Batch in one io_submit; the
//    completions are signalled through an eventfd in the epoll set and collected from the AIO
//    completion ring (io_getevents semantics, without the system call). Buffered files (no
//    O_DIRECT) cannot use libaio usefully: for them io_submit performs the whole copy synchronously
//    and blocks the thread on a page-cache miss or a dirty-page throttle. So on epoll, buffered
//    reads first try `preadv2(RWF_NOWAIT)` (served at once when the data is cached), and the other
//    transfers on a buffered file (writes, uncached reads) run on galay's blocking pool (the one
//    process-wide pool `spawn_blocking` uses, galay/blocking.hpp), whose completions return to
//    the scheduler's thread.
//  - epoll, fsync and fdatasync: through libaio for every file, buffered or O_DIRECT
//    (IOCB_CMD_FSYNC / IOCB_CMD_FDSYNC, Linux >= 4.18: io_submit hands the flush to a kernel
//    workqueue and returns at once). On a kernel without them (io_submit refuses the iocb) they
//    fall back to the pool, detected once, with no error reported. An fsync cannot be cancelled
//    once the kernel has it: a timeout or cancellation waits for its real result.
//  - epoll, fallocate: there is no AIO command for it, so it runs on the pool for every file.
//    `truncate` (ftruncate) has none either and is a synchronous call on the caller's thread.
//  - libaio requests carry RWF_NOWAIT, so io_submit does not block the loop where a filesystem
//    would (ext4 and xfs write past the end of a file synchronously): such a request completes
//    with EAGAIN and is redone on the pool, as io_uring redoes it on its workers. Preallocating
//    (fallocate, as fio does) keeps appends on the fast path.
//
// O_DIRECT requests must have their buffer address, file offset and length aligned to
// `logical_block_size()`; a misaligned request fails with `galay::errc::misaligned_direct_io`
// before reaching the kernel. `truncate`, `size` and `open` are synchronous system calls (they
// touch metadata only). Do not close a file while an operation on it is pending.
#pragma once

#include "galay/detail/buffers.hpp"
#include "galay/detail/file_ops.hpp"
#include "galay/fs/aligned_buffer.hpp"
#include "galay/fs/fixed_buffer.hpp"
#include "galay/owned_fd.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>

namespace galay {
class TcpStream;
} // namespace galay

namespace galay::fs {

/// How to open a file (flags of open(2)).
struct OpenOptions {
    bool read = true;      ///< O_RDONLY, or O_RDWR with `write`
    bool write = false;    ///< O_WRONLY, or O_RDWR with `read`
    bool create = false;   ///< O_CREAT: create the file when it does not exist
    bool truncate = false; ///< O_TRUNC (needs `write`)
    bool append = false;   ///< O_APPEND: every write goes to the end (the offset is ignored)
    bool direct = false;   ///< O_DIRECT (F_NOCACHE on macOS): bypass the page cache; I/O must be
                           ///< block-aligned
    unsigned mode = 0644;  ///< permissions of a created file (before the umask)
};

/// "<path>: <reason>" for an error of `File::open` (or of an operation on that file), with a hint
/// where one helps (O_DIRECT refused: which filesystems do that and where to go instead).
std::string describe_error(const std::filesystem::path& path, std::error_code ec);

} // namespace galay::fs

namespace galay::fs {

class Batch;

/// An open file. Move-only; destroying it closes the file (synchronously).
class File {
public:
    File() noexcept = default;
    /// Adopt an open file descriptor (O_DIRECT is detected from its flags).
    explicit File(int fd) noexcept;
    /// The tag of the constructor below: the caller opened the fd without O_DIRECT.
    struct Buffered {};
    /// Adopt an open file descriptor the caller opened without O_DIRECT (an openat2 of its own,
    /// say): no fcntl to find out, one system call fewer per file.
    File(int fd, Buffered) noexcept;
    /// Takes over the file of `o`, which is empty after.
    File(File&& o) noexcept = default;
    /// Closes its own file, then takes over the one of `o`.
    File& operator=(File&& o) noexcept = default;
    ~File() = default;

    /// open(2) with `options` (always O_CLOEXEC). Errors are errno values, except an O_DIRECT
    /// open the filesystem refuses: `errc::direct_io_unsupported`. `describe_error(path, ec)`
    /// makes the message name the path.
    static Result<File> open(const std::filesystem::path& path, const OpenOptions& options = {});

    /// Read up to `buf.size()` bytes at `offset`; fewer at the end of the file, 0 past it.
    template <MutableBuffer B>
    [[nodiscard]] detail::FileTransferAwaitable read_at(B&& buf,
                                                        std::uint64_t offset) const noexcept {
        return transfer(detail::OpCode::read_at, std::ranges::data(buf), std::ranges::size(buf),
                        offset, detail::FileXfer::some);
    }
    /// Read exactly `buf.size()` bytes (continuing short reads); reaching the end of the file
    /// first is `errc::unexpected_eof`. More than 2 GiB - 4 KiB (Linux's limit for one read) is
    /// `errc::transfer_too_large`, before any I/O.
    template <MutableBuffer B>
    [[nodiscard]] detail::FileTransferAwaitable read_exact_at(B&& buf,
                                                              std::uint64_t offset) const noexcept {
        return transfer(detail::OpCode::read_at, std::ranges::data(buf), std::ranges::size(buf),
                        offset, detail::FileXfer::exact);
    }
    /// Write some of `buf` at `offset`; returns how many bytes the kernel took.
    template <ConstBuffer B>
    [[nodiscard]] detail::FileTransferAwaitable write_at(const B& buf,
                                                         std::uint64_t offset) const noexcept {
        return transfer(detail::OpCode::write_at, std::ranges::data(buf), std::ranges::size(buf),
                        offset, detail::FileXfer::some);
    }
    /// Write all of `buf` at `offset` (continuing short writes); returns buf.size(). More than
    /// 2 GiB - 4 KiB is `errc::transfer_too_large`, before any I/O.
    template <ConstBuffer B>
    [[nodiscard]] detail::FileTransferAwaitable write_all_at(const B& buf,
                                                             std::uint64_t offset) const noexcept {
        return transfer(detail::OpCode::write_at, std::ranges::data(buf), std::ranges::size(buf),
                        offset, detail::FileXfer::all);
    }
    /// The same four operations on a registered buffer, or a slice of one (fs::FixedBuffer):
    /// io_uring IORING_OP_READ_FIXED / WRITE_FIXED when the buffer is registered with this
    /// thread's ring, the plain operation otherwise (epoll, a refused registration). Results,
    /// alignment rules and errors are those of the plain operations.
    [[nodiscard]] detail::FileTransferAwaitable read_at(FixedSlice buf,
                                                        std::uint64_t offset) const noexcept;
    /// read_exact_at into a registered buffer.
    [[nodiscard]] detail::FileTransferAwaitable read_exact_at(FixedSlice buf,
                                                              std::uint64_t offset) const noexcept;
    /// write_at from a registered buffer.
    [[nodiscard]] detail::FileTransferAwaitable write_at(FixedSlice buf,
                                                         std::uint64_t offset) const noexcept;
    /// write_all_at from a registered buffer.
    [[nodiscard]] detail::FileTransferAwaitable write_all_at(FixedSlice buf,
                                                             std::uint64_t offset) const noexcept;
    /// preadv(2): scatter one read into several buffers (the iovecs must outlive the await).
    [[nodiscard]] detail::FileTransferAwaitable readv_at(std::span<const iovec> iov,
                                                         std::uint64_t offset) const noexcept;
    /// pwritev(2): gather several buffers into one write; may be short like write_at.
    [[nodiscard]] detail::FileTransferAwaitable writev_at(std::span<const iovec> iov,
                                                          std::uint64_t offset) const noexcept;

    /// sendfile(2): send `len` bytes of the file, from `offset`, to `stream` without copying
    /// them through user space (the socket's readiness is awaited on both backends, then
    /// sendfile runs on the worker's thread until the socket is full). The result is the bytes
    /// sent: `len`, or fewer when the file ends first (shorter than `offset + len`, or truncated
    /// while being sent; a caller that promised `len` bytes must then close the connection).
    /// Reading the file happens inside sendfile: a page-cache miss waits for the disk on the
    /// worker's thread, as nginx's `sendfile on` does. More than 2 GiB - 4 KiB in one call is
    /// `errc::transfer_too_large`, before any I/O. A peer gone is `EPIPE`/`ECONNRESET` (never
    /// SIGPIPE). Bytes already sent when a timeout or cancellation ends it are not reported.
    [[nodiscard]] detail::FileTransferAwaitable
    send_to(const TcpStream& stream, std::uint64_t offset, std::uint64_t len) const noexcept;

    /// Flush data and metadata to the device.
    [[nodiscard]] detail::FileSyncAwaitable fsync() const noexcept;
    /// Flush data (and the metadata needed to read it back).
    [[nodiscard]] detail::FileSyncAwaitable fdatasync() const noexcept;
    /// fallocate(2): `mode` 0 reserves [offset, offset+len) and grows the file if needed;
    /// FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, ... as in the man page.
    [[nodiscard]] detail::FileSyncAwaitable fallocate(int mode, std::uint64_t offset,
                                                      std::uint64_t len) const noexcept;
    /// Close asynchronously. The File is empty afterwards.
    [[nodiscard]] detail::FileSyncAwaitable close() noexcept;

    /// ftruncate(2) (synchronous).
    Result<void> truncate(std::uint64_t length) const noexcept;
    /// The file's size in bytes (the device size for a block device; synchronous).
    Result<std::uint64_t> size() const noexcept;

    /// The alignment O_DIRECT needs for buffer address, offset and length: the device's logical
    /// block size (BLKSSZGET for block devices; statx STATX_DIOALIGN for files; else the
    /// filesystem block size, clamped to 512..4096).
    std::size_t logical_block_size() const noexcept;
    /// A zeroed buffer of `size` bytes aligned for O_DIRECT on this file.
    AlignedBuffer make_buffer(std::size_t size) const {
        return AlignedBuffer(size, std::max(logical_block_size(), std::size_t{512}));
    }

    /// The same, registered with this thread's scheduler (see fs::FixedBuffer).
    FixedBuffer make_fixed_buffer(std::size_t size) const {
        return FixedBuffer(size, std::max(logical_block_size(), std::size_t{512}));
    }

    /// True while it holds an open file.
    bool is_open() const noexcept { return fd_.is_open(); }
    /// True when the file was opened with O_DIRECT.
    bool is_direct() const noexcept { return direct_; }
    /// The file descriptor, still owned by the File (-1 when empty).
    int fd() const noexcept { return fd_.get(); }
    /// Give up ownership of the fd: galay forgets it (and drops it from io_uring's registered
    /// files), and closing it is now the caller's job.
    int release() noexcept { return fd_.release(); }

private:
    friend class Batch;

    /// The op for a transfer, and the error to report instead of submitting it (if any).
    /// `fixed_slot` >= 0: `buf` lies in that registered buffer of this thread's ring.
    std::error_code prepare_transfer(detail::IoOp& op, detail::OpCode code, const void* buf,
                                     std::size_t len, std::uint64_t offset, detail::FileXfer mode,
                                     int fixed_slot = -1) const noexcept;
    /// The slot of `buf`'s buffer in this thread's ring, or -1 (not registered with it).
    static int fixed_slot(const FixedSlice& buf) noexcept;
    std::error_code prepare_vector(detail::IoOp& op, detail::OpCode code,
                                   std::span<const iovec> iov, std::uint64_t offset) const noexcept;
    std::error_code prepare_sync(detail::IoOp& op, detail::OpCode code) const noexcept;
    [[nodiscard]] detail::FileTransferAwaitable transfer(detail::OpCode code, const void* buf,
                                                         std::size_t len, std::uint64_t offset,
                                                         detail::FileXfer mode,
                                                         int fixed_slot = -1) const noexcept;

    OwnedFd fd_;
    bool direct_ = false;
    mutable std::uint32_t block_size_ = 0; // 0: not looked up yet
};

} // namespace galay::fs
