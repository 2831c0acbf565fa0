// The filesystem-namespace ops (openat, statx, renameat, unlinkat, mkdirat, linkat, symlinkat):
// their system calls, for the epoll driver's blocking pool and for the fs layer when a driver
// answers EOPNOTSUPP (an io_uring without that opcode); io_uring runs them as SQEs
// (src/driver/uring/fs_ops.cpp).
#pragma once

#include "galay/detail/io_op.hpp"
#include "galay/detail/platform.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#if GALAY_LINUX_CALLS // SYS_renameat2
#include <sys/syscall.h>
#endif
#include <unistd.h>

#include <cstdint>

struct io_uring_sqe;

namespace galay::detail {

constexpr bool is_namespace_op(OpCode c) noexcept {
    return c >= OpCode::openat && c <= OpCode::symlinkat;
}

/// The second path (or statx's buffer) of a namespace op.
inline const char* second_path(const IoOp& op) noexcept {
    return reinterpret_cast<const char*>(static_cast<std::uintptr_t>(op.aux));
}

/// The op's system call: its result, or -1 with errno.
inline long namespace_syscall(const IoOp& op) noexcept {
    const char* path = static_cast<const char*>(op.buf);
    switch (op.code) {
    case OpCode::openat:
        return ::openat(op.fd, path, op.msg_flags, static_cast<mode_t>(op.len));
#if GALAY_LINUX_CALLS
    case OpCode::statx:
        return ::statx(op.fd, path, op.msg_flags, op.len,
                       reinterpret_cast<struct statx*>(static_cast<std::uintptr_t>(op.aux)));
    case OpCode::renameat:
        return ::syscall(SYS_renameat2, op.fd, path, AT_FDCWD, second_path(op), op.msg_flags);
#else // no statx or renameat2: fstatat into a struct stat, renameat (fs::rename's modes refused)
    case OpCode::statx:
        return ::fstatat(op.fd, path,
                         reinterpret_cast<struct stat*>(static_cast<std::uintptr_t>(op.aux)),
                         op.msg_flags);
    case OpCode::renameat:
        return ::renameat(op.fd, path, AT_FDCWD, second_path(op));
#endif
    case OpCode::unlinkat:
        return ::unlinkat(op.fd, path, op.msg_flags);
    case OpCode::mkdirat:
        return ::mkdirat(op.fd, path, static_cast<mode_t>(op.len));
    case OpCode::linkat:
        return ::linkat(op.fd, path, AT_FDCWD, second_path(op), op.msg_flags);
    case OpCode::symlinkat:
        return ::symlinkat(path, op.fd, second_path(op));
    default:
        errno = EOPNOTSUPP;
        return -1;
    }
}

/// Whether this kernel's io_uring has the opcode of namespace op `c` (one probe per process,
/// remembered per opcode).
bool uring_fs_op_supported(OpCode c) noexcept;
/// The SQE of a namespace op (src/driver/uring/fs_ops.cpp).
void prep_fs_op(io_uring_sqe* e, IoOp& op) noexcept;

} // namespace galay::detail
