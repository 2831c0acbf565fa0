// galay::AsyncFd (galay/async_fd.hpp): checking and preparing a foreign descriptor, letting go of
// it, and the readiness values of its waits (OpCode::poll; the drivers run it: docs/driver.md).
#include "galay/async_fd.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

namespace galay {

namespace {

/// 0 when `fd` can be watched (and is now non-blocking), else the reason as a code.
std::error_code prepare_fd(int fd) noexcept {
    if (fd < 0) return errno_code(EBADF);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return errno_code(errno);
    // A regular file or a directory always polls ready (and epoll refuses it): a wait there would
    // complete at once forever. (eventfd, timerfd, signalfd and inotify descriptors have no
    // file type bits at all; sockets, pipes and devices have theirs.)
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return make_error_code(errc::not_pollable);
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) return errno_code(errno);
    if ((flags & O_NONBLOCK) == 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return errno_code(errno);
    return {};
}

} // namespace

Result<AsyncFd> AsyncFd::borrow(int fd) noexcept {
    if (std::error_code ec = prepare_fd(fd)) return std::unexpected(ec);
    // What the drivers remember about this number belongs to an earlier file of it (closed
    // behind their back): drop it, so the first wait registers afresh and inherits no waiter.
    detail::forget_fd_everywhere(fd);
    return AsyncFd(fd, false);
}

Result<AsyncFd> AsyncFd::adopt(OwnedFd fd) noexcept {
    if (std::error_code ec = prepare_fd(fd.get())) return std::unexpected(ec);
    const int raw = fd.release(); // (forgets it everywhere, as borrow does)
    return AsyncFd(raw, true);
}

AsyncFd::AsyncFd(AsyncFd&& o) noexcept
    : fd_(std::exchange(o.fd_, -1))
    , owns_(std::exchange(o.owns_, false)) {}

AsyncFd& AsyncFd::operator=(AsyncFd&& o) noexcept {
    if (this != &o) {
        reset();
        fd_ = std::exchange(o.fd_, -1);
        owns_ = std::exchange(o.owns_, false);
    }
    return *this;
}

AsyncFd::~AsyncFd() {
    reset();
}

int AsyncFd::stop_watching() noexcept {
    const int fd = std::exchange(fd_, -1);
    owns_ = false;
    // Every driver fails this number's waits with ECANCELED and lets go of the file now (io_uring:
    // its polls are cancelled in this call, so a close right after really closes the socket).
    detail::forget_fd_everywhere(fd);
    return fd;
}

void AsyncFd::reset() noexcept {
    const bool owned = owns_;
    const int fd = stop_watching();
    if (owned && fd >= 0) detail::close_fd(fd);
}

int AsyncFd::release() noexcept {
    return stop_watching();
}

namespace detail {

namespace {
#ifdef POLLRDHUP
constexpr int kPollPeerClosed = POLLRDHUP;
#else
constexpr int kPollPeerClosed = 0; // Linux's; elsewhere the peer's shutdown is POLLIN's EOF
#endif
} // namespace

int poll_events(Interest interest) noexcept {
    const auto i = static_cast<std::uint8_t>(interest);
    int events = 0;
    if (i & static_cast<std::uint8_t>(Interest::readable)) events |= POLLIN | kPollPeerClosed;
    if (i & static_cast<std::uint8_t>(Interest::writable)) events |= POLLOUT;
    if (i & static_cast<std::uint8_t>(Interest::priority)) events |= POLLPRI;
    return events;
}

Result<Readiness> readiness_result(std::int64_t result) {
    if (result < 0) return fail(static_cast<int>(-result));
    const auto revents = static_cast<unsigned>(result);
    std::uint8_t bits = 0;
    if (revents & POLLIN) bits |= Readiness::kReadable;
    if (revents & POLLOUT) bits |= Readiness::kWritable;
    if (revents & POLLPRI) bits |= Readiness::kPriority;
    if (revents & POLLERR) bits |= Readiness::kError;
    if (revents & (POLLHUP | kPollPeerClosed)) bits |= Readiness::kHangup;
    return Readiness(bits);
}

} // namespace detail
} // namespace galay
