// OpCode::poll (AsyncFd's readiness wait) on a readiness driver: ask the descriptor now, with a
// poll(2) that does not block. The answer is the level, so a wait completes at once while the
// descriptor is ready (its owner need not have read until EAGAIN), and a spurious wake-up of
// the queue (an event for an earlier file of the same number) completes nothing.
#pragma once

#include "galay/detail/io_op.hpp"

#include <poll.h>

#include <cerrno>

namespace galay::detail {

/// A poll op's events (msg_flags) hold now: true with op.result = the revents, or -EBADF when
/// the descriptor is closed; false when it must wait.
inline bool poll_now(IoOp& op) noexcept {
    pollfd p{.fd = op.fd, .events = static_cast<short>(op.msg_flags), .revents = 0};
    int n;
    do
        n = ::poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        op.result = -errno;
        return true;
    }
    if (n == 0) return false;
    if (p.revents & POLLNVAL) {
        op.result = -EBADF;
        return true;
    }
    op.result = static_cast<unsigned short>(p.revents);
    return true;
}

/// On a readiness driver, a poll op waits with the readers when it asks for input or priority
/// data, with the writers otherwise.
constexpr bool poll_waits_for_read(const IoOp& op) noexcept {
#ifdef POLLRDHUP // Linux's; elsewhere the peer's shutdown is POLLIN's end of stream
    return (op.msg_flags & (POLLIN | POLLPRI | POLLRDHUP)) != 0;
#else
    return (op.msg_flags & (POLLIN | POLLPRI)) != 0;
#endif
}

} // namespace galay::detail
