// Submitting one-shot ops: `submit` routes each op (UDP batches, multishot accept, pooled recv,
// closes, registered files), `prep` turns it into an SQE (`prep_plain`: one switch over the op
// codes; fault injection may replace it by a NOP), and `cancel` asks the kernel to stop one.
#include "driver/uring/uring_driver.hpp"

#include "driver/common/faults.hpp"
#include "driver/fs_ops.hpp"
#include "driver/mmsg.hpp"
#include "driver/process_ops.hpp"
#include "galay/owned_fd.hpp" // forget_fd_everywhere

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace galay::detail {

bool UringDriver::submit(IoOp& op) {
    if (remote_forgets_.pending()) drain_remote_forgets();
    if (is_mmsg(op.code) && attempt_mmsg(op)) return true; // see driver/mmsg.hpp
    if (is_namespace_op(op.code) && !uring_fs_op_supported(op.code)) {
        op.result = -EOPNOTSUPP; // the caller runs it on the blocking pool (see fs_ops.hpp)
        return true;
    }
    if (op.code == OpCode::accept && multishot_accept_) {
        own(op.fd, state(op.fd)); // the armed accept holds the listener: closes come here
        return accepts_.submit(op);
    }
    if (op.code == OpCode::recv_pooled && buf_ring_ != nullptr) return submit_pooled(op);
    if (op.code == OpCode::recv_pooled) { // no buffer rings: a plain recv into a pool buffer
        int id = pool_->take();
        if (id < 0) {
            SchedulerAccess::counters(sched_).enobufs.add();
            op.result = -ENOBUFS;
            return true;
        }
        op.aux = static_cast<std::uint64_t>(id);
        op.buf = pool_->address(static_cast<std::uint16_t>(id));
        op.len = pool_->size();
    }
    if (op.code == OpCode::close)
        forget_fd_everywhere(op.fd); // (clears a registered slot before the close runs)
    else if (registers_file(op.code))
        register_file(op.fd, op.code == OpCode::recv || op.code == OpCode::send);
    else if (op.code == OpCode::accept && op.fd >= 0)
        own(op.fd, state(op.fd)); // the pending accept holds the listener: see close_fd
    prep(op);
    op.pending = true;
    ++in_flight_;
    if (op.fd >= 0) ++state(op.fd).ops;
    return false;
}

void UringDriver::cancel(IoOp& op) {
    if (!op.pending) return;
    if (op.code == OpCode::accept && multishot_accept_) return accepts_.cancel(op);
    if (op.code == OpCode::recv_pooled && buf_ring_ != nullptr) {
        // Only the wait is cancelled: the multishot recv stays armed and whatever arrives
        // is queued for the next call.
        Received& r = rx_[static_cast<std::size_t>(op.fd)];
        if (r.waiter != &op) return;
        r.waiter = nullptr;
        op.result = -ECANCELED;
        SchedulerAccess::complete(sched_, op);
        return;
    }
    io_uring_sqe* e = sqe();
    io_uring_prep_cancel64(e, reinterpret_cast<std::uint64_t>(&op), 0);
    io_uring_sqe_set_data64(e, kIgnoreTag);
}

void UringDriver::prep(IoOp& op) {
    io_uring_sqe* e = sqe();
    std::uint32_t len = op.remaining();
    if (faults::on()) [[unlikely]] {
        if (inject(e, op, len)) return;
    }
    // fs::FixedBuffer: READ_FIXED / WRITE_FIXED when the op lies inside its registration.
    const bool prepared = op.fixed_buffer && fixed_.prep(e, op);
    if (!prepared) prep_plain(e, op, len);
    // (a waitid's pidfd and an AsyncFd's descriptor are never registered slots of ours)
    fixed_file(op) = op.code != OpCode::close && op.code != OpCode::waitid &&
                     op.code != OpCode::poll && uses_fixed(op.fd);
    if (fixed_file(op)) e->flags |= IOSQE_FIXED_FILE; // slot number == fd
    io_uring_sqe_set_data(e, &op);
}

/// Replace this issue of `op` by a fault: a NOP whose CQE carries the injected error (true),
/// or a shorter `len`. EAGAIN is not injected into file ops: a real one comes from an
/// O_NONBLOCK file and is reported, not retried (it would come back every time).
bool UringDriver::inject(io_uring_sqe* e, IoOp& op, std::uint32_t& len) {
    if (shutting_down_ || !retried_when_interrupted(op.code)) return false;
    int err = faults::refusal(op.code);
    if (err == 0 && faults::hit(faults::Kind::canceled, op.code)) err = ECANCELED;
    if (err == EAGAIN && is_file_op(op.code)) err = EINTR;
    if (err != 0) {
        io_uring_prep_nop(e);
        io_uring_sqe_set_data(e, &op);
        fixed_file(op) = false;
        injected_.push_back({&op, -err});
        return true;
    }
    const bool has_len =
        is_contiguous(op.code) && (!is_file_op(op.code) || (!op.direct && !op.fixed_buffer));
    if (has_len && len > 1 && faults::hit(faults::Kind::short_transfer, op.code))
        len = faults::shorter(len);
    return false;
}

/// The result an injected NOP stands for (its own CQE says 0).
std::int32_t UringDriver::injected_result(IoOp* op, std::int32_t res) noexcept {
    for (std::size_t i = 0; i < injected_.size(); ++i) {
        if (injected_[i].op != op) continue;
        res = injected_[i].res;
        injected_[i] = injected_.back();
        injected_.pop_back();
        break;
    }
    return res;
}

void UringDriver::prep_plain(io_uring_sqe* e, IoOp& op, std::uint32_t len) {
    switch (op.code) {
    case OpCode::accept:
        io_uring_prep_accept(e, op.fd, op.address(),
                             reinterpret_cast<socklen_t*>(op.address_length()),
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
        break;
    case OpCode::connect:
        io_uring_prep_connect(e, op.fd, op.address(), op.len);
        break;
    case OpCode::recv:
    case OpCode::recv_pooled: // (without buffer rings: into the pool buffer set in submit)
        io_uring_prep_recv(e, op.fd, op.cursor(), len, op.msg_flags);
        break;
    case OpCode::send:
        io_uring_prep_send(e, op.fd, op.cursor(), len, op.msg_flags | MSG_NOSIGNAL);
        break;
    case OpCode::send_zc: // send_zc.cpp; a plain send where the kernel lacks SEND_ZC
        if (uring_send_zc_supported())
            io_uring_prep_send_zc(e, op.fd, op.cursor(), len, op.msg_flags | MSG_NOSIGNAL, 0);
        else
            io_uring_prep_send(e, op.fd, op.cursor(), len, op.msg_flags | MSG_NOSIGNAL);
        break;
    case OpCode::recvmsg:
        io_uring_prep_recvmsg(e, op.fd, static_cast<msghdr*>(op.buf), op.msg_flags);
        break;
    case OpCode::sendmsg:
        io_uring_prep_sendmsg(e, op.fd, static_cast<const msghdr*>(op.buf),
                              op.msg_flags | MSG_NOSIGNAL);
        break;
    case OpCode::close:
        io_uring_prep_close(e, op.fd);
        break;
    case OpCode::read_at:
        io_uring_prep_read(e, op.fd, op.cursor(), len, op.offset + op.done);
        break;
    case OpCode::write_at:
        io_uring_prep_write(e, op.fd, op.cursor(), len, op.offset + op.done);
        break;
    case OpCode::readv_at:
        io_uring_prep_readv(e, op.fd, static_cast<const iovec*>(op.buf), op.len, op.offset);
        break;
    case OpCode::writev_at:
        io_uring_prep_writev(e, op.fd, static_cast<const iovec*>(op.buf), op.len, op.offset);
        break;
    case OpCode::fsync:
        io_uring_prep_fsync(e, op.fd, 0);
        break;
    case OpCode::fdatasync:
        io_uring_prep_fsync(e, op.fd, IORING_FSYNC_DATASYNC);
        break;
    case OpCode::fallocate:
        io_uring_prep_fallocate(e, op.fd, op.msg_flags, op.offset, op.aux);
        break;
    case OpCode::recvmmsg: // wait for readiness, then the system call (mmsg_ready)
    case OpCode::splice_in:
        io_uring_prep_poll_add(e, op.fd, POLLIN);
        break;
    case OpCode::sendmmsg:
    case OpCode::splice_out:
    case OpCode::sendfile:
        io_uring_prep_poll_add(e, op.fd, POLLOUT);
        break;
    case OpCode::poll: { // AsyncFd: one-shot, checked at once (level); res = the revents
        // io_uring leaves EPOLLPRI out when it matches a wake-up's events against the poll's,
        // so a poll for POLLPRI alone misses TCP urgent data; the socket's wake-up also names
        // POLLRDBAND, which TCP reports only with urgent data.
        unsigned events = static_cast<unsigned>(op.msg_flags);
        if (events & POLLPRI) events |= POLLRDBAND;
        io_uring_prep_poll_add(e, op.fd, events);
        break;
    }
    case OpCode::read:
    case OpCode::write:
    case OpCode::waitid:
        prep_process_op(e, op, len); // process_ops.cpp
        break;
    case OpCode::openat:
    case OpCode::statx:
    case OpCode::renameat:
    case OpCode::unlinkat:
    case OpCode::mkdirat:
    case OpCode::linkat:
    case OpCode::symlinkat:
        prep_fs_op(e, op); // fs_ops.cpp
        break;
    }
}

} // namespace galay::detail
