// The readiness driver's set-up, readiness registration, the op's system call, the poll loop and
// cancellation (epoll_driver.hpp); the poller's system calls are in driver/poller/.
#include "driver/epoll/epoll_driver.hpp"

#include "driver/common/faults.hpp"
#include "driver/common/op_traits.hpp"
#include "driver/mmsg.hpp"
#include "driver/process_ops.hpp"
#include "driver/readiness.hpp"
#include "driver/zero_copy.hpp"
#include "platform/fd_calls.hpp"
#include "runtime/drivers.hpp"
#include "runtime/fd_owners.hpp"

#include <sys/socket.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace galay::detail {

namespace {

// The socket calls of an attempt, made directly on Linux. glibc's recv/send/recvmsg/sendmsg/
// accept4 are cancellation points: in a process with more than one thread, each call switches
// asynchronous cancellation on and off around the system call (~2% of the server's time in the
// HTTP server at 1,000 connections). galay never cancels a thread with pthread_cancel, so it has
// no use for that; syscall() sets errno the same way. Under the sanitizers they stay libc's:
// their interceptors check the buffers (ASan) and make a socket's send and receive a
// happens-before edge (TSan), as they are. Elsewhere, and in the POSIX profile, they are libc's.
#if GALAY_LINUX_CALLS && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define GALAY_DIRECT_SOCKET_CALLS 1
#else
#define GALAY_DIRECT_SOCKET_CALLS 0
#endif

ssize_t sys_recv(int fd, void* buf, std::size_t len, int flags) noexcept {
#if GALAY_DIRECT_SOCKET_CALLS
    return ::syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
#else
    return ::recv(fd, buf, len, flags);
#endif
}
ssize_t sys_send(int fd, const void* buf, std::size_t len, int flags) noexcept {
#if GALAY_DIRECT_SOCKET_CALLS
    return ::syscall(SYS_sendto, fd, buf, len, flags, nullptr, 0);
#else
    return ::send(fd, buf, len, flags);
#endif
}
ssize_t sys_recvmsg(int fd, msghdr* m, int flags) noexcept {
#if GALAY_DIRECT_SOCKET_CALLS
    return ::syscall(SYS_recvmsg, fd, m, flags);
#else
    return ::recvmsg(fd, m, flags);
#endif
}
ssize_t sys_sendmsg(int fd, const msghdr* m, int flags) noexcept {
#if GALAY_DIRECT_SOCKET_CALLS
    return ::syscall(SYS_sendmsg, fd, m, flags);
#else
    return ::sendmsg(fd, m, flags);
#endif
}
/// Accept one connection, non-blocking and close-on-exec: accept4 on Linux; accept and fcntl
/// (and SO_NOSIGPIPE on macOS) elsewhere and in the POSIX profile (platform/fd_calls.hpp).
int sys_accept(int fd, sockaddr* addr, socklen_t* len) noexcept {
#if GALAY_DIRECT_SOCKET_CALLS
    return static_cast<int>(::syscall(SYS_accept4, fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC));
#else
    return platform::accept_cloexec(fd, addr, len);
#endif
}

} // namespace

EpollDriver::EpollDriver(Scheduler& s, const SchedulerOptions& options)
    : sched_(s)
    , pool_(options.pool_buffers, options.pool_buffer_size)
    , fair_(options.fair_completions) {}

EpollDriver::~EpollDriver() {
    disown_all();   // nobody may name us as an owner once we are gone
    files_.reset(); // joins its threads, which may still be waking us (before the poller goes)
}

bool EpollDriver::submit(IoOp& op) {
    if (is_file_op(op.code)) {
        if (!files_) files_ = std::make_unique<EpollFileEngine>(sched_, *this, poller_.fd());
        return files_->submit(op);
    }
    switch (op.code) {
    case OpCode::close:
        forget_fd(op.fd);
        op.result = ::close(op.fd) == 0 ? 0 : -errno;
        return true;
    default:
        break;
    }
    if (op.code == OpCode::recv_pooled && pool_.empty()) {
        // Every buffer is lent out: wait for one to come back (as io_uring does).
        SchedulerAccess::counters(sched_).enobufs.add();
        op.pending = true;
        ++waiting_;
        starved_.push_back(op);
        return false;
    }
    if (waits_for_read(op.code) && static_cast<std::size_t>(op.fd) < fds_.size()) {
        const FdState& st = fds_[static_cast<std::size_t>(op.fd)];
        if (st.registered && !st.maybe_readable) return wait_ready(op);
    }
    if (attempt(op)) return true;
    return wait_ready(op);
}

