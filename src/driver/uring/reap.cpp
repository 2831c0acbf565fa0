// The loop side of the driver: `poll` submits and waits in one io_uring_enter and reaps the
// completions (dispatched by user_data tag: wake-ups, multishot recv and accept, file-table
// updates, one-shot ops), `wake`/`wake_peer` make a waiting loop return, and `shutdown` drains it.
#include "driver/uring/uring_driver.hpp"

#include "driver/common/faults.hpp"
#include "driver/mmsg.hpp"
#include "driver/process_ops.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace galay::detail {

void UringDriver::wake() noexcept {
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

// Waking another worker's ring: an IORING_OP_MSG_RING SQE in our own ring posts a CQE
// (kMsgTag) straight into the peer's completion queue. It is submitted with our next
// io_uring_enter (the loop polls right after the batch that posted), so it costs no system
// call of its own, where an eventfd write costs one; the peer wakes from its wait on that
// CQE with no read to re-arm. CQE_SKIP_SUCCESS: a completion comes back only when the message
// failed (the peer's CQ is full, ...), and then the peer's eventfd wakes it instead.
bool UringDriver::wake_peer(Driver& peer) noexcept {
    if (!msg_ring_ || peer.backend() != Backend::io_uring) return false;
    auto& target = static_cast<UringDriver&>(peer);
    io_uring_sqe* e = sqe();
    io_uring_prep_msg_ring(e, target.ring_.ring_fd, 0, kMsgTag, 0);
    e->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(e, reinterpret_cast<std::uint64_t>(&target) | kMsgTag);
    msgs_queued_ = true;
    return true;
}

void UringDriver::flush() noexcept {
    msgs_queued_ = false;
    if (io_uring_sq_ready(&ring_) > 0) let_go_now();
}

void UringDriver::poll(std::int64_t timeout_ns) {
    msgs_queued_ = false; // submitted below
    if (remote_forgets_.pending()) drain_remote_forgets();
    if (!withheld_.empty() || !late_.empty()) [[unlikely]] {
        release_withheld();
        timeout_ns = 0; // (late completions are handled by this turn's reap)
    }
    if (buf_ring_ != nullptr) {
        provision_buffers();
        publish_buffers();
        if (!starved_.empty() && ring_free_ > 0) rearm_starved();
    }
    int ret;
    if (timeout_ns == 0) {
        ret = io_uring_submit_and_get_events(&ring_);
    } else if (timeout_ns < 0) {
        ret = io_uring_submit_and_wait(&ring_, 1);
    } else {
        __kernel_timespec ts{.tv_sec = timeout_ns / 1'000'000'000,
                             .tv_nsec = timeout_ns % 1'000'000'000};
        io_uring_cqe* cqe = nullptr;
        ret = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    }
    if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN) {
        std::fprintf(stderr, "galay: io_uring_enter failed: %s\n", std::strerror(-ret));
        std::abort();
    }
    unsigned seen = reap();
    if (!fair_) return;
    // Since Linux 6.13 an io_uring_enter completes at most IO_LOCAL_TW_DEFAULT_MAX (20)
    // deferred requests per pass on a DEFER_TASKRUN ring; a reap that found that many suggests
    // more are ready: ask again (no wait) while full batches keep coming, bounded.
    for (int round = 0; round < kFairRounds && seen >= kKernelTaskWorkPass; ++round) {
        if (io_uring_get_events(&ring_) < 0) break;
        seen = reap();
    }
}

void UringDriver::submit_queued() noexcept {
    if (io_uring_sq_ready(&ring_) == 0) return;
    int r;
    do
        r = io_uring_submit(&ring_);
    while (r == -EINTR);
    // (MSG_RING wake-ups act at submission. Queued closes keep their flag: their cancels'
    // completions run only when the loop next asks for events, as let_go_now needs.)
    if (r >= 0) msgs_queued_ = false;
}

void UringDriver::shutdown() noexcept {
    shutting_down_ = true;
    release_withheld();
    if (in_flight_ != 0) {
        io_uring_sqe* e = sqe();
        io_uring_prep_cancel64(e, 0, IORING_ASYNC_CANCEL_ANY);
        io_uring_sqe_set_data64(e, kIgnoreTag);
    }
    // Bounded: a request that ignores cancellation (a regular-file read in progress)
    // finishes on its own within the device's latency.
    for (int i = 0; i < 1000 && in_flight_ != 0; ++i) {
        __kernel_timespec ts{.tv_sec = 0, .tv_nsec = 10'000'000};
        io_uring_cqe* cqe = nullptr;
        io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
        reap();
    }
}

void UringDriver::arm_wake() {
    io_uring_sqe* e = sqe();
    io_uring_prep_read(e, wake_fd_, &wake_buf_, sizeof wake_buf_, 0);
    io_uring_sqe_set_data64(e, kWakeTag);
}

unsigned UringDriver::reap() {
    if (!late_.empty()) [[unlikely]] { // completions an injected delay held back a turn
        std::vector<LateCqe> late;
        late.swap(late_);
        for (const LateCqe& c : late)
            on_op_cqe(reinterpret_cast<IoOp*>(c.user_data), c.res, false);
    }
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        const std::uint64_t ud = cqe->user_data;
        if (ud == kIgnoreTag) continue;
        if (ud == kWakeTag) {
            arm_wake();
            continue;
        }
        if ((ud & 7) == kMsgTag) {
            if (ud != kMsgTag) reinterpret_cast<UringDriver*>(ud & ~std::uint64_t{7})->wake();
            continue; // (ud == kMsgTag: another worker woke us)
        }
        if ((ud & 7) == kMultishotTag) {
            on_multishot(ud, cqe->res, cqe->flags);
            continue;
        }
        if ((ud & 7) == MultishotAccepts::kTag) {
            accepts_.on_cqe(ud, cqe->res, cqe->flags);
            continue;
        }
        if ((ud & 7) == kRegisterTag || (ud & 7) == kUnregisterTag) {
            on_files_update(ud, cqe->res);
            continue;
        }
        auto* op = reinterpret_cast<IoOp*>(ud);
        std::int32_t res = cqe->res;
        if (op->code == OpCode::send_zc && !send_zc_cqe(*op, res, cqe->flags)) continue;
        on_op_cqe(op, res, true);
    }
    io_uring_cq_advance(&ring_, seen);
    return seen;
}

