#include "driver/epoll/file_engine.hpp"

#include "driver/common/faults.hpp"
#include "galay/blocking.hpp"

#include <concurrentqueue/concurrentqueue.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h> // MSG_MORE
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

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
            r = ::fdatasync(op.fd);
            break;
        case OpCode::fallocate:
            r = ::fallocate(op.fd, op.msg_flags, static_cast<off_t>(op.offset),
                            static_cast<off_t>(op.aux));
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

// ---------------------------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------------------------

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
    // its last operation MSG_MORE, so they share one io_submit.
    if ((op.msg_flags & MSG_MORE) == 0) submit_queued();
#else
    to_pool(op); // (not reached: ensure_aio() is false in this build)
#endif
}

void EpollFileEngine::refuse_sync(IoOp& op) {
    // io_submit said EINVAL to an fsync iocb: either this kernel has no AIO fsync (before 4.18)
    // or this file has no fsync at all (a pipe, a socket). fsync(2) on the pool tells them apart
    // (drain_pool): if it succeeds, AIO fsync is off for good; if not, the caller gets fsync(2)'s
    // own error, as io_uring would give it.
    op.aux = kSyncRefusedByAio;
    to_pool(op);
}

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
        const ssize_t r =
            fake != 0
                ? (errno = fake, -1)
                : ::preadv2(op.fd, &v, 1, static_cast<off_t>(op.offset + op.done), RWF_NOWAIT);
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
        sched_.complete(*op);
        ++n;
    }
    return n;
}

void EpollFileEngine::submit_queued() {
#if GALAY_WITH_AIO
    if (queue_.empty() || free_slots_.empty()) return;
    while (!queue_.empty() && !free_slots_.empty()) {
        IoOp& op = *queue_.pop_front();
        --queued_;
        iocb* cb = &slots_[free_slots_.back()];
        free_slots_.pop_back();
        switch (op.code) {
        case OpCode::read_at:
            ::io_prep_pread(cb, op.fd, op.cursor(), op.remaining(),
                            static_cast<long long>(op.offset + op.done));
            break;
        case OpCode::write_at:
            ::io_prep_pwrite(cb, op.fd, op.cursor(), op.remaining(),
                             static_cast<long long>(op.offset + op.done));
            break;
        case OpCode::readv_at:
            ::io_prep_preadv(cb, op.fd, static_cast<const iovec*>(op.buf), static_cast<int>(op.len),
                             static_cast<long long>(op.offset));
            break;
        case OpCode::writev_at:
            ::io_prep_pwritev(cb, op.fd, static_cast<const iovec*>(op.buf),
                              static_cast<int>(op.len), static_cast<long long>(op.offset));
            break;
        case OpCode::fsync:
            ::io_prep_fsync(cb, op.fd);
            break;
        default: // fdatasync (nothing else is queued)
            ::io_prep_fdsync(cb, op.fd);
            break;
        }
        cb->data = &op;
        // The kernel refuses an fsync iocb with any of these fields set (fs/aio.c aio_fsync).
        // GALAY_TEST_AIO_FSYNC_REFUSED sets one on purpose, so that tests see the refusal of a
        // kernel without AIO fsync.
        if (is_sync(op.code))
            cb->aio_rw_flags = fake_sync_refusal_ ? RWF_NOWAIT : 0;
        else
            cb->aio_rw_flags = nowait_ ? RWF_NOWAIT : 0;
        ::io_set_eventfd(cb, efd_);
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
        if (r == -EAGAIN && in_kernel_ > 0) {
            // The kernel is short of resources: keep the rest (in order) for a later turn.
            for (std::size_t i = to_submit_.size(); i-- > off;) {
                IoOp& op = *static_cast<IoOp*>(to_submit_[i]->data);
                release_slot(to_submit_[i]);
                queue_.push_front(op);
                ++queued_;
            }
            break;
        }
        if (r == -EINVAL && is_sync(static_cast<IoOp*>(to_submit_[off]->data)->code)) {
            iocb* cb = to_submit_[off++];
            IoOp& op = *static_cast<IoOp*>(cb->data);
            release_slot(cb);
            refuse_sync(op);
            continue;
        }
        if ((r == -EOPNOTSUPP || r == -EINVAL) && nowait_) {
            // This kernel or filesystem has no RWF_NOWAIT for AIO: submit blocking from now on.
            nowait_ = false;
            for (std::size_t i = off; i < to_submit_.size(); ++i)
                if (!is_sync(static_cast<IoOp*>(to_submit_[i]->data)->code))
                    to_submit_[i]->aio_rw_flags = 0;
            continue;
        }
        // The first remaining iocb was refused (EBADF, EINVAL, ...): fail that op alone. It is
        // completed by flush(), never here: submit() may be running inside the op's
        // await_suspend, before its deadline is armed.
        iocb* cb = to_submit_[off++];
        IoOp& op = *static_cast<IoOp*>(cb->data);
        release_slot(cb);
        op.absorb(r < 0 ? r : -EIO);
        refused_.push_back(op);
        ++refused_count_;
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
    if (faults::on() && !is_sync(op.code)) [[unlikely]] {
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
    sched_.complete(op);
}
#endif

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
            sched_.complete(op);
        }
    }
}

