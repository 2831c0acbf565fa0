// OpCode::poll (AsyncFd's readiness wait) on a readiness driver. When it is submitted, ask the
// descriptor with a poll(2) that does not block: the answer is the level, so a wait completes
// at once while the descriptor is ready (its owner need not have read until EAGAIN). When the
// poller reports the descriptor, epoll's event is the level already (it asks the file again as
// it reports it), so the wait completes on its bits; it is trusted only when it comes from the
// descriptor's current registration, so an event for an earlier file of the same number (kept
// in the set by a dup elsewhere) completes nothing. kqueue's events are asked again by poll(2).
#pragma once

#include "galay/detail/io_op.hpp"

#include <poll.h>

#include <cerrno>
#include <cstdint>

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

/// A poll op's events hold in `revents`, the level the poller reported for the descriptor's
/// current registration (poll(2)'s values): true with op.result = what holds of them, errors and
/// hang-ups included as poll(2) reports them; false when it must wait.
inline bool poll_from_event(IoOp& op, std::uint32_t revents) noexcept {
    const std::uint32_t held =
        revents & (static_cast<std::uint32_t>(op.msg_flags) | POLLERR | POLLHUP);
    if (held == 0) return false;
    op.result = static_cast<unsigned short>(held);
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
