// Multishot readiness waits for AsyncFd in edge mode: arming, parking, completions, forgetting
// (driver/uring/multishot_poll.hpp says the contract).
#include "driver/uring/multishot_poll.hpp"

#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace galay::detail {

namespace {
/// What a caller's EAGAIN uses up; an error or a hang-up stays until the descriptor is dropped.
constexpr unsigned kEdgeEvents = POLLIN | POLLOUT | POLLPRI | POLLRDBAND;
/// Reported to every wait whatever it asked, as poll(2) does.
constexpr unsigned kAlways = POLLERR | POLLHUP;
} // namespace

io_uring_sqe* MultishotPolls::sqe() noexcept {
    io_uring_sqe* e = io_uring_get_sqe(&ring_);
    while (e == nullptr) { // the submission queue is full: flush it and retry
        io_uring_submit(&ring_);
        e = io_uring_get_sqe(&ring_);
    }
    return e;
}

void MultishotPolls::arm(int fd, Entry& e, unsigned events) {
    io_uring_sqe* s = sqe();
    io_uring_prep_poll_multishot(s, fd, events);
    io_uring_sqe_set_data64(s, tag(fd, e.generation));
    e.armed = events;
    ++in_flight_;
}

void MultishotPolls::cancel_poll(int fd, const Entry& e) noexcept {
    io_uring_sqe* s = sqe();
    io_uring_prep_cancel64(s, tag(fd, e.generation), 0);
    io_uring_sqe_set_data64(s, 1); // the driver ignores its completion (kIgnoreTag)
}

void MultishotPolls::finish(IoOp& op, std::int32_t res) noexcept {
    if (res >= 0 && (res & POLLRDBAND)) res |= POLLPRI; // (urgent data, as the caller asked it)
    op.result = res;
    SchedulerAccess::complete(sched_, op);
}

bool MultishotPolls::submit(IoOp& op) {
    const auto i = static_cast<std::size_t>(op.fd);
    if (i >= fds_.size()) fds_.resize(std::max(i + 1, fds_.size() * 2));
    Entry& e = fds_[i];
    unsigned want = static_cast<unsigned>(op.msg_flags);
    // (io_uring leaves EPOLLPRI out when it matches a wake-up against the poll's events; TCP's
    // urgent-data wake-up also names POLLRDBAND: see prepare.cpp)
    if (want & POLLPRI) want |= POLLRDBAND;
    e.ready &= ~(want & kEdgeEvents); // the caller's EAGAIN used these up
    if (const unsigned hit = e.ready & (want | kAlways)) {
        op.result = static_cast<std::int32_t>(hit & POLLRDBAND ? hit | POLLPRI : hit);
        return true;
    }
    e.waiters.push_back(&op);
    op.pending = true;
    if ((e.armed & want) != want) {
        const unsigned events = e.armed | want;
        if (e.armed != 0) {
            cancel_poll(op.fd, e);
            ++e.generation; // the old poll's completions are stale from here
        }
        arm(op.fd, e, events);
    }
    return false;
}

void MultishotPolls::cancel(IoOp& op) noexcept {
    const auto i = static_cast<std::size_t>(op.fd);
    if (i >= fds_.size()) return;
    auto& w = fds_[i].waiters;
    auto it = std::find(w.begin(), w.end(), &op);
    if (it == w.end()) return;
    w.erase(it);
    finish(op, -ECANCELED);
}

void MultishotPolls::forget(int fd) noexcept {
    if (fd < 0 || static_cast<std::size_t>(fd) >= fds_.size()) return;
    Entry& e = fds_[static_cast<std::size_t>(fd)];
    if (e.armed != 0) cancel_poll(fd, e); // it holds a reference to the file
    ++e.generation;
    e.armed = 0;
    e.ready = 0;
    std::vector<IoOp*> waiters;
    waiters.swap(e.waiters);
    for (IoOp* w : waiters)
        finish(*w, -ECANCELED);
}

void MultishotPolls::on_cqe(std::uint64_t ud, std::int32_t res, std::uint32_t flags) noexcept {
    const int fd = static_cast<int>(ud >> 32);
    const std::uint32_t gen = static_cast<std::uint32_t>(ud >> 4) & 0x0fffffff;
    const bool more = flags & IORING_CQE_F_MORE;
    if (!more) --in_flight_;
    if (static_cast<std::size_t>(fd) >= fds_.size()) return;
    Entry& e = fds_[static_cast<std::size_t>(fd)];
    if (gen != (e.generation & 0x0fffffff)) return; // a replaced or forgotten poll
    const unsigned armed = e.armed;
    if (!more) e.armed = 0;
    if (res < 0) { // the poll itself failed (a descriptor that cannot be polled, shutdown)
        std::vector<IoOp*> waiters;
        waiters.swap(e.waiters);
        for (IoOp* w : waiters)
            finish(*w, res);
        return;
    }
    e.ready |= static_cast<unsigned>(res);
    std::size_t kept = 0;
    for (IoOp* w : e.waiters) {
        unsigned want = static_cast<unsigned>(w->msg_flags);
        if (want & POLLPRI) want |= POLLRDBAND;
        if (const unsigned hit = e.ready & (want | kAlways))
            finish(*w, static_cast<std::int32_t>(hit));
        else
            e.waiters[kept++] = w;
    }
    e.waiters.resize(kept);
    // The kernel ended the poll (an overflowing completion queue, ...): waits still parked
    // need it back.
    if (e.armed == 0 && !e.waiters.empty()) arm(fd, e, armed);
}

} // namespace galay::detail
