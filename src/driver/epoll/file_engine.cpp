#include "driver/epoll/file_engine.hpp"

#include <concurrentqueue/concurrentqueue.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h> // MSG_MORE
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace galay::detail {

// ---------------------------------------------------------------------------------------------
// The blocking pool
// ---------------------------------------------------------------------------------------------

namespace {

/// The system call(s) of one file op, on a pool thread.
void run_blocking(IoOp& op) noexcept {
    for (;;) {
        ssize_t r;
        const auto at = static_cast<off_t>(op.offset + op.done);
        switch (op.code) {
        case OpCode::read_at:
            r = ::pread(op.fd, op.cursor(), op.remaining(), at);
            break;
        case OpCode::write_at:
            r = ::pwrite(op.fd, op.cursor(), op.remaining(), at);
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

/// A few threads that run file ops with blocking system calls. Only the owning scheduler thread
/// calls push/try_remove/drain; workers touch an op only between taking it from `queue_` and
/// enqueueing it in `done_` (whose enqueue/dequeue order the accesses).
class BlockingPool {
public:
    static constexpr std::size_t kMaxThreads = 4;

    explicit BlockingPool(Driver& driver)
        : driver_(driver) {}

    ~BlockingPool() {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        cv_.notify_all();
        for (std::thread& t : threads_)
            t.join();
    }

    void push(IoOp& op) {
        std::lock_guard lk(m_);
        queue_.push_back(&op);
        // A thread per op waiting beyond the idle ones, up to the limit; started on demand so a
        // scheduler that never touches a buffered file has none.
        if (queue_.size() > idle_ && threads_.size() < kMaxThreads)
            threads_.emplace_back([this] { work(); });
        else if (idle_ > 0)
            cv_.notify_one();
    }

    /// Take `op` back if no thread has started it.
    bool try_remove(IoOp& op) noexcept {
        std::lock_guard lk(m_);
        for (auto it = queue_.begin(); it != queue_.end(); ++it) {
            if (*it != &op) continue;
            queue_.erase(it);
            return true;
        }
        return false;
    }

    /// Take back every op no thread has started.
    template <class F>
    void remove_all(F&& f) {
        std::deque<IoOp*> taken;
        {
            std::lock_guard lk(m_);
            taken.swap(queue_);
        }
        for (IoOp* op : taken)
            f(*op);
    }

    /// Call `f` for every finished op (owning thread).
    template <class F>
    void drain(F&& f) {
        // Clear the flag first (acq_rel: see the producer's enqueue): a completion enqueued after
        // this point wakes the driver again.
        wake_pending_.exchange(false, std::memory_order_acq_rel);
        IoOp* batch[64];
        std::size_t n;
        while ((n = done_.try_dequeue_bulk(batch, 64)) != 0)
            for (std::size_t i = 0; i < n; ++i)
                f(*batch[i]);
    }

private:
    void work() {
        ::pthread_setname_np(::pthread_self(), "galay-fs");
        std::unique_lock lk(m_);
        for (;;) {
            while (queue_.empty() && !stop_) {
                ++idle_;
                cv_.wait(lk);
                --idle_;
            }
            if (queue_.empty()) return; // stopping, and nothing left
            IoOp* op = queue_.front();
            queue_.pop_front();
            lk.unlock();
            run_blocking(*op);
            done_.enqueue(op);
            if (!wake_pending_.exchange(true, std::memory_order_acq_rel)) driver_.wake();
            lk.lock();
        }
    }

    Driver& driver_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<IoOp*> queue_;
    std::vector<std::thread> threads_;
    std::size_t idle_ = 0;
    bool stop_ = false;
    moodycamel::ConcurrentQueue<IoOp*> done_;
    std::atomic<bool> wake_pending_{false};
};

// ---------------------------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------------------------

EpollFileEngine::EpollFileEngine(Scheduler& sched, Driver& driver, int epoll_fd)
    : sched_(sched)
    , driver_(driver)
    , epoll_fd_(epoll_fd) {}

EpollFileEngine::~EpollFileEngine() {
    pool_.reset(); // joins the threads (shutdown() has waited for their work)
    if (ctx_ != nullptr) ::io_destroy(ctx_);
    if (efd_ >= 0) ::close(efd_);
}

bool EpollFileEngine::ensure_aio() {
    if (aio_ == Aio::ready) return true;
    if (aio_ == Aio::unavailable) return false;
    aio_ = Aio::unavailable;
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
}

bool EpollFileEngine::submit(IoOp& op) {
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
    queue_.push_back(op);
    ++queued_;
    op.pending = true;
    // The awaiting task is about to suspend: hand its operations to the kernel now rather than
    // after every other task of this loop turn has run (see the header). A Batch marks all but
    // its last operation MSG_MORE, so they share one io_submit.
    if ((op.msg_flags & MSG_MORE) == 0) submit_queued();
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
        const ssize_t r =
            ::preadv2(op.fd, &v, 1, static_cast<off_t>(op.offset + op.done), RWF_NOWAIT);
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
    if (!pool_) pool_ = std::make_unique<BlockingPool>(driver_);
    op.pending = true;
    ++pool_pending_;
    pool_->push(op);
}

void EpollFileEngine::release_slot(iocb* cb) noexcept {
    cb->data = nullptr;
    free_slots_.push_back(static_cast<std::uint32_t>(cb - slots_.data()));
}

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
}

void EpollFileEngine::finish(const io_event& ev) {
    auto* cb = static_cast<iocb*>(ev.obj);
    IoOp& op = *static_cast<IoOp*>(ev.data);
    release_slot(cb);
    --in_kernel_;
    if (static_cast<long>(ev.res) == -EAGAIN && !op.cancelled) {
        // RWF_NOWAIT: the filesystem could not start it without blocking (a write past the end
        // of the file, a timestamp update that needs the journal, a contended inode lock). The
        // pool does it with a blocking call, as io_uring's workers would. Redoing the whole
        // request is safe: a failed NOWAIT request has moved no bytes we report.
        to_pool(op);
        return;
    }
    if (op.absorb(static_cast<long>(ev.res))) { // the rest of a short `all` transfer
        if (!op.cancelled) {
            queue_.push_front(op);
            ++queued_;
            return;
        }
        op.result = -ECANCELED;
    }
    sched_.complete(op);
}

void EpollFileEngine::drain_pool() {
    pool_->drain([this](IoOp& op) {
        --pool_pending_;
        if (op.aux == kSyncRefusedByAio) {
            op.aux = 0;
            // fsync(2) did what the AIO fsync was refused: the kernel has none (before 4.18).
            if (op.result >= 0) aio_sync_ = false;
        }
        sched_.complete(op);
    });
}

namespace {

// The completion ring the kernel maps at the address of an AIO context (fs/aio.c). Reading it
// directly is what libaio's io_getevents does for an empty ring and what fio's userspace_reap does
// for a full one: the kernel publishes `tail` after writing the event, and takes back the slots
// up to `head` (which user space may advance) when it next completes a request.
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

} // namespace

void EpollFileEngine::reap() {
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
    if (pool_pending_ > 0) drain_pool();
}

void EpollFileEngine::cancel(IoOp& op) noexcept {
    if (queue_.remove(op)) {
        --queued_;
        op.result = -ECANCELED;
        sched_.complete(op);
        return;
    }
    if (pool_ && pool_->try_remove(op)) {
        --pool_pending_;
        op.result = -ECANCELED;
        sched_.complete(op);
        return;
    }
    if (in_kernel_ == 0) return; // running on a pool thread: it completes on its own
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
}

void EpollFileEngine::shutdown() noexcept {
    while (IoOp* op = queue_.pop_front()) {
        --queued_;
        op->result = -ECANCELED;
        sched_.complete(*op);
    }
    flush(); // ops the kernel refused
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
    if (pool_) {
        pool_->remove_all([this](IoOp& op) {
            --pool_pending_;
            op.result = -ECANCELED;
            sched_.complete(op);
        });
        while (pool_pending_ > 0) { // ops running on pool threads cannot be interrupted
            drain_pool();
            if (pool_pending_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    }
}

} // namespace galay::detail
