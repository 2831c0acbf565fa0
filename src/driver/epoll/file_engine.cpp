// The epoll file engine's AIO path and entry points: routing each file op (libaio for O_DIRECT
// files and fsync, the page cache or the blocking pool otherwise), preparing iocbs and handing
// them to io_submit, and reaping their completions (file_engine.hpp says why it is built so).
#include "driver/epoll/file_engine.hpp"

#include "driver/common/faults.hpp"
#if GALAY_WITH_AIO
#include "driver/epoll/aio_ring.hpp"
#endif
#include "galay/blocking.hpp"

#if GALAY_WITH_AIO // the AIO completion eventfd sits in the epoll set
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace galay::detail {

EpollFileEngine::EpollFileEngine(Scheduler& sched, Driver& driver, int epoll_fd)
    : sched_(sched)
    , driver_(driver)
    , epoll_fd_(epoll_fd) {}

EpollFileEngine::~EpollFileEngine() {
    // shutdown() has taken back or waited for every pool op; make sure no pool thread is still
    // between its hand-back and its return.
    blocking_wait_idle(this, nullptr);
#if GALAY_WITH_AIO
    if (ctx_ != nullptr) ::io_destroy(ctx_);
#endif
    if (efd_ >= 0) ::close(efd_);
}

bool EpollFileEngine::ensure_aio() {
    if (aio_ == Aio::ready) return true;
    if (aio_ == Aio::unavailable) return false;
    aio_ = Aio::unavailable;
#if !GALAY_WITH_AIO
    return false; // built without libaio (GALAY_WITH_AIO=OFF): the pool does everything
#else
    const int r = ::io_setup(kAioDepth, &ctx_);
    if (r < 0) {
        ctx_ = nullptr;
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
            std::fprintf(stderr,
                         "galay: io_setup failed (%s; see /proc/sys/fs/aio-max-nr): O_DIRECT "
                         "files on the epoll backend use the blocking thread pool\n",
                         std::strerror(-r));
        return false;
    }
    efd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET; // every completion is a new edge: no read needed
    ev.data.fd = efd_;
    if (efd_ < 0 || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, efd_, &ev) < 0) {
        std::fprintf(stderr, "galay: cannot set up the AIO eventfd: %s\n", std::strerror(errno));
        ::io_destroy(ctx_);
        ctx_ = nullptr;
        return false;
    }
    const char* fake = std::getenv("GALAY_TEST_AIO_FSYNC_REFUSED");
    fake_sync_refusal_ = fake != nullptr && *fake != '\0' && *fake != '0';
    slots_.resize(kAioDepth);
    free_slots_.reserve(kAioDepth);
    for (std::uint32_t i = kAioDepth; i-- > 0;)
        free_slots_.push_back(i);
    to_submit_.reserve(kAioDepth);
    events_.resize(kAioDepth);
    aio_ = Aio::ready;
    return true;
#endif
}

bool EpollFileEngine::submit(IoOp& op) {
    if (faults::on()) [[unlikely]] {
        if (op.code != OpCode::fallocate && faults::hit(faults::Kind::fail, op.code)) {
            op.result = -faults::refusal_error();
            return true; // refused before anything moved
        }
    }
    switch (op.code) {
    case OpCode::read_at:
    case OpCode::write_at:
    case OpCode::readv_at:
    case OpCode::writev_at:
        if (op.direct && ensure_aio()) {
            to_aio(op);
            return false;
        }
        if (op.code == OpCode::read_at && !op.direct && read_cached(op)) return true;
        break;
    case OpCode::fsync:
    case OpCode::fdatasync:
        // IOCB_CMD_FSYNC/FDSYNC (Linux >= 4.18) run on a kernel workqueue, so io_submit returns
        // at once, for buffered and O_DIRECT files alike. Until a kernel turns out not to have
        // them (see refuse_sync).
        op.aux = 0;
        if (aio_sync_ && ensure_aio()) {
            to_aio(op);
            return false;
        }
        break;
    default:
        break;
    }
    to_pool(op);
    return false;
}

void EpollFileEngine::to_aio(IoOp& op) {
#if GALAY_WITH_AIO
    queue_.push_back(op);
    ++queued_;
    op.pending = true;
    // The awaiting task is about to suspend: hand its operations to the kernel now rather than
    // after every other task of this loop turn has run (see the header). A Batch marks all but
    // its last operation kMoreFollows, so they share one io_submit.
    if ((op.flags & IoOp::kMoreFollows) == 0) submit_queued();
#else
    to_pool(op); // (not reached: ensure_aio() is false in this build)
#endif
}

#if GALAY_WITH_AIO
void EpollFileEngine::release_slot(iocb* cb) noexcept {
    cb->data = nullptr;
    free_slots_.push_back(static_cast<std::uint32_t>(cb - slots_.data()));
}
#endif

std::size_t EpollFileEngine::flush() {
    submit_queued();
    std::size_t n = 0;
    while (IoOp* op = refused_.pop_front()) {
        --refused_count_;
        SchedulerAccess::complete(sched_, *op);
        ++n;
    }
    return n;
}

