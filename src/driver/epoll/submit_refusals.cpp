// What the epoll file engine does when io_submit refuses an iocb: four policies, named in
// `SubmitRefusal` and applied one function each. They are rare (a kernel or filesystem without a
// feature, a resource shortage, a bad fd), so they live apart from the submission path.
#include "driver/epoll/file_engine.hpp"

#include <cerrno>

namespace galay::detail {

#if GALAY_WITH_AIO // (every refusal is io_submit's: none without libaio)

EpollFileEngine::SubmitRefusal EpollFileEngine::classify_refusal(int r,
                                                                 std::size_t off) const noexcept {
    if (r == -EAGAIN && in_kernel_ > 0) return SubmitRefusal::retry_later;
    if (r == -EINVAL && is_sync_op(static_cast<IoOp*>(to_submit_[off]->data)->code))
        return SubmitRefusal::sync_on_pool;
    if ((r == -EOPNOTSUPP || r == -EINVAL) && nowait_) return SubmitRefusal::without_nowait;
    return SubmitRefusal::fail_op;
}

bool EpollFileEngine::on_submit_refused(int r, std::size_t& off) {
    switch (classify_refusal(r, off)) {
    case SubmitRefusal::retry_later:
        requeue_unsubmitted(off);
        return false;
    case SubmitRefusal::sync_on_pool:
        redo_sync_on_pool(off);
        return true;
    case SubmitRefusal::without_nowait:
        submit_without_nowait(off);
        return true;
    case SubmitRefusal::fail_op:
        fail_refused(r, off);
        return true;
    }
    return true;
}

void EpollFileEngine::requeue_unsubmitted(std::size_t off) {
    // The kernel is short of resources: keep the rest (in order) for a later turn.
    for (std::size_t i = to_submit_.size(); i-- > off;) {
        IoOp& op = *static_cast<IoOp*>(to_submit_[i]->data);
        release_slot(to_submit_[i]);
        queue_.push_front(op);
        ++queued_;
    }
}

void EpollFileEngine::redo_sync_on_pool(std::size_t& off) {
    iocb* cb = to_submit_[off++];
    IoOp& op = *static_cast<IoOp*>(cb->data);
    release_slot(cb);
    refuse_sync(op);
}

void EpollFileEngine::refuse_sync(IoOp& op) {
    // io_submit said EINVAL to an fsync iocb: either this kernel has no AIO fsync (before 4.18)
    // or this file has no fsync at all (a pipe, a socket). fsync(2) on the pool tells them apart
    // (drain_pool): if it succeeds, AIO fsync is off for good; if not, the caller gets fsync(2)'s
    // own error, as io_uring would give it.
    op.aux = kSyncRefusedByAio;
    to_pool(op);
}

void EpollFileEngine::submit_without_nowait(std::size_t off) noexcept {
    // This kernel or filesystem has no RWF_NOWAIT for AIO: submit blocking from now on.
    nowait_ = false;
    for (std::size_t i = off; i < to_submit_.size(); ++i)
        if (!is_sync_op(static_cast<IoOp*>(to_submit_[i]->data)->code))
            to_submit_[i]->aio_rw_flags = 0;
}

void EpollFileEngine::fail_refused(int r, std::size_t& off) {
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

#endif

} // namespace galay::detail
