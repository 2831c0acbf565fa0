// Zero-copy sends on a readiness driver: send(2) with MSG_ZEROCOPY, then the kernel's completion
// notification read from the socket's error queue (recvmsg MSG_ERRQUEUE, signalled by EPOLLERR).
// The op completes only after that notification: until then the kernel may still read the
// caller's buffer. One zero-copy send is outstanding per op at a time, so any notification the
// socket reports while the op waits is this op's (one sender per socket at a time, as for every
// send).
#pragma once

#include "galay/detail/io_op.hpp"
#include "platform/fd_calls.hpp"

#if GALAY_HAVE_LINUX_SOCKETS
#include <linux/errqueue.h>
#endif
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace galay::detail {

#if GALAY_HAVE_LINUX_SOCKETS
/// MSG_ZEROCOPY's send flag.
inline constexpr int kMsgZeroCopy = MSG_ZEROCOPY;

/// Asks for zero-copy sends on `fd` (without it MSG_ZEROCOPY is ignored). True when accepted.
inline bool enable_zero_copy(int fd) noexcept {
    int one = 1;
    return ::setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) == 0;
}

/// MSG_ZEROCOPY works on this kernel (SO_ZEROCOPY accepted on a TCP socket), probed once.
inline bool msg_zerocopy_supported() noexcept {
    static const bool ok = [] {
        const int s = platform::socket_cloexec(AF_INET, SOCK_STREAM, 0, false);
        if (s < 0) return false;
        const bool r = enable_zero_copy(s);
        ::close(s);
        return r;
    }();
    return ok;
}

/// One notification from `fd`'s error queue: 1 when a zero-copy completion was read, -EAGAIN
/// when there is none yet, another -errno for an error the queue reported instead.
inline int read_zero_copy_notification(int fd) noexcept {
    for (;;) {
        alignas(cmsghdr) char control[128];
        msghdr msg{};
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        const ssize_t r = ::recvmsg(fd, &msg, MSG_ERRQUEUE);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
            const bool recverr = (cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
                                 (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR);
            if (!recverr) continue;
            const auto* ee = reinterpret_cast<const sock_extended_err*>(CMSG_DATA(cm));
            if (ee->ee_origin == SO_EE_ORIGIN_ZEROCOPY) return 1;
            if (ee->ee_errno != 0) return -static_cast<int>(ee->ee_errno);
        }
    }
}

#else
// MSG_ZEROCOPY is Linux's: elsewhere (and in the POSIX profile) a send_zc copies like a send, and
// no notification is ever awaited (op.aux stays 0).
inline constexpr int kMsgZeroCopy = 0;
inline bool enable_zero_copy(int) noexcept {
    return false;
}
inline bool msg_zerocopy_supported() noexcept {
    return false;
}
inline int read_zero_copy_notification(int) noexcept {
    return -EOPNOTSUPP;
}
#endif

/// Run a send_zc op on its non-blocking socket. `op.aux` != 0 while bytes sent with
/// MSG_ZEROCOPY await their notification. Returns true when the op is finished (`op.result`),
/// false when it waits (for room in the socket, or for the notification).
inline bool attempt_send_zc(IoOp& op) noexcept {
    for (;;) {
        if (op.aux != 0) {
            const int n = read_zero_copy_notification(op.fd);
            if (n == -EAGAIN) return false;
            op.aux = 0;
            if (n < 0) {
                op.result = n;
                return true;
            }
            if (!op.all || op.done >= op.len) {
                op.result = op.done;
                return true;
            }
        }
        // Without SO_ZEROCOPY on the socket, MSG_ZEROCOPY is ignored and no notification comes.
        const bool zc = msg_zerocopy_supported() && enable_zero_copy(op.fd);
        ssize_t r;
        do {
            r = ::send(op.fd, op.cursor(), op.remaining(),
                       op.msg_flags | platform::kSendNoSignal | (zc ? kMsgZeroCopy : 0));
        } while (r < 0 && errno == EINTR);
        bool copied = !zc;
        if (r < 0 && errno == ENOBUFS && zc) { // over the socket's optmem limit: copy this piece
            do {
                r = ::send(op.fd, op.cursor(), op.remaining(),
                           op.msg_flags | platform::kSendNoSignal);
            } while (r < 0 && errno == EINTR);
            copied = true;
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
            op.result = -errno;
            return true;
        }
        op.done += static_cast<std::uint32_t>(r);
        if (!copied && r > 0) {
            op.aux = 1; // read the notification (often there at once on loopback)
            continue;
        }
        if (!op.all || op.done >= op.len) {
            op.result = op.done;
            return true;
        }
    }
}

} // namespace galay::detail
