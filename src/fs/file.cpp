#include "galay/fs/file.hpp"

#include "platform/fd_calls.hpp"
#include "runtime/scheduler_access.hpp"

#include <fcntl.h>
#if defined(__linux__)
#include <linux/fs.h> // BLKSSZGET, BLKGETSIZE64
#endif
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <bit>
#include <cerrno>

namespace galay::detail {

FileTransferAwaitable::FileTransferAwaitable(const IoOp& op, FileXfer mode,
                                             std::error_code precheck) noexcept
    : precheck_(precheck)
    , mode_(mode) {
    op_ = op;
}

Result<std::size_t> FileTransferAwaitable::result() {
    if (precheck_) return std::unexpected(precheck_);
    return file_transfer_result(op_, mode_);
}

FileSyncAwaitable::FileSyncAwaitable(const IoOp& op, std::error_code precheck) noexcept
    : precheck_(precheck) {
    op_ = op;
}

Result<void> FileSyncAwaitable::result() {
    if (precheck_) return std::unexpected(precheck_);
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    return {};
}

Result<std::size_t> file_transfer_result(const IoOp& op, FileXfer mode) noexcept {
    if (op.result < 0) return fail(static_cast<int>(-op.result));
    const auto n = static_cast<std::size_t>(op.result);
    if (n < op.len) {
        if (mode == FileXfer::exact) return fail(errc::unexpected_eof);
        // A write that stops short without an error (an O_DIRECT write is not continued, see
        // prepare_transfer) ran out of room on the device.
        if (mode == FileXfer::all) return fail(ENOSPC);
    }
    return n;
}

} // namespace galay::detail

namespace galay::fs {
namespace {

using detail::IoOp;
using detail::OpCode;

// Linux moves at most this much in one read/write (MAX_RW_COUNT); it is page-aligned, so a
// clamped O_DIRECT transfer stays aligned.
constexpr std::size_t kMaxTransfer = 0x7ffff000;

bool aligned(std::uint64_t v, std::uint32_t block) noexcept {
    return v % block == 0;
}

std::uint32_t lookup_block_size(int fd) noexcept {
#if GALAY_HAVE_O_DIRECT // (only a direct file asks)
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISBLK(st.st_mode)) {
        int sector = 0;
        if (::ioctl(fd, BLKSSZGET, &sector) == 0 && sector > 0)
            return static_cast<std::uint32_t>(sector);
    }
    struct statx sx {};
    if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
        (sx.stx_mask & STATX_DIOALIGN) != 0 && sx.stx_dio_offset_align != 0)
        return std::max(sx.stx_dio_offset_align, sx.stx_dio_mem_align);
#endif
    // No direct-I/O alignment reported (kernels before 6.1, tmpfs): the filesystem block size is
    // a safe upper bound of the logical block size.
    struct statvfs vfs {};
    if (::fstatvfs(fd, &vfs) == 0 && vfs.f_bsize >= 512 && vfs.f_bsize <= 4096 &&
        std::has_single_bit(vfs.f_bsize))
        return static_cast<std::uint32_t>(vfs.f_bsize);
    return 4096;
}

} // namespace

std::string describe_error(const std::filesystem::path& path, std::error_code ec) {
    std::string s = path.string() + ": " + ec.message();
    if (ec == errc::direct_io_unsupported)
        s += " (tmpfs before Linux 6.6 and some FUSE and network filesystems refuse it; use a "
             "directory on a local disk filesystem such as ext4 or xfs, e.g. /var/tmp)";
    else if (ec == std::errc::no_such_file_or_directory && !path.has_filename())
        s += " (the directory does not exist)";
    return s;
}

File::File(int fd) noexcept
    : fd_(fd) {
    if (fd < 0) return;
    direct_ = platform::is_direct(fd);
    if (direct_) block_size_ = lookup_block_size(fd);
}

File::File(int fd, Buffered) noexcept
    : fd_(fd) {}