bool EpollDriver::wait_ready(IoOp& op) {
    drain_remote_forgets_if_any(); // (a number forgotten elsewhere registers afresh)
    FdState& st = state(op.fd);
    if (!st.registered) {
        if (const int r = poller_.watch(op.fd, st.registration + 1); r < 0) {
            op.result = r;
            return true;
        }
        st.registered = true;
        ++st.registration;
    }
    if (op.code == OpCode::poll && !st.foreign) {
        st.foreign = true;
        own(op.fd, st);
    }
    const bool reads =
        waits_for_read(op.code) || (op.code == OpCode::poll && poll_waits_for_read(op));
    // An AsyncFd wait for input and output at once waits with the readers, retried on kOutput.
    if (reads && op.code == OpCode::poll && (op.msg_flags & POLLOUT)) st.poll_out_in_readers = true;
    (reads ? st.readers : st.writers).push_back(op);
    op.pending = true;
    ++waiting_;
    return false;
}

void EpollDriver::cancel(IoOp& op) {
    if (is_file_op(op.code)) {
        if (files_) files_->cancel(op);
        return;
    }
    if (!op.pending) return;
    // A zero-copy send whose bytes are out: the kernel may still read the buffer until its
    // notification, which completes the op (with its real result).
    if (op.code == OpCode::send_zc && op.aux != 0) return;
    if (!starved_.remove(op)) {
        if (static_cast<std::size_t>(op.fd) >= fds_.size()) return;
        FdState& st = fds_[op.fd];
        const bool reads =
            waits_for_read(op.code) || (op.code == OpCode::poll && poll_waits_for_read(op));
        if (!(reads ? st.readers : st.writers).remove(op)) return;
    }
    op.result = -ECANCELED;
    --waiting_;
    SchedulerAccess::complete(sched_, op);
}

void EpollDriver::forget_fd(int fd) noexcept {
    if (fd < 0 || static_cast<std::size_t>(fd) >= fds_.size()) return;
    FdState& st = fds_[fd];
    fail_all(st.readers, -ECANCELED);
    fail_all(st.writers, -ECANCELED);
    // Out of the set by its number while the number still names the file: once it is closed,
    // no call can name that file again (epoll keys a registration on the file), and a stale
    // event carries no descriptor to remove it by. (ENOENT when the owner closed it behind our
    // back and the number is another file's now: that one was never added.)
    if (st.registered && st.foreign) poller_.unwatch(fd);
    if (st.owned) {
        st.owned = false;
        FdOwners::disown(fd, this);
    }
    st.foreign = false;
    st.registered = false;
    st.maybe_readable = true;
    st.peer_closed = false;
    st.poll_out_in_readers = false;
}

void EpollDriver::wake() noexcept {
    poller_.wake();
}

void EpollDriver::poll(std::int64_t timeout_ns) {
    if (files_ && files_->flush() > 0) timeout_ns = 0; // leftover iocbs, refused ops
    if (!withheld_.empty() || !fault_ready_.empty()) [[unlikely]] {
        release_withheld();
        timeout_ns = 0;
    }
    // One wait for at most kEventsPerPoll events. With fair_completions, ask again (no wait)
    // while full batches keep coming, bounded, as the io_uring driver does.
    for (int round = 0;; ++round) {
        drain_remote_forgets_if_any();
        const int n = poller_.wait(round == 0 ? timeout_ns : 0);
        drain_remote_forgets_if_any(); // (before an event of a forgotten number is trusted)
        handle_events(n);
        if (!fair_ || n < static_cast<int>(kEventsPerPoll) || round == kFairRounds) break;
    }
    if (!fault_ready_.empty()) [[unlikely]]
        report_injected_readiness();
    if (files_) files_->reap();
}