namespace {

// The completion ring the kernel maps at the address of an AIO context (fs/aio.c). Reading it
// directly is what libaio's io_getevents does for an empty ring and what fio's userspace_reap does
// for a full one: the kernel publishes `tail` after writing the event, and takes back the slots
// up to `head` (which user space may advance) when it next completes a request.
#if GALAY_WITH_AIO
struct AioRing {
    unsigned id;
    unsigned nr;
    unsigned head;
    unsigned tail;
    unsigned magic;
    unsigned compat_features;
    unsigned incompat_features;
    unsigned header_length;
    io_event events[];
};
constexpr unsigned kAioRingMagic = 0xa10a10a1;
#endif

} // namespace

void EpollFileEngine::reap() {
#if GALAY_WITH_AIO
    if (in_kernel_ > 0) {
        auto* ring = reinterpret_cast<AioRing*>(ctx_);
        if (ring->magic == kAioRingMagic && ring->incompat_features == 0) {
            // Collect without a system call. Completions handled here may queue continuations
            // but never submit, so the kernel is the only other writer of the ring.
            unsigned head = ring->head;
            const unsigned tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
            while (head != tail) {
                const io_event ev = ring->events[head];
                head = head + 1 == ring->nr ? 0 : head + 1;
                __atomic_store_n(&ring->head, head, __ATOMIC_RELEASE);
                finish(ev);
            }
        } else {
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

void EpollFileEngine::cancel(IoOp& op) noexcept {
    if (queue_.remove(op)) {
        --queued_;
        op.result = -ECANCELED;
        sched_.complete(op);
        return;
    }
    if (pool_pending_ > 0 && blocking_cancel(this, &op)) {
        --pool_pending_;
        op.result = -ECANCELED;
        sched_.complete(op);
        return;
    }
    if (in_kernel_ == 0) return; // running on a pool thread: it completes on its own
#if GALAY_WITH_AIO
    for (iocb& cb : slots_) {
        if (cb.data != &op) continue;
        io_event ev{};
        // Filesystems do not implement AIO cancellation (EINVAL); newer kernels that accept it
        // answer EINPROGRESS and deliver the completion through the ring. Either way the op
        // completes through reap(). Only very old kernels return 0 and hand the event here.
        if (::io_cancel(ctx_, &cb, &ev) == 0) {
            ev.obj = &cb;
            ev.data = &op;
            finish(ev);
        }
        return;
    }
#endif
}

void EpollFileEngine::shutdown() noexcept {
    while (IoOp* op = queue_.pop_front()) {
        --queued_;
        op->result = -ECANCELED;
        sched_.complete(*op);
    }
    flush(); // ops the kernel refused
#if GALAY_WITH_AIO
    if (in_kernel_ > 0) {
        for (iocb& cb : slots_)
            if (cb.data != nullptr) static_cast<IoOp*>(cb.data)->cancelled = true; // no resubmit
        for (iocb& cb : slots_) {
            if (cb.data == nullptr) continue;
            io_event ev{};
            if (::io_cancel(ctx_, &cb, &ev) == 0) {
                ev.obj = &cb;
                ev.data = cb.data;
                finish(ev);
            }
        }
        while (in_kernel_ > 0) { // the device finishes them; their buffers must outlive that
            timespec ts{.tv_sec = 1, .tv_nsec = 0};
            const int n =
                ::io_getevents(ctx_, 1, static_cast<long>(events_.size()), events_.data(), &ts);
            if (n == -EINTR) continue;
            if (n < 0) {
                // Cannot collect: io_destroy waits for every request itself.
                std::fprintf(stderr, "galay: io_getevents failed at shutdown: %s\n",
                             std::strerror(-n));
                ::io_destroy(ctx_);
                ctx_ = nullptr;
                aio_ = Aio::unavailable;
                for (iocb& cb : slots_) {
                    if (cb.data == nullptr) continue;
                    IoOp& op = *static_cast<IoOp*>(cb.data);
                    release_slot(&cb);
                    op.result = -ECANCELED;
                    sched_.complete(op);
                }
                in_kernel_ = 0;
                break;
            }
            for (int i = 0; i < n; ++i)
                finish(events_[i]);
        }
    }
#endif
    if (pool_pending_ > 0) {
        blocking_cancel_all(
            this,
            [](void* op, void* engine) noexcept {
                auto* self = static_cast<EpollFileEngine*>(engine);
                --self->pool_pending_;
                static_cast<IoOp*>(op)->result = -ECANCELED;
                self->sched_.complete(*static_cast<IoOp*>(op));
            },
            this);
        while (pool_pending_ > 0) { // ops running on pool threads cannot be interrupted
            drain_pool();
            if (pool_pending_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    }
}

} // namespace galay::detail