Result<File> File::open(const std::filesystem::path& path, const OpenOptions& o) {
    if (!o.read && !o.write) return fail(EINVAL);
    if (o.truncate && !o.write) return fail(EINVAL);
    int flags = O_CLOEXEC | (o.read && o.write ? O_RDWR : o.write ? O_WRONLY : O_RDONLY);
    if (o.create) flags |= O_CREAT;
    if (o.truncate) flags |= O_TRUNC;
    if (o.append) flags |= O_APPEND;
    if (o.direct) {
        if (!GALAY_HAVE_DIRECT_IO) return fail(errc::not_supported);
        flags |= platform::kODirect;
    }
    const int fd = ::open(path.c_str(), flags, static_cast<mode_t>(o.mode));
    if (fd < 0) {
        const int err = errno;
        if (err == EINVAL && o.direct) {
            // open(2) says only EINVAL; find out whether O_DIRECT is what the filesystem refused.
            const int probe =
                ::open(path.c_str(), flags & ~(platform::kODirect | O_CREAT | O_TRUNC));
            if (probe >= 0) {
                ::close(probe);
                return fail(errc::direct_io_unsupported);
            }
        }
        return fail(err);
    }
    File f;
    f.fd_ = OwnedFd(fd);
    if (o.direct && platform::set_direct(fd) < 0) return fail(errno); // (f closes fd)
    f.direct_ = o.direct;
    if (o.direct) f.block_size_ = lookup_block_size(fd);
    return f;
}

std::size_t File::logical_block_size() const noexcept {
    if (block_size_ == 0 && fd_.get() >= 0) block_size_ = lookup_block_size(fd_.get());
    return block_size_ == 0 ? 512 : block_size_;
}

std::error_code File::prepare_transfer(IoOp& op, OpCode code, const void* buf, std::size_t len,
                                       std::uint64_t offset, detail::FileXfer mode,
                                       int fixed_slot) const noexcept {
    op.code = code;
    op.fixed_buffer = fixed_slot >= 0;
    op.aux = op.fixed_buffer ? static_cast<std::uint64_t>(fixed_slot) : 0;
    op.fd = fd_.get();
    op.buf = const_cast<void*>(buf);
    op.len = static_cast<std::uint32_t>(std::min(len, kMaxTransfer));
    op.offset = offset;
    op.direct = direct_;
    // An O_DIRECT transfer is never continued: a short read ends at the end of the file (going on
    // at the unaligned end would fail with EINVAL) and a short write means the device is full.
    op.all = mode != detail::FileXfer::some && !direct_;
    if (fd_.get() < 0) return errno_code(EBADF);
    // read_at/write_at move part of a larger buffer, as pread/pwrite do; the exact/all forms
    // must not report success for the first 2 GiB only.
    if (mode != detail::FileXfer::some && len > kMaxTransfer)
        return make_error_code(errc::transfer_too_large);
    if (direct_) {
        const auto block = static_cast<std::uint32_t>(logical_block_size());
        if (!aligned(reinterpret_cast<std::uintptr_t>(buf), block) || !aligned(offset, block) ||
            !aligned(len, block))
            return make_error_code(errc::misaligned_direct_io);
    }
    return {};
}

std::error_code File::prepare_vector(IoOp& op, OpCode code, std::span<const iovec> iov,
                                     std::uint64_t offset) const noexcept {
    op.code = code;
    op.fd = fd_.get();
    op.buf = const_cast<iovec*>(iov.data());
    op.len = static_cast<std::uint32_t>(iov.size());
    op.offset = offset;
    op.direct = direct_;
    if (fd_.get() < 0) return errno_code(EBADF);
    if (direct_) {
        const auto block = static_cast<std::uint32_t>(logical_block_size());
        if (!aligned(offset, block)) return make_error_code(errc::misaligned_direct_io);
        for (const iovec& v : iov)
            if (!aligned(reinterpret_cast<std::uintptr_t>(v.iov_base), block) ||
                !aligned(v.iov_len, block))
                return make_error_code(errc::misaligned_direct_io);
    }
    return {};
}

std::error_code File::prepare_sync(IoOp& op, OpCode code) const noexcept {
    op.code = code;
    op.fd = fd_.get();
    op.direct = direct_;
    if (fd_.get() < 0) return errno_code(EBADF);
    return {};
}

detail::FileTransferAwaitable File::transfer(OpCode code, const void* buf, std::size_t len,
                                             std::uint64_t offset, detail::FileXfer mode,
                                             int fixed_slot) const noexcept {
    IoOp op;
    std::error_code pre = prepare_transfer(op, code, buf, len, offset, mode, fixed_slot);
    return detail::FileTransferAwaitable(op, mode, pre);
}

