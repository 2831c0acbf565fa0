// File descriptors leaving the ring: `forget_fd` (closed or released now, on this thread),
// `close_later` (a TCP stream's IORING_OP_CLOSE, submitted at once), `forget_fd_remote` (closed
// on another thread), and what they share: dropping the fd's multishot recv, registered slot and
// queued completions, then making the kernel let go of the file.
#include "driver/uring/uring_driver.hpp"

#include <cerrno>
#include <mutex>

namespace galay::detail {

void UringDriver::forget_fd(int fd) noexcept {
    const unsigned queued = io_uring_sq_ready(&ring_);
    drop_fd_state(fd);
    if (fd >= 0 && static_cast<std::size_t>(fd) < fds_.size() && fds_[fd].owned) {
        fds_[fd].owned = false;
        FdOwners::disown(fd, this);
    }
    // close(2) does not cancel io_uring requests that hold the file: do it explicitly, when
    // any does (a cancel by fd walks every pending request: with 1,000 connections waiting
    // in recv, closing a file read once per HTTP request cost more than the read).
    if (has_ops(fd)) {
        io_uring_sqe* e = sqe();
        io_uring_prep_cancel_fd(e, fd, IORING_ASYNC_CANCEL_ALL);
        io_uring_sqe_set_data64(e, kIgnoreTag);
    }
    if (io_uring_sq_ready(&ring_) != queued) let_go_now();
}

// Closing a TCP stream inside the loop: the multishot cancel, the slot clearing and an
// IORING_OP_CLOSE (in that order) are submitted at once, in one io_uring_enter, and the kernel,
// not a close(2), drops the fd. Not with the loop's next submission: that is the task's next
// operation, typically a client's connect for its next request, so the FIN would reach the
// server together with the new connection's request and the server would close the old one
// before answering the new one, on the new request's path. Listeners, UDP
// sockets and files are closed with close(2) (let_go_now first): the same, the FIN or the
// port's release leaves now.
bool UringDriver::close_later(int fd) noexcept {
    if (loop_depth_ == 0 || shutting_down_ || fd < 0 ||
        static_cast<std::size_t>(fd) >= fds_.size() || !fds_[fd].stream)
        return false;
    drop_fd_state(fd);
    if (fds_[fd].owned) {
        fds_[fd].owned = false;
        FdOwners::disown(fd, this);
    }
    if (has_ops(fd)) { // (before the close: by fd, it must still name this file)
        io_uring_sqe* e = sqe();
        io_uring_prep_cancel_fd(e, fd, IORING_ASYNC_CANCEL_ALL);
        io_uring_sqe_set_data64(e, kIgnoreTag);
    }
    io_uring_sqe* e = sqe();
    io_uring_prep_close(e, fd);
    io_uring_sqe_set_data64(e, kIgnoreTag);
    // Nothing reads a close's completion: a successful one posts none (5.17+), as in the
    // hand-written loop, so the connection costs one CQE fewer to post and reap.
    if ((ring_.features & IORING_FEAT_CQE_SKIP) != 0) e->flags |= IOSQE_CQE_SKIP_SUCCESS;
    let_go_now(); // (the FIN leaves now, see above)
    return true;
}

void UringDriver::loop_left() noexcept {
    --loop_depth_;
}

void UringDriver::forget_fd_remote(int fd) noexcept {
    // Called with FdOwners::mutex() held; ownership is already given up. The fd number may
    // be reused at once, but it can only reach this thread through something synchronised
    // after the flag below, and submit() drops the old state before using any fd.
    remote_forgets_.push(fd);
    wake();
}

void UringDriver::drain_remote_forgets() noexcept {
    for (int fd : remote_forgets_.take()) {
        if (static_cast<std::size_t>(fd) < fds_.size()) fds_[fd].owned = false;
        drop_fd_state(fd);
    }
}

/// Drop what this driver holds for `fd` (its multishot recv, its registered slot, queued
/// buffers), before the fd is closed or handed over. Ownership is the caller's business.
void UringDriver::drop_fd_state(int fd) noexcept {
    if (multishot_accept_) accepts_.forget(fd);
    if (fd < 0 || static_cast<std::size_t>(fd) >= fds_.size()) return;
    FdState& m = fds_[static_cast<std::size_t>(fd)];
    if (m.armed) {
        // The armed recv holds the socket open: closing the fd alone would never send
        // the FIN. Cancel it by its user_data, which (unlike the fd number, closed and
        // perhaps reused before this is submitted) names exactly this connection's recv.
        io_uring_sqe* e = sqe();
        io_uring_prep_cancel64(e, multishot_tag(fd, m.generation), 0);
        io_uring_sqe_set_data64(e, kIgnoreTag);
    }
    if (m.file == FdState::kRegistered) { // the slot's reference would keep it open too
        io_uring_sqe* e = sqe();
        io_uring_prep_files_update(e, &kNoFile, 1, fd);
        io_uring_sqe_set_data64(e, static_cast<std::uint64_t>(fd) << 32 | kUnregisterTag);
    }
    m.file = FdState::kUnregistered; // (a refusal was about that file, not the number)
    m.armed_fixed = false;
    ++m.generation; // completions of the old connection are now stale
    m.armed = false;
    m.starved = false;
    m.paused = false;
    m.stream = false;
    m.transfers = 0;
    if (static_cast<std::size_t>(fd) >= rx_.size()) return;
    Received& r = rx_[static_cast<std::size_t>(fd)];
    while (r.has_queued()) {
        Completion c = r.pop();
        if (c.res > 0) give_back(c.buffer);
    }
    if (IoOp* w = std::exchange(r.waiter, nullptr)) {
        w->result = -ECANCELED;
        SchedulerAccess::complete(sched_, *w);
    }
}

/// Make the kernel act on the cancellations and slot clearings just queued before the fd is
/// closed: submit them, and run the completions they cause (with DEFER_TASKRUN those run only
/// when this thread enters the kernel asking for events), so that every reference the ring
/// held on the file is dropped when this returns. Otherwise they would go with the next loop
/// turn, and after block_on returned that may be never: no FIN, the port still bound, and a
/// cancel-by-fd issued after close(2) finds nothing. The completions are reaped by the next
/// poll as usual.
void UringDriver::let_go_now() noexcept {
    int r;
    do
        r = io_uring_submit_and_get_events(&ring_);
    while (r == -EINTR);
}

} // namespace galay::detail
