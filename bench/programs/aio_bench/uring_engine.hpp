// io_uring engine (liburing): one ring per thread, SQ entries = iodepth, CQ = 2 x iodepth.
//
// Waiting (no -P): one io_uring_enter per batch submits everything prepped and waits for `min`
// completions (io_uring_submit_and_wait); the rest of the ready CQEs are peeked without a syscall.
// -P / --poll-mode iopoll: IORING_SETUP_IOPOLL; the same io_uring_enter polls the device for
//   completions instead of sleeping. Needs O_DIRECT and a driver with poll queues; when the kernel
//   refuses (ring setup or -EOPNOTSUPP on the first I/O) the run stops with a clear message.
// --poll-mode sqpoll: IORING_SETUP_SQPOLL; a kernel thread (idle after 2 s) consumes the SQ, so
//   submission needs no syscall. Completions are taken from the CQ ring when there, otherwise
//   waited for in io_uring_enter(GETEVENTS) (fio's sqthread_poll spins instead, which starves the
//   SQ thread when cores are scarce).
// --fixedbufs (fio's io_uring `fixedbufs`): the slot buffers are registered with the ring once
//   (io_uring_register_buffers, one iovec per slot), and I/O is IORING_OP_READ_FIXED/WRITE_FIXED
//   with buf_index = slot: the kernel does not map and pin the pages for every request.
// --registerfiles (fio's `registerfiles`): the target fd is registered (io_uring_register_files)
//   and SQEs name it by index 0 with IOSQE_FIXED_FILE: no file reference taken per request.
#pragma once

#include "engine.hpp"

#include <liburing.h>

#include <vector>

namespace aiob {

class UringEngine {
public:
    UringEngine() = default;
    UringEngine(const UringEngine&) = delete;
    UringEngine& operator=(const UringEngine&) = delete;
    ~UringEngine();

    std::expected<void, std::string> init(const EngineSetup& s);

    void prep(uint32_t slot, bool write, void* buf, uint32_t len, uint64_t offset) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        // At most `depth` I/Os are prepped or in flight and without SQPOLL the kernel consumes the
        // SQ during io_uring_enter, so there is always a free entry. With SQPOLL the SQ thread
        // may post CQEs before it moves the SQ head: the SQ then has 2 x depth entries, and
        // wait_for_sqe() covers anything else.
        if (!sqe) [[unlikely]]
            sqe = wait_for_sqe();
        if (fixed_bufs_) {
            if (write)
                io_uring_prep_write_fixed(sqe, file_, buf, len, offset, static_cast<int>(slot));
            else
                io_uring_prep_read_fixed(sqe, file_, buf, len, offset, static_cast<int>(slot));
        } else if (write) {
            io_uring_prep_write(sqe, file_, buf, len, offset);
        } else {
            io_uring_prep_read(sqe, file_, buf, len, offset);
        }
        sqe->flags |= sqe_flags_;
        io_uring_sqe_set_data64(sqe, slot);
        ++pending_;
    }

    int submit_and_reap(unsigned min, Completion* out, unsigned max);
    unsigned in_flight() const { return inflight_ + pending_; }

private:
    io_uring_sqe* wait_for_sqe();

    io_uring ring_{};
    bool ring_ok_ = false;
    int file_ = -1;               // the fd, or its index in the registered files (--registerfiles)
    unsigned char sqe_flags_ = 0; // IOSQE_FIXED_FILE with --registerfiles
    bool fixed_bufs_ = false;
    PollMode poll_ = PollMode::none;
    unsigned inflight_ = 0; // submitted to the kernel
    unsigned pending_ = 0;  // prepped, not yet submitted
    std::vector<io_uring_cqe*> cqes_;
};

static_assert(Engine<UringEngine>);

} // namespace aiob
