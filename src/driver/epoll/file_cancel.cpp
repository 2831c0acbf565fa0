// Cancelling the epoll file engine's ops (a queued one at once; one in the kernel offered to
// io_cancel; one on a pool thread left to finish) and its shutdown, which waits until neither the
// kernel nor a pool thread touches any op's buffers.
#include "driver/epoll/file_engine.hpp"

#include "galay/blocking.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace galay::detail {

void EpollFileEngine::cancel(IoOp& op) noexcept {
    if (queue_.remove(op)) {
        --queued_;
        op.result = -ECANCELED;
        SchedulerAccess::complete(sched_, op);
        return;
    }
    if (pool_pending_ > 0 && blocking_cancel(this, &op)) {
        --pool_pending_;
        op.result = -ECANCELED;
        SchedulerAccess::complete(sched_, op);
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
        SchedulerAccess::complete(sched_, *op);
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
                    SchedulerAccess::complete(sched_, op);
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
                SchedulerAccess::complete(self->sched_, *static_cast<IoOp*>(op));
            },
            this);
        while (pool_pending_ > 0) { // ops running on pool threads cannot be interrupted
            drain_pool();
            if (pool_pending_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    }
}

} // namespace galay::detail
