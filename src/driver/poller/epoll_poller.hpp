// The epoll poller: the system calls the readiness reactor (driver/epoll/epoll_driver.hpp) makes
// to arm descriptors, wait for them and be woken from another thread. Linux only.
#pragma once

#include "galay/backend.hpp"
#include "galay/error.hpp"
#include "platform/fd_calls.hpp"

#include <poll.h>
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
    /// An event's bits are the descriptor's readiness when the wait returned, in poll(2)'s
    /// values: epoll asks each ready file again as it reports it, and leaves out a file no
    /// longer ready. (An AsyncFd wait completes on them without a poll(2) of its own.)
    static constexpr bool kReportsLevel = true;
    static_assert(EPOLLIN == POLLIN && EPOLLPRI == POLLPRI && EPOLLOUT == POLLOUT &&
                  EPOLLERR == POLLERR && EPOLLHUP == POLLHUP && EPOLLRDHUP == POLLRDHUP);

    EpollPoller() {
        ep_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) throw Error(errno_code(errno), "galay: epoll_create1 failed");
        // An eventfd; a pipe in the POSIX profile, as macOS and FreeBSD would have without
        // EVFILT_USER (platform/fd_calls.hpp).
        if (wake_.open() < 0) {
            const int e = errno;
            ::close(ep_);
            throw Error(errno_code(e), "galay: the poller's wake-up descriptor failed");
        }
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = wake_.read_fd();
        ::epoll_ctl(ep_, EPOLL_CTL_ADD, wake_.read_fd(), &ev);
    }
    ~EpollPoller() { ::close(ep_); }
    EpollPoller(const EpollPoller&) = delete;
    EpollPoller& operator=(const EpollPoller&) = delete;

    /// The epoll descriptor (the file engine adds its AIO eventfd to it).
    int fd() const noexcept { return ep_; }

    /// Watch `fd` for both directions, edge-triggered, until it is closed. 0 or -errno. Its
    /// events carry `tag` (for_each's third argument): an event from an earlier file of the
    /// same number, still in the set under its own tag (kept open by a dup elsewhere), is told
    /// apart from the current file's.
    int watch(int fd, std::uint32_t tag) noexcept {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
        ev.data.u64 = static_cast<std::uint64_t>(tag) << 32 | static_cast<std::uint32_t>(fd);
        int r = ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
        if (r < 0 && errno == EEXIST) r = ::epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
        return r < 0 ? -errno : 0;
    }

    /// Stop watching the file `fd` names now. An fd's registration otherwise ends with its
    /// file's last close, not with this number's: one kept open by a dup stays in the set.
    void unwatch(int fd) noexcept {
        epoll_event ev{}; // (kernels before 2.6.9 wanted one even for a delete)
        ::epoll_ctl(ep_, EPOLL_CTL_DEL, fd, &ev);
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

    /// Call `on_ready(fd, bits, tag)` for each of the first `n` events of the last wait, the
    /// wake-ups left out.
    template <class F>
    void for_each(int n, F&& on_ready) {
        for (int i = 0; i < n; ++i) {
            const std::uint64_t data = events_[i].data.u64;
            const int fd = static_cast<int>(static_cast<std::uint32_t>(data));
            if (fd == wake_.read_fd()) [[unlikely]] {
                wake_.drain();
                continue;
            }
            on_ready(fd, events_[i].events, static_cast<std::uint32_t>(data >> 32));
        }
    }

    /// Thread-safe: make a blocked wait return.
    void wake() noexcept { wake_.signal(); }

private:
    int ep_ = -1;
    platform::WakeFd wake_;
    std::array<epoll_event, kMaxEvents> events_{};
};

} // namespace galay::detail
