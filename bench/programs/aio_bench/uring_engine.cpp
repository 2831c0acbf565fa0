#include "uring_engine.hpp"

#include <sys/resource.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace aiob {

UringEngine::~UringEngine() {
    if (!ring_ok_) return;
    // Never free a buffer the kernel may still write: drain whatever is still in flight.
    if (pending_ > 0) io_uring_submit(&ring_);
    inflight_ += pending_;
    while (inflight_ > 0) {
        io_uring_cqe* cqe = nullptr;
        __kernel_timespec ts{10, 0}; // a device that does not answer in 10 s: give up
        if (io_uring_wait_cqe_timeout(&ring_, &cqe, &ts) < 0) break;
        io_uring_cqe_seen(&ring_, cqe);
        --inflight_;
    }
    io_uring_queue_exit(&ring_);
}

std::expected<void, std::string> UringEngine::init(const EngineSetup& s) {
    file_ = s.fd;
    poll_ = s.poll;
    io_uring_params p{};
    if (poll_ == PollMode::iopoll) p.flags |= IORING_SETUP_IOPOLL;
    if (poll_ == PollMode::sqpoll) {
        p.flags |= IORING_SETUP_SQPOLL;
        p.sq_thread_idle = 2000; // ms before the SQ thread sleeps
    }
    const unsigned entries = poll_ == PollMode::sqpoll ? 2 * s.depth : s.depth;
    cqes_.resize(2 * entries);
    int r = io_uring_queue_init_params(entries, &ring_, &p);
    if (r < 0) {
        std::string why = std::strerror(-r);
        if (poll_ == PollMode::iopoll)
            return std::unexpected("IOPOLL not supported: io_uring_queue_init(IORING_SETUP_IOPOLL) "
                                   "refused by the kernel: " +
                                   why);
        if (poll_ == PollMode::sqpoll)
            return std::unexpected("SQPOLL not available: io_uring_queue_init(IORING_SETUP_SQPOLL)"
                                   " refused by the kernel: " +
                                   why);
        std::string msg = "io_uring_queue_init(" + std::to_string(s.depth) + "): " + why;
        if (r == -ENOSYS || r == -EPERM)
            msg += " (io_uring disabled? see /proc/sys/kernel/io_uring_disabled)";
        if (r == -ENOMEM) msg += " (locked-memory limit? see ulimit -l)";
        return std::unexpected(msg);
    }
    ring_ok_ = true;
    if (s.register_files) {
        r = io_uring_register_files(&ring_, &s.fd, 1);
        if (r < 0)
            return std::unexpected(std::string("--registerfiles: io_uring_register_files: ") +
                                   std::strerror(-r));
        file_ = 0;
        sqe_flags_ = IOSQE_FIXED_FILE;
    }
    if (s.fixed_bufs) {
        std::vector<iovec> iov(s.depth);
        for (unsigned i = 0; i < s.depth; ++i)
            iov[i] = iovec{s.bufs + size_t{i} * s.stride, s.stride};
        r = io_uring_register_buffers(&ring_, iov.data(), s.depth);
        if (r < 0) {
            std::string msg = "--fixedbufs: io_uring_register_buffers(" + std::to_string(s.depth) +
                              " buffers of " + std::to_string(s.stride) +
                              " bytes): " + std::strerror(-r);
            if (r == -ENOMEM) {
                rlimit lim{};
                getrlimit(RLIMIT_MEMLOCK, &lim);
                msg +=
                    " (registered buffers count against the locked-memory limit, ulimit -l = " +
                    (lim.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                                   : std::to_string(lim.rlim_cur / 1024) + " KiB") +
                    "; raise it, or lower -q/-b)";
            }
            return std::unexpected(msg);
        }
        fixed_bufs_ = true;
    }
    return {};
}

io_uring_sqe* UringEngine::wait_for_sqe() {
    for (;;) {
        if (poll_ == PollMode::sqpoll) {
            io_uring_sqring_wait(&ring_); // until the SQ thread consumed entries
        } else {
            int r = io_uring_submit(&ring_);
            if (r > 0) {
                inflight_ += static_cast<unsigned>(r);
                pending_ -= static_cast<unsigned>(r);
            }
        }
        if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) return sqe;
    }
}

int UringEngine::submit_and_reap(unsigned min, Completion* out, unsigned max) {
    unsigned want = min;
    if (want > inflight_ + pending_) want = inflight_ + pending_;
    if (max > cqes_.size()) max = static_cast<unsigned>(cqes_.size());

    unsigned n = 0;
    if (poll_ == PollMode::sqpoll) {
        if (pending_ > 0) {
            // Publishes the new SQ tail and wakes the SQ thread only if it went to sleep. The
            // return value counts every SQE the SQ thread has not consumed yet, not just ours.
            int r = io_uring_submit(&ring_);
            if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) return r;
            if (r >= 0) {
                inflight_ += pending_;
                pending_ = 0;
            }
        }
        n = io_uring_peek_batch_cqe(&ring_, cqes_.data(), max);
        if (n < want) {
            // Sleep in io_uring_enter(GETEVENTS) rather than spin: a spinning reaper competes
            // with the SQ thread for the CPU (fio's sqthread_poll spins and collapses to a few
            // thousand IOPS on a 2-core machine).
            io_uring_cqe* cqe = nullptr;
            int r = io_uring_wait_cqe_nr(&ring_, &cqe, want);
            if (r < 0 && r != -EINTR && r != -EAGAIN && r != -ETIME) return r;
            n = io_uring_peek_batch_cqe(&ring_, cqes_.data(), max);
        }
    } else {
        if (pending_ > 0 || want > 0) {
            int r = io_uring_submit_and_wait(&ring_, want);
            if (r < 0) {
                if (r != -EINTR && r != -EAGAIN && r != -EBUSY && r != -ETIME) return r;
            } else {
                inflight_ += static_cast<unsigned>(r);
                pending_ -= static_cast<unsigned>(r);
            }
        }
        n = io_uring_peek_batch_cqe(&ring_, cqes_.data(), max);
    }
    for (unsigned i = 0; i < n; ++i)
        out[i] =
            Completion{static_cast<uint32_t>(io_uring_cqe_get_data64(cqes_[i])), cqes_[i]->res};
    io_uring_cq_advance(&ring_, n);
    inflight_ -= n;
    return static_cast<int>(n);
}

} // namespace aiob
