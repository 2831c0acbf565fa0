// The interface every backend implements (one driver per scheduler), and the registration of a
// buffer for fixed-buffer I/O. Internal: only src/ includes it; the installed headers see the
// driver through the Scheduler alone.
#pragma once

#include "galay/backend.hpp"
#include "galay/detail/io_op.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>

// The readiness driver's poller (driver/poller/poller.hpp): kqueue on macOS and FreeBSD, epoll on
// Linux. The registry (runtime/registry.cpp) lists the other one's backend as not on this system.
#if defined(__APPLE__) || defined(__FreeBSD__)
#define GALAY_KQUEUE 1
#else
#define GALAY_KQUEUE 0
#endif

namespace galay::detail {

class Driver;

/// A buffer registered with a driver for fixed-buffer I/O: the handle fs::FixedBuffer keeps at a
/// stable heap address. The driver sets `driver` and `slot` when it registers the buffer, clears
/// them when it unregisters it, and also when the driver itself is destroyed first (its ring, and
/// every registration with it, is then gone).
struct BufferRegistration {
    void* addr = nullptr;
    std::size_t len = 0;
    Driver* driver = nullptr; // null: not registered
    int slot = -1;            // index in the driver's buffer table
};

/// The interface every backend implements. One driver per scheduler (per thread).
class Driver {
public:
    virtual ~Driver() = default;
    virtual Backend backend() const noexcept = 0;
    virtual const char* name() const noexcept = 0;

    /// Start `op`. Returns true when it completed at once (`op.result` is set and the caller
    /// continues without suspending); false when it is pending: the driver will set
    /// `op.result` and hand `op.waiter` to the scheduler later.
    virtual bool submit(IoOp& op) = 0;

    /// Ask a pending op to stop. Its completion still arrives through the normal path, with
    /// -ECANCELED (or -ETIMEDOUT when `op.timed_out`), or with its real result if it won the race.
    virtual void cancel(IoOp& op) = 0;

    /// Push pending submissions to the kernel, wait for completions for at most `timeout_ns`
    /// (-1: no limit, 0: do not block) and hand completed waiters to the scheduler.
    virtual void poll(std::int64_t timeout_ns) = 0;

    /// Thread-safe: make a blocking `poll` return soon.
    virtual void wake() noexcept = 0;

    /// On this driver's thread: queue a wake-up of `peer` (another thread's driver) that this
    /// driver sends with its next `poll` (io_uring: IORING_OP_MSG_RING). False when it cannot
    /// (then the caller uses `peer.wake()`). The peer must outlive the send.
    virtual bool wake_peer(Driver& peer) noexcept {
        (void)peer;
        return false;
    }
    /// Hand what is queued for the kernel (wake-ups from wake_peer, the slot clearing and
    /// cancels of a close) to it now: the caller is not about to poll.
    virtual void flush() noexcept {}
    /// Mid-batch (SchedulerOptions::fair_completions): the loop has run handlers for a while
    /// without polling; hand the requests they queued (replies, mostly) to the kernel now so
    /// they do not wait for the whole batch. Submission only: completions stay for the next
    /// `poll`. Drivers that issue operations at once (epoll): nothing to do.
    virtual void submit_queued() noexcept {}

    /// The fd is about to be closed synchronously: forget any state about it, and have the
    /// kernel let go of it before returning (io_uring: its registered-file slot and the requests
    /// still pending on it), so that close(2) right after really closes it. This driver's
    /// thread only, inside or outside block_on.
    virtual void forget_fd(int fd) noexcept = 0;

    /// Whether the calling thread is the one this driver runs on (it may call forget_fd).
    virtual bool runs_on_this_thread() const noexcept = 0;

    /// galay is closing `fd`, on this driver's thread. The driver may take the close over: it
    /// forgets the fd and closes it itself (io_uring: a TCP stream, closed by IORING_OP_CLOSE
    /// after its multishot recv and registered slot are dropped, all in one io_uring_enter made
    /// at once). Returns false when the caller must forget and close it now.
    virtual bool close_later(int fd) noexcept {
        (void)fd;
        return false;
    }

    /// The scheduler's loop starts or stops running on this thread (nested block_on included).
    /// When it stops, everything close_later took over has reached the kernel.
    virtual void loop_entered() noexcept {}
    virtual void loop_left() noexcept {}

    /// Thread-safe, called from another thread with `FdOwners::mutex()` held: the fd this
    /// driver registered is being closed there; clear its slot soon (io_uring only).
    virtual void forget_fd_remote(int /*fd*/) noexcept {}

    /// Cancel every pending op and wait until the kernel has finished with all of them.
    virtual void shutdown() noexcept = 0;

    /// Return a pool buffer lent by a `recv_pooled` completion (`op.aux` is its id).
    virtual void give_back(std::uint16_t buffer_id) noexcept = 0;

    /// Number of ops handed to the kernel and not yet completed.
    virtual std::size_t in_flight() const noexcept = 0;
    /// Whether OpCode::send_zc sends without copying here (io_uring SEND_ZC, MSG_ZEROCOPY);
    /// false: the driver runs it as a plain send.
    virtual bool zero_copy_send() const noexcept { return false; }

    // --- pool statistics (tests, tools) ---------------------------------------------------------
    /// Pool buffers not free: lent to tasks, or holding bytes that no task has asked for yet.
    virtual std::size_t pool_buffers_in_use() const noexcept = 0;
    /// Pool buffers holding bytes received on `fd` that its task has not asked for yet (io_uring:
    /// what its multishot recv brought while the task was busy; epoll takes a buffer only for the
    /// system call, so none).
    virtual std::size_t pool_buffers_queued(int fd) const noexcept {
        (void)fd;
        return 0;
    }
    /// Whether the driver is receiving on `fd` without its task asking (io_uring: a multishot
    /// recv is armed on it).
    virtual bool receives_ahead(int fd) const noexcept {
        (void)fd;
        return false;
    }

    /// Register [r.addr, r.addr + r.len) for fixed-buffer I/O (this driver's thread only). Returns
    /// 0 and sets r.driver and r.slot, or -errno: -EOPNOTSUPP where the backend has no registered
    /// buffers (epoll), else why the kernel refused (-ENOMEM: RLIMIT_MEMLOCK; -ENOBUFS: the
    /// table is full; ...).
    virtual int register_buffer(BufferRegistration& r) noexcept {
        (void)r;
        return -EOPNOTSUPP;
    }
    /// Undo register_buffer (this driver's thread only). Once it returns the kernel starts no new
    /// I/O on the buffer; operations still running on it must have finished before it is freed,
    /// as for any buffer.
    virtual void unregister_buffer(BufferRegistration& r) noexcept { (void)r; }
};

} // namespace galay::detail
