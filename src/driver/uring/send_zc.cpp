// IORING_OP_SEND_ZC for OpCode::send_zc: the send's CQE carries its result and
// IORING_CQE_F_MORE when a notification CQE (IORING_CQE_F_NOTIF) follows, posted once the kernel
// no longer reads the buffer. The op completes on that second CQE, never before. The opcode is
// probed once per process; without it the op is a plain send.
#include "driver/uring/uring_driver.hpp"

#include <liburing.h>

namespace galay::detail {

bool uring_send_zc_supported() noexcept {
    static const bool supported = [] {
        io_uring ring;
        if (io_uring_queue_init(2, &ring, 0) < 0) return false;
        bool ok = false;
        if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
            ok = io_uring_opcode_supported(probe, IORING_OP_SEND_ZC) != 0;
            io_uring_free_probe(probe);
        }
        io_uring_queue_exit(&ring);
        return ok;
    }();
    return supported;
}

bool UringDriver::send_zc_cqe(IoOp& op, std::int32_t& res, std::uint32_t flags) noexcept {
    if ((flags & IORING_CQE_F_NOTIF) != 0) {
        res = static_cast<std::int32_t>(op.result); // the send's own result, kept meanwhile
        return true;
    }
    if ((flags & IORING_CQE_F_MORE) != 0) {
        op.result = res; // the buffer is still the kernel's: wait for the notification
        return false;
    }
    return true; // no notification follows (the send failed before taking the buffer)
}

} // namespace galay::detail
