// Batched datagram system calls (recvmmsg/sendmmsg) for the UDP batch ops, shared by the epoll
// and io_uring drivers.
//
// io_uring has no recvmmsg/sendmmsg opcode. For batches it tries the system call at once and,
// when the socket would block, waits for readiness with a one-shot IORING_OP_POLL_ADD and then
// issues the same system call the epoll driver does: one system call moves up to 64 datagrams.
// On raw liburing the multishot RECVMSG shapes cost the same CPU per packet within the noise
// (linking the sends costs more), and they would need 64 KiB ring buffers once UDP_GRO is on
// plus a copy out of the ring, so the simplest shape stays (docs/benchmarks/udp.md). Without
// recvmmsg/sendmmsg (the POSIX profile, macOS) a batch is one recvmsg/sendmsg per datagram.
#pragma once

#include "driver/common/faults.hpp"
#include "driver/common/op_traits.hpp"
#include "driver/splice.hpp"
#include "galay/detail/io_op.hpp"
#include "platform/mmsghdr.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace galay::detail {

/// recvmmsg (`recv`) or sendmmsg of up to `n` messages on a non-blocking socket: the number
/// moved (>= 1), or -1 with errno (EAGAIN when not even the first could go).
inline int mmsg_call(bool recv, int fd, platform::mmsghdr* msgs, unsigned n, int flags) noexcept {
#if GALAY_HAVE_MMSG
    return recv ? ::recvmmsg(fd, msgs, n, flags, nullptr)
                : ::sendmmsg(fd, msgs, n, flags | platform::kSendNoSignal);
#else
    unsigned i = 0;
    for (; i < n; ++i) {
        const ssize_t r = recv ? ::recvmsg(fd, &msgs[i].msg_hdr, flags)
                               : ::sendmsg(fd, &msgs[i].msg_hdr, flags | platform::kSendNoSignal);
        if (r < 0) {
            if (errno == EINTR) {
                --i;
                continue;
            }
            if (i == 0) return -1;
            break; // what moved counts; the error comes again on the next call
        }
        msgs[i].msg_len = static_cast<unsigned>(r);
    }
    return static_cast<int>(i);
#endif
}

/// Run the op's recvmmsg/sendmmsg on its non-blocking socket. Returns true when the op is
/// finished (`op.result` set), false when the socket would block. A send batch the socket could
/// not take whole continues from where it stopped (`op.done` datagrams already sent).
/// `injected_block` (fault injection): set when the EAGAIN was injected, not the socket's.
inline bool attempt_mmsg(IoOp& op, bool* injected_block = nullptr) noexcept {
    if (op.code == OpCode::splice_in || op.code == OpCode::splice_out) return attempt_splice(op);
    if (op.code == OpCode::sendfile) return attempt_sendfile(op);
    auto* msgs = static_cast<platform::mmsghdr*>(op.buf);
    for (;;) {
        unsigned n = op.code == OpCode::recvmmsg ? op.len : op.len - op.done;
        int r;
        int fake = 0;
        if (faults::on()) [[unlikely]] {
            fake = faults::refusal(op.code);
            if (fake == EAGAIN && injected_block != nullptr) *injected_block = true;
            if (fake == 0 && n > 1 && faults::hit(faults::Kind::short_transfer, op.code))
                n = faults::shorter(n); // fewer datagrams
        }
        if (fake != 0) {
            errno = fake;
            r = -1;
        } else {
            r = op.code == OpCode::recvmmsg
                    ? mmsg_call(true, op.fd, msgs, n, op.msg_flags)
                    : mmsg_call(false, op.fd, msgs + op.done, n, op.msg_flags);
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
            if (errno == EINTR) continue;
            op.absorb(-errno);
            return true;
        }
        if (op.absorb(r)) continue; // part of a send batch left: try the rest at once
        return true;
    }
}

} // namespace galay::detail
