// The ops of pipes and child processes, shared by both drivers: `read`/`write` on a pipe and
// `waitid` on a pidfd. A pipe end galay opens is in blocking mode (a child inherits it as its
// stdin or stdout, and io_uring waits on such a file by itself), so the epoll driver asks for a
// non-blocking transfer per call (RWF_NOWAIT) and waits for readiness when it would block.
// Without RWF_NOWAIT and pidfds (the POSIX profile, macOS, FreeBSD): a zero-timeout poll says
// whether the transfer can go now (a write then moves at most PIPE_BUF bytes, which a writable
// pipe takes without blocking), and `op.fd` is the read end of the child's exit pipe
// (process/exit_watch.hpp), with the child's pid in `op.aux`.
#pragma once

#include "galay/detail/io_op.hpp"
#include "process/exit_watch.hpp"

#include <limits.h>
#include <poll.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdint>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

struct io_uring_sqe;

namespace galay::detail {

/// One non-blocking read or write at the pipe's position; -1 with errno as a system call.
inline ssize_t pipe_transfer(IoOp& op, std::size_t len) noexcept {
#if GALAY_LINUX_CALLS
    iovec v{op.cursor(), len};
    return op.code == OpCode::read ? ::preadv2(op.fd, &v, 1, -1, RWF_NOWAIT)
                                   : ::pwritev2(op.fd, &v, 1, -1, RWF_NOWAIT);
#else
    const bool in = op.code == OpCode::read;
    pollfd p{op.fd, static_cast<short>(in ? POLLIN : POLLOUT), 0};
    const int r = ::poll(&p, 1, 0);
    if (r < 0) return -1;
    if (r == 0) {
        errno = EAGAIN;
        return -1;
    }
    if (in) return ::read(op.fd, op.cursor(), len);
    if ((p.revents & (POLLERR | POLLHUP)) == 0 && len > PIPE_BUF) len = PIPE_BUF;
    return ::write(op.fd, op.cursor(), len); // (a reader gone: EPIPE, SIGPIPE being ignored)
#endif
}

/// Reap the child of pidfd `op.fd` if it has exited (into the siginfo_t at `op.buf`). True when
/// the op is finished (reaped, or failed); false while the child runs: wait for the pidfd to be
/// readable.
inline bool reap_child(IoOp& op) noexcept {
    auto* info = static_cast<siginfo_t*>(op.buf);
    for (;;) {
        info->si_pid = 0;
#if GALAY_HAVE_PIDFD
        const int r = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(op.fd), info,
                               WEXITED | WNOHANG);
#else
        const int r = reap_watched(static_cast<pid_t>(op.aux), info, false);
#endif
        if (r == 0) {
            if (info->si_pid == 0) return false;
            op.result = 0;
            return true;
        }
        if (errno == EINTR) continue;
        op.result = -errno;
        return true;
    }
}

/// io_uring without IORING_OP_WAITID: the readiness poll of a waitid completed with `res`. True
/// when the op is finished, false when the child still runs.
inline bool reap_after_poll(IoOp& op, int res) noexcept {
    if (res < 0) {
        op.result = res; // cancelled, timed out, or the poll failed
        return true;
    }
    if (reap_child(op)) return true;
    if (!op.cancelled) return false;
    op.result = -ECANCELED;
    return true;
}

/// Whether this kernel's io_uring has IORING_OP_WAITID (probed once per process).
bool uring_waitid_supported() noexcept;
/// The SQE of a read, write or waitid (src/driver/uring/process_ops.cpp).
void prep_process_op(io_uring_sqe* e, IoOp& op, std::uint32_t len) noexcept;

} // namespace galay::detail
