// The kqueue poller (macOS, FreeBSD): the system calls the readiness reactor
// (driver/epoll/epoll_driver.hpp) makes to arm descriptors, wait for them and be woken from
// another thread, on kevent(2). The semantic differences from epoll the reactor relies on are in
// docs/driver.md ("The kqueue poller").
#pragma once

#include "galay/backend.hpp"
#include "galay/error.hpp"

#include <fcntl.h>
#include <sys/event.h>
#include <sys/time.h>
#include <sys/types.h>
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

/// kevent behind the poller interface (driver/poller/poller.hpp). Each descriptor has two
/// filters, EVFILT_READ and EVFILT_WRITE, both EV_CLEAR (edge-triggered, as the reactor's
/// EPOLLET): an event comes once per change of state, and again only when more data arrives or
/// more room opens. Each is its own event, so one descriptor may appear twice in a batch.
class KqueuePoller {
public:
    static constexpr Backend kBackend = Backend::kqueue;
    static constexpr const char* kName = "kqueue";
    /// As EpollPoller::kMaxEvents; with a filter per direction a batch holds 32 to 64 fds.
    static constexpr std::size_t kMaxEvents = 64;
    /// The bits for_each reports (the reactor's vocabulary; see EpollPoller).
    static constexpr std::uint32_t kOutput = 1u << 0;   // EVFILT_WRITE, no EV_EOF
    static constexpr std::uint32_t kInput = 1u << 1;    // EVFILT_READ
    static constexpr std::uint32_t kHangup = 1u << 2;   // EV_EOF on either filter
    static constexpr std::uint32_t kHangupWr = 1u << 3; // EV_EOF on EVFILT_WRITE
    static constexpr std::uint32_t kReadable = kInput | kHangup;
    static constexpr std::uint32_t kWritable = kOutput | kHangupWr;
    static constexpr std::uint32_t kClosed = kHangup;
    /// A filter's event says only that its direction became ready (or hit EOF): an AsyncFd wait
    /// asks the descriptor with poll(2) for the level (EpollPoller::kReportsLevel).
    static constexpr bool kReportsLevel = false;

    KqueuePoller() {
        kq_ = ::kqueue();
        if (kq_ < 0) throw Error(errno_code(errno), "galay: kqueue failed");
        ::fcntl(kq_, F_SETFD, FD_CLOEXEC); // fork(2) does not inherit a kqueue; exec must not
        // The wake-up: one EVFILT_USER event, EV_CLEAR so that retrieving it re-arms it.
        struct kevent ev;
        EV_SET(&ev, kWakeIdent, EVFILT_USER, EV_ADD | EV_CLEAR, 0, 0, nullptr);
        if (::kevent(kq_, &ev, 1, nullptr, 0, nullptr) < 0) {
            const int e = errno;
            ::close(kq_);
            throw Error(errno_code(e), "galay: kevent(EVFILT_USER) for wake-ups failed");
        }
    }
    ~KqueuePoller() { ::close(kq_); }
    KqueuePoller(const KqueuePoller&) = delete;
    KqueuePoller& operator=(const KqueuePoller&) = delete;

    /// The kqueue descriptor.
    int fd() const noexcept { return kq_; }

