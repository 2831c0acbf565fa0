// splice(2) between a socket and a pipe, for io::copy's relay, and sendfile(2) from a file to a
// socket, for fs::File::send_to; shared by the epoll and io_uring drivers.
//
// io_uring's IORING_OP_SPLICE always runs in an io-wq worker thread (the kernel forces it async),
// a thread hop per splice. So both drivers wait for the socket's readiness (epoll, or a one-shot
// IORING_OP_POLL_ADD) and then call splice(2) with SPLICE_F_NONBLOCK on the scheduler's thread,
// as they do for the UDP batches (driver/mmsg.hpp). sendfile has no io_uring opcode; it runs the
// same way. Without Linux's splice and sendfile (the POSIX profile, macOS, FreeBSD) io::copy takes
// its copy through a buffer and never makes a splice op, and sendfile reads the file into a
// per-thread buffer and sends it: a copy through user space, on the same readiness.
#pragma once

#include "galay/detail/io_op.hpp"
#include "platform/fd_calls.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#if GALAY_HAVE_LINUX_SENDFILE
#include <sys/sendfile.h>
#endif

#include <algorithm>
#include <cerrno>

namespace galay::detail {

#if GALAY_HAVE_SPLICE || GALAY_HAVE_LINUX_SENDFILE
/// splice(2) and sendfile(2) into a socket whose peer is gone raise SIGPIPE (they take no
/// MSG_NOSIGNAL): block it around the call, and take the pending signal back on EPIPE.
class SigpipeBlock {
public:
    explicit SigpipeBlock(bool active) noexcept
        : active_(active) {
        if (!active_) return;
        sigemptyset(&pipe_only_);
        sigaddset(&pipe_only_, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_only_, &old_);
    }
    /// Restores the mask; `err` is the call's errno (EPIPE: discard the signal it raised).
    void done(bool failed, int err) noexcept {
        if (!active_) return;
        if (failed && err == EPIPE && !sigismember(&old_, SIGPIPE)) {
            const timespec zero{};
            (void)sigtimedwait(&pipe_only_, nullptr, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }

private:
    bool active_;
    sigset_t pipe_only_{}, old_{};
};
#endif

/// Run the op's splice once its socket is ready. Returns true when the op is finished
/// (`op.result`: bytes moved, 0 = EOF for splice_in, or -errno), false when it would block.
inline bool attempt_splice(IoOp& op) noexcept {
#if !GALAY_HAVE_SPLICE
    op.result = -EOPNOTSUPP; // (io::copy never splices here: not reached)
    return true;
#else
    const int pipe_end = static_cast<int>(op.aux);
    const bool in = op.code == OpCode::splice_in;
    SigpipeBlock guard(!in);
    ssize_t r;
    do {
        r = in ? ::splice(op.fd, nullptr, pipe_end, nullptr, op.len,
                          SPLICE_F_NONBLOCK | SPLICE_F_MOVE)
               : ::splice(pipe_end, nullptr, op.fd, nullptr, op.len,
                          SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    } while (r < 0 && errno == EINTR);
    const int err = errno;
    guard.done(r < 0, err);
    if (r < 0 && (err == EAGAIN || err == EWOULDBLOCK)) return false;
    op.result = r < 0 ? -err : r;
    return true;
#endif
}

/// Run the op's sendfile(2) (file `aux` from `offset + done` to socket `fd`) until `len` bytes
/// went out, the file ended (sendfile returns 0: a file shorter than asked, truncated
/// meanwhile), or the socket would block (returns false; `done` keeps what moved). Finished:
/// `op.result` = bytes sent, or -errno.
inline bool attempt_sendfile(IoOp& op) noexcept {
#if !GALAY_HAVE_LINUX_SENDFILE
    static thread_local char buf[64 * 1024];
    ssize_t r = 0;
    int err = 0;
    while (op.done < op.len) {
        const std::size_t want = std::min<std::size_t>(op.len - op.done, sizeof buf);
        const ssize_t got =
            ::pread(static_cast<int>(op.aux), buf, want, static_cast<off_t>(op.offset + op.done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) { // the file ended (0), or cannot be read
            r = got;
            err = errno;
            break;
        }
        r = ::send(op.fd, buf, static_cast<std::size_t>(got), platform::kSendNoSignal);
        err = errno;
        if (r < 0 && err == EINTR) continue;
        if (r <= 0) break;
        op.done += static_cast<std::uint32_t>(r); // (a part sent: the rest is read again)
    }
#else
    SigpipeBlock guard(true);
    ssize_t r = 0;
    int err = 0;
    while (op.done < op.len) {
        off_t at = static_cast<off_t>(op.offset + op.done);
        r = ::sendfile(op.fd, static_cast<int>(op.aux), &at, op.len - op.done);
        err = errno;
        if (r < 0 && err == EINTR) continue;
        if (r <= 0) break;
        op.done += static_cast<std::uint32_t>(r);
    }
    guard.done(r < 0, err);
#endif
    if (r < 0 && (err == EAGAIN || err == EWOULDBLOCK)) return false;
    op.result = r < 0 ? -err : static_cast<std::int64_t>(op.done);
    return true;
}

} // namespace galay::detail