#if GALAY_WITH_AIO
/// Fill `cb` for `op` (the op's next transfer, its RWF_NOWAIT, the completion eventfd).
void EpollFileEngine::prepare_iocb(iocb& cb, IoOp& op) const noexcept {
    switch (op.code) {
    case OpCode::read_at:
        ::io_prep_pread(&cb, op.fd, op.cursor(), op.remaining(),
                        static_cast<long long>(op.offset + op.done));
        break;
    case OpCode::write_at:
        ::io_prep_pwrite(&cb, op.fd, op.cursor(), op.remaining(),
                         static_cast<long long>(op.offset + op.done));
        break;
    case OpCode::readv_at:
        ::io_prep_preadv(&cb, op.fd, static_cast<const iovec*>(op.buf), static_cast<int>(op.len),
                         static_cast<long long>(op.offset));
        break;
    case OpCode::writev_at:
        ::io_prep_pwritev(&cb, op.fd, static_cast<const iovec*>(op.buf), static_cast<int>(op.len),
                          static_cast<long long>(op.offset));
        break;
    case OpCode::fsync:
        ::io_prep_fsync(&cb, op.fd);
        break;
    default: // fdatasync (nothing else is queued)
        ::io_prep_fdsync(&cb, op.fd);
        break;
    }
    cb.data = &op;
    // The kernel refuses an fsync iocb with any of these fields set (fs/aio.c aio_fsync).
    // GALAY_TEST_AIO_FSYNC_REFUSED sets one on purpose, so that tests see the refusal of a
    // kernel without AIO fsync.
    if (is_sync_op(op.code))
        cb.aio_rw_flags = fake_sync_refusal_ ? RWF_NOWAIT : 0;
    else
        cb.aio_rw_flags = nowait_ ? RWF_NOWAIT : 0;
    ::io_set_eventfd(&cb, efd_);
}
#endif

void EpollFileEngine::submit_queued() {
#if GALAY_WITH_AIO
    if (queue_.empty() || free_slots_.empty()) return;
    while (!queue_.empty() && !free_slots_.empty()) {
        IoOp& op = *queue_.pop_front();
        --queued_;
        iocb* cb = &slots_[free_slots_.back()];
        free_slots_.pop_back();
        prepare_iocb(*cb, op);
        to_submit_.push_back(cb);
    }
    std::size_t off = 0;
    while (off < to_submit_.size()) {
        const int r =
            ::io_submit(ctx_, static_cast<long>(to_submit_.size() - off), to_submit_.data() + off);
        if (r > 0) {
            in_kernel_ += static_cast<std::size_t>(r);
            off += static_cast<std::size_t>(r);
            continue;
        }
        if (!on_submit_refused(r, off)) break; // (see submit_refusals.cpp)
    }
    to_submit_.clear();
#endif
}

#if GALAY_WITH_AIO
void EpollFileEngine::finish(const io_event& ev) {
    auto* cb = static_cast<iocb*>(ev.obj);
    IoOp& op = *static_cast<IoOp*>(ev.data);
    release_slot(cb);
    --in_kernel_;
    long res = static_cast<long>(ev.res);
    if (faults::on() && !is_sync_op(op.code)) [[unlikely]] {
        // As if RWF_NOWAIT had refused it. The kernel did the transfer; doing it again at the
        // same offset moves the same bytes.
        if (faults::hit(faults::Kind::would_block, op.code)) res = -EAGAIN;
    }
    if (res == -EAGAIN && !op.cancelled) {
        // RWF_NOWAIT: the filesystem could not start it without blocking (a write past the end
        // of the file, a timestamp update that needs the journal, a contended inode lock). The
        // pool does it with a blocking call, as io_uring's workers would. Redoing the whole
        // request is safe: a failed NOWAIT request has moved no bytes we report.
        to_pool(op);
        return;
    }
    if (op.absorb(res)) { // the rest of a short `all` transfer
        if (!op.cancelled) {
            queue_.push_front(op);
            ++queued_;
            return;
        }
        op.result = -ECANCELED;
    }
    SchedulerAccess::complete(sched_, op);
}
#endif

void EpollFileEngine::reap() {
#if GALAY_WITH_AIO
    if (in_kernel_ > 0) {
        // Collect without a system call (aio_ring.hpp). Completions handled here may queue
        // continuations but never submit, so the kernel is the only other writer of the ring.
        const bool read = read_aio_ring(ctx_, [this](const io_event& ev) { finish(ev); });
        if (!read) {
            while (in_kernel_ > 0) {
                timespec zero{};
                const int n = ::io_getevents(ctx_, 0, static_cast<long>(events_.size()),
                                             events_.data(), &zero);
                if (n <= 0) break;
                for (int i = 0; i < n; ++i)
                    finish(events_[i]);
                if (static_cast<std::size_t>(n) < events_.size()) break;
            }
        }
    }
#endif
    // Also when nothing is pending: a hand-back that raced with the last drain (enqueued before
    // it, flagged after it) leaves the flag set with the queue empty, and a set flag keeps the
    // next hand-back from waking the driver. Clearing it here keeps that wake-up.
    if (pool_pending_ > 0 || pool_wake_pending_.load(std::memory_order_relaxed)) drain_pool();
}

} // namespace galay::detail