    /// Watch `fd` for both directions, EV_CLEAR, until it is closed (close(2) removes its
    /// filters). 0 or -errno. Applied at once rather than with the next wait: a refusal (a
    /// descriptor kqueue cannot watch) then fails the op that asked, as epoll_ctl's does, and
    /// the reactor watches each descriptor once in its life, so deferring would save one system
    /// call per connection, not per operation.
    /// Its events carry `tag` (in udata) as EpollPoller's do.
    int watch(int fd, std::uint32_t tag) noexcept {
        void* udata = reinterpret_cast<void*>(static_cast<uintptr_t>(tag));
        struct kevent ch[2];
        EV_SET(&ch[0], static_cast<uintptr_t>(fd), EVFILT_READ, EV_ADD | EV_CLEAR, 0, 0, udata);
        EV_SET(&ch[1], static_cast<uintptr_t>(fd), EVFILT_WRITE, EV_ADD | EV_CLEAR, 0, 0, udata);
        // EV_RECEIPT: each change answers with its own entry (data: 0 or its errno), so a
        // refusal of one filter is told apart from the other and no pending event is consumed.
        ch[0].flags |= EV_RECEIPT;
        ch[1].flags |= EV_RECEIPT;
        struct kevent out[2];
        int n;
        do
            n = ::kevent(kq_, ch, 2, out, 2, nullptr);
        while (n < 0 && errno == EINTR);
        if (n < 0) return -errno;
        for (int i = 0; i < n; ++i)
            if ((out[i].flags & EV_ERROR) && out[i].data != 0) {
                // Leave nothing half-armed: a descriptor with one filter would wait forever in
                // the other direction.
                struct kevent del[2];
                EV_SET(&del[0], static_cast<uintptr_t>(fd), EVFILT_READ, EV_DELETE, 0, 0, nullptr);
                EV_SET(&del[1], static_cast<uintptr_t>(fd), EVFILT_WRITE, EV_DELETE, 0, 0, nullptr);
                const int err = static_cast<int>(out[i].data);
                ::kevent(kq_, del, 2, nullptr, 0, nullptr); // ENOENT for the refused one
                return -err;
            }
        return 0;
    }

    /// Nothing to do: a kqueue filter belongs to the descriptor, and close(2) of the number
    /// removes it even when a dup keeps the file open (epoll's registration is the file's).
    void unwatch(int /*fd*/) noexcept {}

    /// Wait at most `timeout_ns` (< 0: no limit) for events. Returns how many (0 on EINTR).
    int wait(std::int64_t timeout_ns) noexcept {
        timespec ts{};
        timespec* tsp = nullptr;
        if (timeout_ns >= 0) {
            ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
            ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
            tsp = &ts;
        }
        const int n = ::kevent(kq_, nullptr, 0, events_.data(), static_cast<int>(kMaxEvents), tsp);
        if (n < 0) {
            if (errno == EINTR) return 0;
            std::fprintf(stderr, "galay: kevent failed: %s\n", std::strerror(errno));
            std::abort();
        }
        return n;
    }

    /// Call `on_ready(fd, bits, tag)` for each of the first `n` events of the last wait, the
    /// wake-ups left out. EV_EOF (the peer shut its side, or the connection reset: fflags holds
    /// the socket error) is reported as kHangup, which the reactor treats as EPOLLRDHUP/HUP/ERR:
    /// the waiting op's own system call then returns the end of stream or the error.
    template <class F>
    void for_each(int n, F&& on_ready) {
        for (int i = 0; i < n; ++i) {
            const struct kevent& ev = events_[static_cast<std::size_t>(i)];
            if (ev.filter == EVFILT_USER) [[unlikely]]
                continue; // a wake-up: EV_CLEAR has re-armed it
            const int fd = static_cast<int>(ev.ident);
            std::uint32_t bits;
            if (ev.flags & EV_ERROR) [[unlikely]]
                bits = kInput | kOutput | kHangup | kHangupWr; // the op's call reports it
            else if (ev.filter == EVFILT_READ)
                bits = (ev.flags & EV_EOF) ? kInput | kHangup : kInput;
            else if (ev.filter == EVFILT_WRITE)
                bits = (ev.flags & EV_EOF) ? kHangup | kHangupWr : kOutput;
            else
                continue;
            on_ready(fd, bits, static_cast<std::uint32_t>(reinterpret_cast<uintptr_t>(ev.udata)));
        }
    }

    /// Thread-safe: make a blocked wait return. Triggers coalesce until the wait retrieves them.
    void wake() noexcept {
        struct kevent ev;
        EV_SET(&ev, kWakeIdent, EVFILT_USER, 0, NOTE_TRIGGER, 0, nullptr);
        ::kevent(kq_, &ev, 1, nullptr, 0, nullptr);
    }

private:
    // EVFILT_USER identifiers are their own namespace: 0 cannot meet a descriptor's filters.
    static constexpr uintptr_t kWakeIdent = 0;

    int kq_ = -1;
    std::array<struct kevent, kMaxEvents> events_{};
};

} // namespace galay::detail
