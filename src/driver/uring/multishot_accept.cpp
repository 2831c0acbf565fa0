#include "driver/uring/multishot_accept.hpp"

#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace galay::detail {

namespace {

/// Arms a multishot accept on a listening loopback socket of a scratch ring and cancels it:
/// kernels before 5.19 reject the flag with EINVAL, newer ones report the cancellation.
bool probe_multishot_accept() noexcept {
    io_uring ring;
    if (io_uring_queue_init(4, &ring, 0) != 0) return false;
    bool supported = false;
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::listen(fd, 1) == 0) {
        io_uring_sqe* e = io_uring_get_sqe(&ring);
        io_uring_prep_multishot_accept(e, fd, nullptr, nullptr, SOCK_CLOEXEC);
        io_uring_sqe_set_data64(e, 1);
        e = io_uring_get_sqe(&ring);
        io_uring_prep_cancel64(e, 1, 0);
        io_uring_sqe_set_data64(e, 2);
        bool accept_done = false, cancel_done = false;
        while (io_uring_submit(&ring) >= 0 && !(accept_done && cancel_done)) {
            io_uring_cqe* cqe = nullptr;
            if (io_uring_wait_cqe(&ring, &cqe) != 0) break;
            if (cqe->user_data == 1) {
                supported = cqe->res != -EINVAL;
                if (cqe->res >= 0) ::close(cqe->res); // (someone connected meanwhile)
                accept_done = !(cqe->flags & IORING_CQE_F_MORE);
            } else {
                cancel_done = true;
            }
            io_uring_cqe_seen(&ring, cqe);
        }
    }
    if (fd >= 0) ::close(fd);
    io_uring_queue_exit(&ring);
    return supported;
}

} // namespace

bool multishot_accept_supported() noexcept {
    static const bool supported = probe_multishot_accept();
    return supported;
}

MultishotAccepts::~MultishotAccepts() {
    for (Listener& l : listeners_)
        while (l.has_queued())
            if (std::int32_t v = l.pop(); v >= 0) ::close(v);
}

io_uring_sqe* MultishotAccepts::sqe() noexcept {
    io_uring_sqe* e = io_uring_get_sqe(&ring_);
    while (e == nullptr) { // the submission queue is full: flush it and retry
        io_uring_submit(&ring_);
        e = io_uring_get_sqe(&ring_);
    }
    return e;
}

MultishotAccepts::Listener* MultishotAccepts::find(int fd) noexcept {
    for (Listener& l : listeners_)
        if (l.fd == fd) return &l;
    return nullptr;
}

MultishotAccepts::Listener& MultishotAccepts::find_or_add(int fd) {
    if (Listener* l = find(fd)) return *l;
    listeners_.emplace_back().fd = fd;
    return listeners_.back();
}

void MultishotAccepts::arm(Listener& l) {
    io_uring_sqe* e = sqe();
    io_uring_prep_multishot_accept(e, l.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(e, tag(l.fd, l.generation));
    l.armed = true;
    l.paused = false;
    ++in_flight_;
}

void MultishotAccepts::cancel_multishot(const Listener& l) noexcept {
    io_uring_sqe* e = sqe();
    io_uring_prep_cancel64(e, tag(l.fd, l.generation), 0);
    io_uring_sqe_set_data64(e, 1); // the driver ignores its completion (kIgnoreTag)
}

void MultishotAccepts::deliver(IoOp& op, std::int32_t res) noexcept {
    op.result = res;
    // One multishot serves every accept, so it cannot carry a per-call address buffer: ask for
    // the peer only when the caller wants it.
    if (res >= 0 && op.address() != nullptr &&
        ::getpeername(res, op.address(), reinterpret_cast<socklen_t*>(op.address_length())) != 0)
        *op.address_length() = 0;
}

bool MultishotAccepts::submit(IoOp& op) {
    Listener& l = find_or_add(op.fd);
    if (l.has_queued()) { // already accepted: no suspension, no system call
        deliver(op, l.pop());
        return true;
    }
    l.waiter = &op;
    op.pending = true;
    if (!l.armed) arm(l);
    return false;
}

void MultishotAccepts::cancel(IoOp& op) noexcept {
    Listener* l = find(op.fd);
    if (l == nullptr || l->waiter != &op) return;
    l->waiter = nullptr;
    op.result = -ECANCELED;
    SchedulerAccess::complete(sched_, op);
}

void MultishotAccepts::forget(int fd) noexcept {
    Listener* l = find(fd);
    if (l == nullptr) return;
    if (l->armed) cancel_multishot(*l); // it holds the listening socket open
    ++l->generation;                    // its completions are now stale
    l->armed = l->paused = false;
    while (l->has_queued())
        if (std::int32_t v = l->pop(); v >= 0) ::close(v); // accepted, never handed out
    if (IoOp* w = std::exchange(l->waiter, nullptr)) {
        w->result = -ECANCELED;
        SchedulerAccess::complete(sched_, *w);
    }
}

void MultishotAccepts::on_cqe(std::uint64_t ud, std::int32_t res, std::uint32_t flags) noexcept {
    const int fd = static_cast<int>(ud >> 32);
    const std::uint32_t gen = static_cast<std::uint32_t>(ud >> 3) & 0x1fffffff;
    const bool more = flags & IORING_CQE_F_MORE;
    Listener* l = find(fd);
    const bool current = l != nullptr && gen == (l->generation & 0x1fffffff);
    if (!more) {
        --in_flight_;
        if (current) l->armed = false;
    }
    if (!current) { // the listener that armed it is closed: nobody will take this connection
        if (res >= 0) ::close(res);
        return;
    }
    const bool our_pause = res == -ECANCELED && !more && l->paused;
    if (!our_pause) {
        if (IoOp* w = std::exchange(l->waiter, nullptr)) {
            deliver(*w, res);
            SchedulerAccess::complete(sched_, *w);
        } else {
            l->queue.push_back(res);
            // Nobody is accepting: stop taking connections, so the listen backlog pushes back.
            if (more && !l->paused && l->queue.size() - l->head >= kMaxQueued) {
                cancel_multishot(*l);
                l->paused = true;
            }
        }
    }
    if (!l->armed) {
        l->paused = false;
        if (l->waiter != nullptr) arm(*l); // an accept arrived while the multishot was ending
    }
}

} // namespace galay::detail
