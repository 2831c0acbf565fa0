// splice(2) between a socket and a pipe, for io::copy's relay, shared by the epoll and io_uring
// drivers.
//
// io_uring's IORING_OP_SPLICE always runs in an io-wq worker thread (the kernel forces it async),
// a thread hop per splice. So both drivers wait for the socket's readiness (epoll, or a one-shot
// IORING_OP_POLL_ADD) and then call splice(2) with SPLICE_F_NONBLOCK on the scheduler's thread,
// as they do for the UDP batches (driver/mmsg.hpp).
#pragma once

#include "galay/detail/io_op.hpp"

#include <fcntl.h>
#include <signal.h>
#include <time.h>

#include <cerrno>

namespace galay::detail {

/// Run the op's splice once its socket is ready. Returns true when the op is finished
/// (`op.result`: bytes moved, 0 = EOF for splice_in, or -errno), false when it would block.
inline bool attempt_splice(IoOp& op) noexcept {
    const int pipe_end = static_cast<int>(op.aux);
    const bool in = op.code == OpCode::splice_in;
    // splice(2) into a socket whose peer is gone raises SIGPIPE (there is no MSG_NOSIGNAL for
    // it): block it for the call, and take the pending signal back on EPIPE.
    sigset_t pipe_only, old;
    if (!in) {
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    }
    ssize_t r;
    do {
        r = in ? ::splice(op.fd, nullptr, pipe_end, nullptr, op.len,
                          SPLICE_F_NONBLOCK | SPLICE_F_MOVE)
               : ::splice(pipe_end, nullptr, op.fd, nullptr, op.len,
                          SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    } while (r < 0 && errno == EINTR);
    const int err = errno;
    if (!in) {
        if (r < 0 && err == EPIPE && !sigismember(&old, SIGPIPE)) {
            const timespec zero{};
            (void)sigtimedwait(&pipe_only, nullptr, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    if (r < 0 && (err == EAGAIN || err == EWOULDBLOCK)) return false;
    op.result = r < 0 ? -err : r;
    return true;
}

} // namespace galay::detail
