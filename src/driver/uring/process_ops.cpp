// io_uring SQEs for pipes and child processes: READ/WRITE at the pipe's position, and
// IORING_OP_WAITID (Linux 6.7) where the probe finds it, else a poll on the pidfd followed by
// waitid(WNOHANG) in reap.cpp.
#include "driver/process_ops.hpp"

#include <liburing.h>
#include <poll.h>

namespace galay::detail {

namespace {
// The opcode's number: the liburing of the build may predate it (it follows READ_MULTISHOT).
constexpr int kOpWaitid = IORING_OP_SENDMSG_ZC + 2;
} // namespace

bool uring_waitid_supported() noexcept {
    static const bool supported = [] {
        io_uring ring;
        if (io_uring_queue_init(2, &ring, 0) < 0) return false;
        bool ok = false;
        if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
            ok = probe->last_op >= kOpWaitid && io_uring_opcode_supported(probe, kOpWaitid);
            io_uring_free_probe(probe);
        }
        io_uring_queue_exit(&ring);
        return ok;
    }();
    return supported;
}

void prep_process_op(io_uring_sqe* e, IoOp& op, std::uint32_t len) noexcept {
    switch (op.code) {
    case OpCode::read:
        io_uring_prep_read(e, op.fd, op.cursor(), len, static_cast<std::uint64_t>(-1));
        break;
    case OpCode::write:
        io_uring_prep_write(e, op.fd, op.cursor(), len, static_cast<std::uint64_t>(-1));
        break;
    case OpCode::waitid:
        if (!uring_waitid_supported()) {
            io_uring_prep_poll_add(e, op.fd, POLLIN);
            break;
        }
        // As liburing's io_uring_prep_waitid lays it out: id in fd, idtype in len, options in
        // file_index, the siginfo in addr2.
        io_uring_prep_rw(kOpWaitid, e, op.fd, nullptr, P_PIDFD, 0);
        e->rw_flags = 0;
        e->file_index = WEXITED;
        e->addr2 = reinterpret_cast<std::uint64_t>(op.buf);
        break;
    default:
        break;
    }
}

} // namespace galay::detail
