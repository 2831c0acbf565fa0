// File I/O for the epoll backend (private to the epoll driver). Defined in file_engine.cpp
// (routing, the AIO path), submit_refusals.cpp (io_submit's refusals), file_pool.cpp (page cache,
// blocking pool) and file_cancel.cpp (cancel, shutdown); aio_ring.hpp reads AIO completions.
//
// O_DIRECT files go through Linux AIO. `submit` queues the op as an iocb-to-be; when the op is the
// last one its task queues before suspending, every queued op goes to the kernel in one
// io_submit. A single read_at is one io_submit of one iocb; an fs::Batch of N operations is one
// io_submit of N iocbs (it marks all but its last operation IoOp::kMoreFollows). Ops queued while
// the `kAioDepth` iocb slots are all in use wait and go in one io_submit from the driver's poll,
// before it waits. Why not one io_submit for all tasks of a loop turn: with several tasks each
// keeping one read in flight, holding every request back until the last task of the turn has run
// made the requests complete together, and the device idled while the loop processed them
// (measured: about 0.8x the read IOPS of submitting each task's requests at once, 4 tasks,
// 4 KiB O_DIRECT; a system call costs ~0.25 us here, a request ~100 us).
//
// io_submit must not block the loop (every socket of the scheduler would wait with it), yet
// filesystems do block in it: ext4 and xfs perform an O_DIRECT write past the end of a file
// synchronously (measured: io_submit took 74 us, the whole device write, for each 4 KiB append),
// and a request may wait for a contended inode lock or for metadata I/O. So every iocb carries
// RWF_NOWAIT: what cannot start at once completes with EAGAIN and is redone on the thread pool
// with a blocking call, which is what io_uring does with its workers.
//
// Each iocb signals an eventfd that sits in the driver's epoll set (edge-triggered, so it never
// needs reading); `reap` collects every finished iocb after each wait straight from the completion
// ring the kernel maps into our address space (what io_getevents with min 0 returns, without the
// system call; io_getevents remains the fallback if the ring layout is not the one we know). An
// iocb lives in one of `kAioDepth` slots, so a request has a unique address while the kernel holds
// it (io_cancel needs it) and no allocation happens per operation; ops beyond that wait in the
// queue.
//
// Buffered files: io_submit would do the whole copy synchronously (and block on a page-cache
// miss), so a buffered read is first tried with preadv2(RWF_NOWAIT) (served at once from the
// page cache) and everything else goes to galay's blocking pool (the process-wide one
// `spawn_blocking` uses, galay/blocking.hpp; not a pool per scheduler). Pool threads hand
// finished ops back through a lock-free queue and the driver's wake-up; the scheduler thread
// then completes them.
//
// fsync and fdatasync go through AIO for every file, buffered or O_DIRECT: IOCB_CMD_FSYNC and
// IOCB_CMD_FDSYNC (Linux >= 4.18) make io_submit queue the flush on a kernel workqueue and return
// at once; the completion arrives like any other. They carry no RWF_NOWAIT (the kernel refuses
// any rw flag on them) and they cannot be cancelled (io_cancel has nothing to stop: a cancelled or
// timed-out fsync completes with its real result, and shutdown waits for it like for a read). An
// fsync iocb refused with EINVAL is redone with fsync(2) on the pool; when that succeeds, the
// kernel has no AIO fsync and every later one goes to the pool directly (a file that has no
// fsync at all, a pipe, fails both ways and keeps AIO fsync on). fallocate has no AIO command:
// it runs on the pool for every file. When io_setup fails (fs.aio-max-nr exhausted), O_DIRECT
// files and fsync use the pool too.
#pragma once

#include "driver/common/op_queue.hpp"
#include "driver/common/op_traits.hpp"

#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

#include <concurrentqueue/concurrentqueue.h>
#if GALAY_WITH_AIO // (CMake option; OFF: no libaio, files use the pool only)
#include <libaio.h>
#endif

#include <atomic>
#include <vector>

namespace galay::detail {

class EpollFileEngine {
public:
    /// `driver` is woken by the pool; `epoll_fd` receives the AIO eventfd.
    EpollFileEngine(Scheduler& sched, Driver& driver, int epoll_fd);
    ~EpollFileEngine();
    EpollFileEngine(const EpollFileEngine&) = delete;
    EpollFileEngine& operator=(const EpollFileEngine&) = delete;

