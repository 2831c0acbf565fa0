// Buffered files on the epoll backend: a read first tried from the page cache with
// preadv2(RWF_NOWAIT), and everything that may block run on galay's process-wide blocking pool
// (galay/blocking.hpp), whose threads hand finished ops back through a lock-free queue and the
// driver's wake-up; they are completed on the scheduler thread (drain_pool).
#include "driver/epoll/file_engine.hpp"

#include "driver/common/faults.hpp"
#include "driver/fs_ops.hpp"
#include "galay/blocking.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace galay::detail {

namespace {

/// The system call(s) of one file op, on a blocking-pool thread.
void run_blocking(IoOp& op) noexcept {
    for (;;) {
        ssize_t r;
        const auto at = static_cast<off_t>(op.offset + op.done);
        std::size_t len = op.remaining();
        if (faults::on()) [[unlikely]] { // (fail is injected by submit)
            if (faults::hit(faults::Kind::interrupted, op.code)) continue; // EINTR: again
            if (!op.direct && len > 1 && faults::hit(faults::Kind::short_transfer, op.code))
                len = faults::shorter(static_cast<std::uint32_t>(len));
        }
        switch (op.code) {
        case OpCode::read_at:
            r = ::pread(op.fd, op.cursor(), len, at);
            break;
        case OpCode::write_at:
            r = ::pwrite(op.fd, op.cursor(), len, at);
            break;
        case OpCode::readv_at:
            r = ::preadv(op.fd, static_cast<const iovec*>(op.buf), static_cast<int>(op.len),
                         static_cast<off_t>(op.offset));
            break;
        case OpCode::writev_at:
            r = ::pwritev(op.fd, static_cast<const iovec*>(op.buf), static_cast<int>(op.len),
                          static_cast<off_t>(op.offset));
            break;
        case OpCode::fsync:
            r = ::fsync(op.fd);
            break;
        case OpCode::fdatasync:
#if defined(__APPLE__) // (no fdatasync there)
            r = ::fsync(op.fd);
#else
            r = ::fdatasync(op.fd);
#endif
            break;
        case OpCode::fallocate:
#if GALAY_LINUX_CALLS
            r = ::fallocate(op.fd, op.msg_flags, static_cast<off_t>(op.offset),
                            static_cast<off_t>(op.aux));
#elif defined(__APPLE__)
            r = -1;
            errno = EOPNOTSUPP; // (F_PREALLOCATE has other semantics)
#else // POSIX: allocation only, none of Linux's modes
            r = op.msg_flags != 0
                    ? (errno = EOPNOTSUPP, -1)
                    : ((errno = ::posix_fallocate(op.fd, static_cast<off_t>(op.offset),
                                                  static_cast<off_t>(op.aux))) == 0
                           ? 0
                           : -1);
#endif
            break;
        case OpCode::openat:
        case OpCode::statx:
        case OpCode::renameat:
        case OpCode::unlinkat:
        case OpCode::mkdirat:
        case OpCode::linkat:
        case OpCode::symlinkat:
            r = namespace_syscall(op); // driver/fs_ops.hpp
            break;
        default:
            r = -1;
            errno = EOPNOTSUPP;
            break;
        }
        if (r < 0 && errno == EINTR) continue;
        if (op.absorb(r < 0 ? -errno : r)) continue; // the rest of a short `all` transfer
        return;
    }
}

} // namespace

bool EpollFileEngine::read_cached(IoOp& op) noexcept {
    for (;;) {
        iovec v{op.cursor(), op.remaining()};
        int fake = 0;
        if (faults::on()) [[unlikely]] {
            if (faults::hit(faults::Kind::interrupted, op.code))
                fake = EINTR;
            else if (faults::hit(faults::Kind::would_block, op.code))
                fake = EAGAIN; // not in the page cache: the pool reads it
            else if (v.iov_len > 1 && faults::hit(faults::Kind::short_transfer, op.code))
                v.iov_len = faults::shorter(static_cast<std::uint32_t>(v.iov_len));
        }
#if GALAY_LINUX_CALLS
        const ssize_t r =
            fake != 0
                ? (errno = fake, -1)
                : ::preadv2(op.fd, &v, 1, static_cast<off_t>(op.offset + op.done), RWF_NOWAIT);
#else
        const ssize_t r = (errno = fake != 0 ? fake : EOPNOTSUPP, -1); // no RWF_NOWAIT: the pool
#endif
        if (r < 0) {
            if (errno == EINTR) continue;
            // Not (all) in the page cache, or no RWF_NOWAIT here: the pool reads it.
            if (errno == EAGAIN || errno == EOPNOTSUPP || errno == EINVAL) return false;
            op.absorb(-errno);
            return true;
        }
        // A regular file reads short only at its end: fetch the rest instead of returning a
        // short count that the caller would take for the end of the file.
        if (r > 0 && static_cast<std::size_t>(r) < op.remaining()) op.all = true;
        if (op.absorb(r)) continue;
        return true;
    }
}

void EpollFileEngine::to_pool(IoOp& op) {
    op.pending = true;
    ++pool_pending_;
    try {
        blocking_submit(&EpollFileEngine::pool_run, this, &op);
    } catch (...) { // no pool thread could be started: fail this op alone
        --pool_pending_;
        op.result = -EAGAIN;
        refused_.push_back(op);
        ++refused_count_;
    }
}

void EpollFileEngine::pool_run(void* engine, void* op_ptr) noexcept {
    auto* self = static_cast<EpollFileEngine*>(engine);
    IoOp* op = static_cast<IoOp*>(op_ptr);
    run_blocking(*op);
    // After the enqueue the op belongs to the scheduler thread again; the engine stays until
    // blocking_wait_idle says this thread is done.
    self->pool_done_.enqueue(op);
    if (!self->pool_wake_pending_.exchange(true, std::memory_order_acq_rel)) self->driver_.wake();
}

void EpollFileEngine::drain_pool() {
    // Clear the flag first (acq_rel: see pool_run's enqueue): a hand-back after this point
    // wakes the driver again.
    pool_wake_pending_.exchange(false, std::memory_order_acq_rel);
    IoOp* batch[64];
    std::size_t n;
    while ((n = pool_done_.try_dequeue_bulk(batch, 64)) != 0) {
        for (std::size_t i = 0; i < n; ++i) {
            IoOp& op = *batch[i];
            --pool_pending_;
            if (op.aux == kSyncRefusedByAio) {
                op.aux = 0;
                // fsync(2) did what the AIO fsync was refused: the kernel has none (before 4.18).
                if (op.result >= 0) aio_sync_ = false;
            }
            SchedulerAccess::complete(sched_, op);
        }
    }
}

} // namespace galay::detail