int File::fixed_slot(const FixedSlice& buf) noexcept {
    const detail::BufferRegistration* r = buf.reg_;
    if (r == nullptr || r->driver == nullptr) return -1;
    Scheduler* s = Scheduler::current();
    // Registered with another thread's ring: a plain operation here.
    if (s == nullptr || &detail::SchedulerAccess::driver(*s) != r->driver) return -1;
    return r->slot;
}

detail::FileTransferAwaitable File::read_at(FixedSlice buf, std::uint64_t offset) const noexcept {
    return transfer(OpCode::read_at, buf.data(), buf.size(), offset, detail::FileXfer::some,
                    fixed_slot(buf));
}

detail::FileTransferAwaitable File::read_exact_at(FixedSlice buf,
                                                  std::uint64_t offset) const noexcept {
    return transfer(OpCode::read_at, buf.data(), buf.size(), offset, detail::FileXfer::exact,
                    fixed_slot(buf));
}

detail::FileTransferAwaitable File::write_at(FixedSlice buf, std::uint64_t offset) const noexcept {
    return transfer(OpCode::write_at, buf.data(), buf.size(), offset, detail::FileXfer::some,
                    fixed_slot(buf));
}

detail::FileTransferAwaitable File::write_all_at(FixedSlice buf,
                                                 std::uint64_t offset) const noexcept {
    return transfer(OpCode::write_at, buf.data(), buf.size(), offset, detail::FileXfer::all,
                    fixed_slot(buf));
}

detail::FileTransferAwaitable File::readv_at(std::span<const iovec> iov,
                                             std::uint64_t offset) const noexcept {
    IoOp op;
    std::error_code pre = prepare_vector(op, OpCode::readv_at, iov, offset);
    return detail::FileTransferAwaitable(op, detail::FileXfer::some, pre);
}

detail::FileTransferAwaitable File::writev_at(std::span<const iovec> iov,
                                              std::uint64_t offset) const noexcept {
    IoOp op;
    std::error_code pre = prepare_vector(op, OpCode::writev_at, iov, offset);
    return detail::FileTransferAwaitable(op, detail::FileXfer::some, pre);
}

detail::FileSyncAwaitable File::fsync() const noexcept {
    IoOp op;
    std::error_code pre = prepare_sync(op, OpCode::fsync);
    return detail::FileSyncAwaitable(op, pre);
}

detail::FileSyncAwaitable File::fdatasync() const noexcept {
    IoOp op;
    std::error_code pre = prepare_sync(op, OpCode::fdatasync);
    return detail::FileSyncAwaitable(op, pre);
}

detail::FileSyncAwaitable File::fallocate(int mode, std::uint64_t offset,
                                          std::uint64_t len) const noexcept {
    IoOp op;
    std::error_code pre = prepare_sync(op, OpCode::fallocate);
    // posix_fallocate has none of Linux's modes (FALLOC_FL_KEEP_SIZE, PUNCH_HOLE ...).
    if (!GALAY_LINUX_CALLS && mode != 0 && !pre) pre = make_error_code(errc::not_supported);
    op.msg_flags = mode;
    op.offset = offset;
    op.aux = len;
    return detail::FileSyncAwaitable(op, pre);
}

detail::FileSyncAwaitable File::close() noexcept {
    IoOp op;
    std::error_code pre = prepare_sync(op, OpCode::close);
    (void)fd_.take(); // the close op owns it now
    return detail::FileSyncAwaitable(op, pre);
}

Result<void> File::truncate(std::uint64_t length) const noexcept {
    if (::ftruncate(fd_.get(), static_cast<off_t>(length)) < 0) return fail(errno);
    return {};
}

Result<std::uint64_t> File::size() const noexcept {
    struct stat st {};
    if (::fstat(fd_.get(), &st) < 0) return fail(errno);
#if defined(BLKGETSIZE64) // (a block device elsewhere: its st_size, or lseek)
    if (S_ISBLK(st.st_mode)) {
        std::uint64_t bytes = 0;
        if (::ioctl(fd_.get(), BLKGETSIZE64, &bytes) < 0) return fail(errno);
        return bytes;
    }
#endif
    return static_cast<std::uint64_t>(st.st_size);
}

} // namespace galay::fs
