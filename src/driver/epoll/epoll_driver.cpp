// The epoll driver's set-up, readiness registration, poll loop and cancellation (epoll_driver.hpp).
#include "driver/epoll/epoll_driver.hpp"

#include "driver/common/op_traits.hpp"
#include "runtime/drivers.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace galay::detail {

EpollDriver::EpollDriver(Scheduler& s, const SchedulerOptions& options)
    : sched_(s)
    , pool_(options.pool_buffers, options.pool_buffer_size) {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) throw Error(errno_code(errno), "galay: epoll_create1 failed");
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) {
        int e = errno;
        ::close(ep_);
        throw Error(errno_code(e), "galay: eventfd failed");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, wake_fd_, &ev);
    events_.resize(512);
}

EpollDriver::~EpollDriver() {
    files_.reset(); // joins its threads, which may still be waking us
    ::close(wake_fd_);
    ::close(ep_);
}

bool EpollDriver::submit(IoOp& op) {
    if (is_file_op(op.code)) {
        if (!files_) files_ = std::make_unique<EpollFileEngine>(sched_, *this, ep_);
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
    FdState& st = state(op.fd);
    if (!st.registered) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        ev.data.fd = op.fd;
        int r = ::epoll_ctl(ep_, EPOLL_CTL_ADD, op.fd, &ev);
        if (r < 0 && errno == EEXIST) r = ::epoll_ctl(ep_, EPOLL_CTL_MOD, op.fd, &ev);
        if (r < 0) {
            op.result = -errno;
            return true;
        }
        st.registered = true;
    }
    (waits_for_read(op.code) ? st.readers : st.writers).push_back(op);
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
    if (!starved_.remove(op)) {
        if (static_cast<std::size_t>(op.fd) >= fds_.size()) return;
        FdState& st = fds_[op.fd];
        if (!(waits_for_read(op.code) ? st.readers : st.writers).remove(op)) return;
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
    st.registered = false;
    st.maybe_readable = true;
    st.peer_closed = false;
}

void EpollDriver::wake() noexcept {
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void EpollDriver::poll(std::int64_t timeout_ns) {
    if (files_ && files_->flush() > 0) timeout_ns = 0; // leftover iocbs, refused ops
    if (!withheld_.empty() || !fault_ready_.empty()) [[unlikely]] {
        release_withheld();
        timeout_ns = 0;
    }
    timespec ts{};
    timespec* tsp = nullptr;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1'000'000'000;
        ts.tv_nsec = timeout_ns % 1'000'000'000;
        tsp = &ts;
    }
    int n = ::epoll_pwait2(ep_, events_.data(), static_cast<int>(events_.size()), tsp, nullptr);
    if (n < 0 && errno == ENOSYS) { // kernels before 5.11: millisecond resolution
        int ms = timeout_ns < 0 ? -1 : static_cast<int>((timeout_ns + 999'999) / 1'000'000);
        n = ::epoll_wait(ep_, events_.data(), static_cast<int>(events_.size()), ms);
    }
    if (n < 0) {
        if (errno == EINTR) return;
        std::fprintf(stderr, "galay: epoll_wait failed: %s\n", std::strerror(errno));
        std::abort();
    }
    for (int i = 0; i < n; ++i) {
        const int fd = events_[i].data.fd;
        const std::uint32_t ev = events_[i].events;
        if (fd == wake_fd_) {
            std::uint64_t v;
            [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
            continue;
        }
        if (files_ && fd == files_->event_fd()) continue; // collected below
        if (static_cast<std::size_t>(fd) >= fds_.size()) continue;
        FdState& st = fds_[fd];
        if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) st.peer_closed = true;
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
            st.maybe_readable = true;
            retry(st.readers);
        }
        if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) retry(st.writers);
    }
    if (static_cast<std::size_t>(n) == events_.size()) events_.resize(events_.size() * 2);
    if (!fault_ready_.empty()) [[unlikely]]
        report_injected_readiness();
    if (files_) files_->reap();
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

const DriverEntry epoll_driver_entry{
    .backend = Backend::epoll,
    .probe =
        [] {
            BackendProbe p; // epoll is in every Linux kernel
            p.usable = true;
            return p;
        },
    .make = [](Scheduler& s, const SchedulerOptions& options) -> std::unique_ptr<Driver> {
        return std::make_unique<EpollDriver>(s, options);
    },
};

} // namespace galay::detail