void EpollDriver::handle_events(int n) {
    poller_.for_each(n, [this](int fd, std::uint32_t ev, std::uint32_t tag) {
        if (files_ && fd == files_->event_fd()) return; // collected after the batch
        if (static_cast<std::size_t>(fd) >= fds_.size()) return;
        FdState& st = fds_[fd];
        if (Poller::kReportsLevel && st.registered && tag == st.registration) {
            event_fd_ = fd; // its AsyncFd waits complete on `ev` (attempt_poll)
            event_bits_ = ev;
        }
        if (ev & Poller::kClosed) st.peer_closed = true;
        if (ev & Poller::kReadable) {
            st.maybe_readable = true;
            retry(st.readers);
        } else if ((ev & Poller::kOutput) && st.poll_out_in_readers) [[unlikely]] {
            retry(st.readers);
        }
        if (ev & Poller::kWritable) retry(st.writers);
        event_fd_ = -1;
    });
}

void EpollDriver::shutdown() noexcept {
    fail_all(starved_, -ECANCELED);
    for (FdState& st : fds_) {
        fail_all(st.readers, -ECANCELED);
        fail_all(st.writers, -ECANCELED);
    }
    if (files_) files_->shutdown();
}

void EpollDriver::fail_all(OpQueue& list, int err) noexcept {
    while (!list.empty()) {
        IoOp* op = list.pop_front();
        op->result = err;
        --waiting_;
        SchedulerAccess::complete(sched_, *op);
    }
}

void EpollDriver::retry(OpQueue& list) {
    while (!list.empty()) {
        if (list.front()->code == OpCode::recv_pooled && pool_.empty()) {
            SchedulerAccess::counters(sched_).enobufs.add();
            starved_.push_back(*list.pop_front()); // ready, but no buffer: wait for one
            continue;
        }
        if (!attempt(*list.front())) return;
        IoOp* op = list.pop_front();
        --waiting_;
        SchedulerAccess::complete(sched_, *op);
    }
}

FdState& EpollDriver::state(int fd) {
    if (static_cast<std::size_t>(fd) >= fds_.size())
        fds_.resize(std::max<std::size_t>(static_cast<std::size_t>(fd) + 1, fds_.size() * 2));
    return fds_[fd];
}

void EpollDriver::report_injected_readiness() {
    std::vector<int> fds;
    fds.swap(fault_ready_);
    for (int fd : fds) {
        if (static_cast<std::size_t>(fd) >= fds_.size()) continue;
        retry(fds_[static_cast<std::size_t>(fd)].readers);
        retry(fds_[static_cast<std::size_t>(fd)].writers);
    }
}

const DriverEntry readiness_driver_entry{
    .backend = Poller::kBackend,
    .probe =
        [] {
            BackendProbe p; // epoll is in every Linux kernel, kqueue in every macOS and FreeBSD
            p.usable = true;
            return p;
        },
    .make = [](Scheduler& s, const SchedulerOptions& options) -> std::unique_ptr<Driver> {
        return std::make_unique<EpollDriver>(s, options);
    },
};

// Running an op's system call: at once when the op is submitted, and again each time the poller
// reports its fd ready, until it no longer fails with EAGAIN. (In this file, not its own: the
// compiler inlines it into submit and the readiness loop; across files it cost the epoll echo at
// 100 connections ~3% in CPU per request.)