    /// Start a file op. Returns true when it completed at once (a cached buffered read).
    bool submit(IoOp& op);
    /// Cancel a pending op: a queued one completes with ECANCELED at once; one in the kernel is
    /// offered to io_cancel (filesystems mostly refuse) and otherwise completes normally.
    void cancel(IoOp& op) noexcept;
    /// Submit what is still queued, and complete the ops the kernel refused. Returns how many
    /// ops it completed.
    std::size_t flush();
    /// Hand finished ops (AIO events, pool results) to the scheduler.
    void reap();
    /// Cancel what can be cancelled and wait until the kernel and the pool are done with every
    /// op (their buffers live in coroutine frames about to be destroyed).
    void shutdown() noexcept;

    std::size_t in_flight() const noexcept {
        return queued_ + in_kernel_ + refused_count_ + pool_pending_;
    }
    /// The AIO completion eventfd (-1 before the first O_DIRECT op).
    int event_fd() const noexcept { return efd_; }

private:
    static constexpr unsigned kAioDepth = 256;

    /// op.aux of an fsync that io_submit refused and the pool redoes (see refuse_sync).
    static constexpr std::uint64_t kSyncRefusedByAio = 1;

    bool ensure_aio();
    /// Queue an op for io_submit (now, unless it is a Batch op marked kMoreFollows).
    void to_aio(IoOp& op);
    void refuse_sync(IoOp& op);
    /// One io_submit for everything queued (as far as slots allow); refused ops go to refused_.
    void submit_queued();
#if GALAY_WITH_AIO
    void prepare_iocb(iocb& cb, IoOp& op) const noexcept;

    // submit_refusals.cpp: io_submit refused the iocb at to_submit_[off] with `r` (<= 0).
    enum class SubmitRefusal : std::uint8_t {
        retry_later,    ///< EAGAIN while requests are in flight: the rest waits for a later turn
        sync_on_pool,   ///< EINVAL for an fsync iocb: fsync(2) on the pool (see refuse_sync)
        without_nowait, ///< EOPNOTSUPP/EINVAL: no RWF_NOWAIT for AIO here; resubmit without it
        fail_op,        ///< anything else: that op alone fails (completed by flush())
    };
    SubmitRefusal classify_refusal(int r, std::size_t off) const noexcept;
    /// Apply the refusal's policy. Returns false when submission stops for this turn.
    bool on_submit_refused(int r, std::size_t& off);
    void requeue_unsubmitted(std::size_t off);
    void redo_sync_on_pool(std::size_t& off);
    void submit_without_nowait(std::size_t off) noexcept;
    void fail_refused(int r, std::size_t& off);
#endif
    bool read_cached(IoOp& op) noexcept;
    void to_pool(IoOp& op);
#if GALAY_WITH_AIO
    void finish(const io_event& ev);
    void release_slot(iocb* cb) noexcept;
#endif
    // file_pool.cpp: the page cache and the blocking pool
    void drain_pool();
    /// On a pool thread: run `op`'s system call and hand it back.
    static void pool_run(void* engine, void* op) noexcept;

    Scheduler& sched_;
    Driver& driver_;
    int epoll_fd_;

    enum class Aio : std::uint8_t { untried, ready, unavailable } aio_ = Aio::untried;
    bool nowait_ = true; // iocbs carry RWF_NOWAIT (until the kernel refuses it)
    bool aio_sync_ =
        true; // fsync/fdatasync go through AIO (until the kernel turns out not to have it)
    bool fake_sync_refusal_ = false; // GALAY_TEST_AIO_FSYNC_REFUSED: fsync iocbs the kernel refuses
    int efd_ = -1;
#if GALAY_WITH_AIO
    io_context_t ctx_ = nullptr;
    std::vector<iocb> slots_;
    std::vector<std::uint32_t> free_slots_;
    std::vector<iocb*> to_submit_;
    std::vector<io_event> events_;
#endif
    OpQueue queue_;
    std::size_t queued_ = 0;
    OpQueue refused_; // io_submit refused them; completed by the next flush()
    std::size_t refused_count_ = 0;
    std::size_t in_kernel_ = 0;

    std::size_t pool_pending_ = 0; // ops given to the blocking pool and not handed back
    moodycamel::ConcurrentQueue<IoOp*> pool_done_;
    std::atomic<bool> pool_wake_pending_{false};
};

} // namespace galay::detail