void UringDriver::on_op_cqe(IoOp* op, std::int32_t res, bool may_delay) {
    if (!injected_.empty()) [[unlikely]]
        res = injected_result(op, res);
    if (faults::on() && may_delay && !shutting_down_) [[unlikely]] {
        if (faults::hit(faults::Kind::late, op->code)) {
            late_.push_back({reinterpret_cast<std::uint64_t>(op), res});
            return;
        }
    }
    if (res == -EBADF && fixed_file(*op) && !uses_fixed(op->fd)) {
        prep(*op); // its slot was never filled: again on the plain fd
        return;
    }
    if ((res == -EINTR || (res == -EAGAIN && !is_file_op(op->code))) &&
        retried_when_interrupted(op->code)) {
        // Interrupted, or a socket that would block after all: issue it again, as a system
        // call would be retried (a file's EAGAIN, from O_NONBLOCK, is reported instead).
        if (!op->cancelled) {
            prep(*op);
            return;
        }
        res = -ECANCELED;
    }
    if (op->code == OpCode::waitid && !uring_waitid_supported()) {
        if (!reap_after_poll(*op, res)) {
            prep(*op); // woken without an exit: wait for the next one
            return;
        }
    } else if (is_mmsg(op->code)) {
        if (!mmsg_ready(*op, res)) {
            prep(*op); // it would block again: wait for the next readiness
            return;
        }
    } else if (op->absorb(res)) {
        if (!op->cancelled) {
            prep(*op); // the rest of a short `all` transfer
            return;
        }
        op->result = -ECANCELED; // stopped part-way (a deadline maps it to timed_out)
    }
    if (op->code == OpCode::recv_pooled && op->result <= 0) // (no buffer rings)
        pool_->put(static_cast<std::uint16_t>(op->aux));    // nothing arrived in it
    --in_flight_;
    if (op->fd >= 0 && static_cast<std::size_t>(op->fd) < fds_.size() &&
        fds_[static_cast<std::size_t>(op->fd)].ops != 0)
        --fds_[static_cast<std::size_t>(op->fd)].ops;
    SchedulerAccess::complete(sched_, *op);
}

/// The readiness poll of a batch op completed with `res`. Returns true when the op is finished,
/// false when its system call would still block.
bool UringDriver::mmsg_ready(IoOp& op, int res) noexcept {
    if (res < 0) {
        op.absorb(res); // cancelled, timed out, or the poll failed
        return true;
    }
    if (attempt_mmsg(op)) return true;
    if (!op.cancelled) return false;
    op.result = -ECANCELED;
    return true;
}

} // namespace galay::detail
