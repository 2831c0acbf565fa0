// The epoll poller: the system calls the readiness reactor (driver/epoll/epoll_driver.hpp) makes
// to arm descriptors, wait for them and be woken from another thread. Linux only.
#pragma once

#include "galay/backend.hpp"
#include "galay/error.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

// The POSIX profile wakes with a pipe, as macOS and FreeBSD would without EVFILT_USER.
#if defined(GALAY_POSIX_ONLY) && GALAY_POSIX_ONLY
#define GALAY_POLLER_WAKE_PIPE 1
#else
#define GALAY_POLLER_WAKE_PIPE 0
#include <sys/eventfd.h>
#endif

namespace galay::detail {

/// epoll_ctl / epoll_pwait2 behind the poller interface (driver/poller/poller.hpp). The event
/// bits the reactor tests are epoll's own, so decoding an event costs nothing.
class EpollPoller {
public:
    static constexpr Backend kBackend = Backend::epoll;
    static constexpr const char* kName = "epoll";
    /// The reactor runs a batch's system calls before resuming its coroutines; see
    /// EpollDriver::kEventsPerPoll for why the batch is bounded.
    static constexpr std::size_t kMaxEvents = 64;
    /// Bits of an event (for_each's second argument). Readable and writable include the hangup
    /// and error conditions: the waiting op's own system call then reports them.
    static constexpr std::uint32_t kReadable =
        EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR;
    static constexpr std::uint32_t kWritable = EPOLLOUT | EPOLLHUP | EPOLLERR;
    static constexpr std::uint32_t kClosed = EPOLLRDHUP | EPOLLHUP | EPOLLERR;
    static constexpr std::uint32_t kOutput = EPOLLOUT; // room to write, without an error

    EpollPoller() {
        ep_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) throw Error(errno_code(errno), "galay: epoll_create1 failed");
#if GALAY_POLLER_WAKE_PIPE
        int p[2] = {-1, -1};
        if (::pipe(p) < 0 || !nonblocking_cloexec(p[0]) || !nonblocking_cloexec(p[1])) {
            const int e = errno;
            if (p[0] >= 0) ::close(p[0]);
            if (p[1] >= 0) ::close(p[1]);
            ::close(ep_);
            throw Error(errno_code(e), "galay: pipe for the poller's wake-ups failed");
        }
        wake_read_ = p[0];
        wake_write_ = p[1];
#else
        wake_read_ = wake_write_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (wake_read_ < 0) {
            const int e = errno;
            ::close(ep_);
            throw Error(errno_code(e), "galay: eventfd failed");
        }
#endif
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = wake_read_;
        ::epoll_ctl(ep_, EPOLL_CTL_ADD, wake_read_, &ev);
    }
    ~EpollPoller() {
        if (wake_write_ != wake_read_) ::close(wake_write_);
        ::close(wake_read_);
        ::close(ep_);
    }
    EpollPoller(const EpollPoller&) = delete;
    EpollPoller& operator=(const EpollPoller&) = delete;

    /// The epoll descriptor (the file engine adds its AIO eventfd to it).
    int fd() const noexcept { return ep_; }

    /// Watch `fd` for both directions, edge-triggered, until it is closed. 0 or -errno.
    int watch(int fd) noexcept {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
        ev.data.fd = fd;
        int r = ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
        if (r < 0 && errno == EEXIST) r = ::epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
        return r < 0 ? -errno : 0;
    }

    /// Wait at most `timeout_ns` (< 0: no limit) for events. Returns how many (0 on EINTR).
    int wait(std::int64_t timeout_ns) noexcept {
        timespec ts{};
        timespec* tsp = nullptr;
        if (timeout_ns >= 0) {
            ts.tv_sec = timeout_ns / 1'000'000'000;
            ts.tv_nsec = timeout_ns % 1'000'000'000;
            tsp = &ts;
        }
        int n = ::epoll_pwait2(ep_, events_.data(), static_cast<int>(kMaxEvents), tsp, nullptr);
        if (n < 0 && errno == ENOSYS) { // kernels before 5.11: millisecond resolution
            int ms = timeout_ns < 0 ? -1 : static_cast<int>((timeout_ns + 999'999) / 1'000'000);
            n = ::epoll_wait(ep_, events_.data(), static_cast<int>(kMaxEvents), ms);
        }
        if (n < 0) {
            if (errno == EINTR) return 0;
            std::fprintf(stderr, "galay: epoll_wait failed: %s\n", std::strerror(errno));
            std::abort();
        }
        return n;
    }

    /// Call `on_ready(fd, bits)` for each of the first `n` events of the last wait, the wake-ups
    /// left out.
    template <class F>
    void for_each(int n, F&& on_ready) {
        for (int i = 0; i < n; ++i) {
            const int fd = events_[i].data.fd;
            if (fd == wake_read_) [[unlikely]] {
                drain_wake();
                continue;
            }
            on_ready(fd, events_[i].events);
        }
    }

    /// Thread-safe: make a blocked wait return.
    void wake() noexcept {
        std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake_write_, &one, sizeof one); // full pipe: pending
    }

private:
    static bool nonblocking_cloexec(int fd) noexcept {
        return ::fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 &&
               ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0;
    }
    void drain_wake() noexcept {
        std::uint64_t v[8];
        while (::read(wake_read_, v, sizeof v) == static_cast<ssize_t>(sizeof v) &&
               wake_write_ != wake_read_) {
        }
    }

    int ep_ = -1;
    int wake_read_ = -1;  // the eventfd, or the read end of the pipe
    int wake_write_ = -1; // the same eventfd, or the write end of the pipe
    std::array<epoll_event, kMaxEvents> events_{};
};

} // namespace galay::detail