bool EpollDriver::attempt(IoOp& op) noexcept {
    if (op.code == OpCode::send_zc) return attempt_send_zc(op); // driver/zero_copy.hpp
    for (;;) {
        ssize_t r;
        std::size_t len = op.code == OpCode::recv_pooled ? pool_.size() : op.remaining();
        int fake = 0; // a fault injected instead of the system call
        if (faults::on()) [[unlikely]] {
            if (is_mmsg(op.code)) {
                bool blocked = false;
                const bool done = attempt_mmsg(op, &blocked);
                if (blocked) fault_ready_.push_back(op.fd);
                return done;
            }
            if (op.code != OpCode::connect) fake = injected_fault(op, len);
        }
        switch (op.code) {
        case OpCode::recv_pooled: {
            // A buffer is taken only for the system call and given back on EAGAIN, so an
            // idle connection holds none.
            int id = pool_.take();
            if (id < 0) {
                SchedulerAccess::counters(sched_).enobufs.add();
                op.result = -ENOBUFS;
                return true;
            }
            char* b = pool_.address(static_cast<std::uint16_t>(id));
            r = fake != 0 ? (errno = fake, -1) : sys_recv(op.fd, b, len, op.msg_flags);
            if (r > 0 && static_cast<std::size_t>(r) < len) drained(op);
            if (r > 0) {
                op.result = r;
                op.aux = static_cast<std::uint64_t>(id);
                op.buf = b;
                return true;
            }
            pool_.put(static_cast<std::uint16_t>(id));
            break;
        }
        case OpCode::accept:
            r = fake != 0 ? (errno = fake, -1)
                          : sys_accept(op.fd, op.address(),
                                       reinterpret_cast<socklen_t*>(op.address_length()));
            if (r < 0 && errno == ECONNABORTED) continue; // that peer gave up; next one
            break;
        case OpCode::connect:
            if (op.done == 0) {
                op.done = 1; // the connect(2) has been issued; later: collect its outcome
                r = ::connect(op.fd, op.address(), op.len);
                if (r < 0 && errno == EINPROGRESS) return false;
            } else {
                int err = 0;
                socklen_t len = sizeof err;
                ::getsockopt(op.fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err == EINPROGRESS) return false;
                r = err == 0 ? 0 : -1;
                errno = err;
            }
            if (r == 0) {
                op.result = 0;
                return true;
            }
            break;
        case OpCode::recv:
            r = fake != 0 ? (errno = fake, -1) : sys_recv(op.fd, op.cursor(), len, op.msg_flags);
            if (r > 0 && static_cast<std::size_t>(r) < len) drained(op);
            break;
        case OpCode::send:
            r = fake != 0
                    ? (errno = fake, -1)
                    : sys_send(op.fd, op.cursor(), len, op.msg_flags | platform::kSendNoSignal);
            break;
        case OpCode::recvmsg:
            r = fake != 0 ? (errno = fake, -1)
                          : sys_recvmsg(op.fd, static_cast<msghdr*>(op.buf), op.msg_flags);
            break;
        case OpCode::sendmsg:
            r = fake != 0 ? (errno = fake, -1)
                          : sys_sendmsg(op.fd, static_cast<const msghdr*>(op.buf),
                                        op.msg_flags | platform::kSendNoSignal);
            break;
        case OpCode::recvmmsg:
        case OpCode::sendmmsg:
        case OpCode::splice_in:
        case OpCode::splice_out:
        case OpCode::sendfile:
            return attempt_mmsg(op);
        case OpCode::read:
        case OpCode::write:
            r = fake != 0 ? (errno = fake, -1) : pipe_transfer(op, len);
            break;
        case OpCode::waitid:
            return reap_child(op);
        case OpCode::poll:
            return attempt_poll(op);
        default:
            op.result = -EOPNOTSUPP;
            return true;
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
            if (errno == EINTR) continue;
            op.absorb(-errno);
            return true;
        }
        if (op.absorb(r)) continue; // an `all` transfer with bytes still to move
        return true;
    }
}

bool EpollDriver::attempt_poll(IoOp& op) noexcept {
    if (op.fd == event_fd_) return poll_from_event(op, event_bits_); // driver/readiness.hpp
    return poll_now(op);
}

void EpollDriver::drained(const IoOp& op) noexcept {
    if (static_cast<std::size_t>(op.fd) >= fds_.size() || (op.msg_flags & MSG_PEEK)) return;
    FdState& st = fds_[static_cast<std::size_t>(op.fd)];
    if (!st.peer_closed) st.maybe_readable = false;
}

int EpollDriver::injected_fault(const IoOp& op, std::size_t& len) {
    const int e = faults::refusal(op.code);
    if (e == EAGAIN) fault_ready_.push_back(op.fd);
    if (e == 0 && len > 1 && faults::hit(faults::Kind::short_transfer, op.code))
        len = faults::shorter(static_cast<std::uint32_t>(std::min<std::size_t>(len, UINT32_MAX)));
    return e;
}

} // namespace galay::detail
