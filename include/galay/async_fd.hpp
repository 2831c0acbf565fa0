// galay/async_fd.hpp: waiting until a descriptor galay did not open is ready (a libpq or libcurl
// socket, an inotify, eventfd, timerfd or signalfd descriptor, a device): the other library keeps
// doing its own reads and writes, galay only says when.
//
//     galay::Result<galay::AsyncFd> afd = galay::AsyncFd::borrow(library_socket());
//     if (!afd) co_return;                                  // a closed fd, a regular file ...
//     auto r = co_await afd->readable().timeout(5s);        // Result<void>
//     if (r) library_reads();                               // the library reads, not galay
//     auto ev = co_await afd->ready(galay::Interest::readable); // Result<galay::Readiness>
//     if (ev && ev->error()) library_reads();               // POLLERR: its read reports it
//
// Readiness is level-triggered: a wait completes at once while the descriptor is ready, so the
// caller need not read until EAGAIN (libcurl does not); waiting again without reading completes
// again. `readable()` and `writable()` may be pending at the same time (from two tasks, or
// `when_any`); each takes `.timeout(d)`, `.deadline(t)` and the task's cancellation like every
// galay operation.
//
// Lifetime, the one rule: **destroy (or `reset()`/`release()`) the AsyncFd before the
// descriptor is closed**. Its waits then end with `ECANCELED` and galay lets go of the file at
// once (io_uring: the poll, which holds a reference to the file, is cancelled before the call
// returns; epoll: the file leaves the loop's epoll set, where a dup elsewhere would keep it, and
// the number's state is cleared, so a new descriptor with the same number starts clean). libcurl's
// CURL_POLL_REMOVE comes before it closes a socket and libpq's PQsocket changes only inside its own
// calls: drop the AsyncFd there, and make a new one for the new socket, even when the number is the
// same. A descriptor closed while a wait is armed is the caller's bug: the wait then ends at its
// timeout or cancellation (io_uring keeps the old file open until then); docs/guide/async-fd.md
// says exactly what is and is not guaranteed.
//
// An AsyncFd waits on the thread of the scheduler that runs the wait. It may be made, moved,
// reset, released or destroyed on another thread (a plain thread, another worker) while no wait
// is pending: the loop that watched it then lets go of the file before the call returns (epoll:
// the file leaves that loop's set at once, the number's state is cleared at its next turn). End
// a pending wait first, on its loop or with a CancelToken: a reset elsewhere does not reach an
// io_uring poll. One AsyncFd per descriptor, and never on a descriptor one of galay's own objects
// (a TcpStream, a File) holds.
#pragma once

#include "galay/detail/async_fd_ops.hpp"
#include "galay/error.hpp"
#include "galay/owned_fd.hpp"

namespace galay {

/// Readiness on a descriptor galay did not open (see the top of this header). Move-only.
class AsyncFd {
public:
    /// Empty: its waits fail with EBADF.
    AsyncFd() noexcept = default;
    /// Watch `fd` without owning it: never closed by galay. The descriptor is put in
    /// non-blocking mode. Fails with EBADF for a closed fd and `errc::not_pollable` for a
    /// regular file or a directory (always ready: readiness means nothing there).
    static Result<AsyncFd> borrow(int fd) noexcept;
    /// The same, owning `fd`: closed when the AsyncFd is destroyed or reset. On failure `fd`
    /// is closed too.
    static Result<AsyncFd> adopt(OwnedFd fd) noexcept;

    /// Takes over `o`'s descriptor (its pending waits go on: they name the descriptor, not
    /// the object); `o` is empty after.
    AsyncFd(AsyncFd&& o) noexcept;
    /// reset(), then takes over `o`'s descriptor.
    AsyncFd& operator=(AsyncFd&& o) noexcept;
    AsyncFd(const AsyncFd&) = delete;
    AsyncFd& operator=(const AsyncFd&) = delete;
    /// reset().
    ~AsyncFd();

    /// The descriptor (-1 when empty).
    int fd() const noexcept { return fd_; }
    /// True while it watches a descriptor.
    bool is_open() const noexcept { return fd_ >= 0; }
    /// True when it closes its descriptor (made by adopt()).
    bool owns() const noexcept { return owns_; }

    /// Stop watching: every pending wait ends with `ECANCELED` and galay lets go of the file
    /// before this returns; an owned descriptor is then closed. Empty after.
    void reset() noexcept;
    /// Stop watching as reset() does, but hand the descriptor back (-1 when empty), owned or
    /// not: closing it is the caller's business. Empty after.
    int release() noexcept;

    /// Completes when a read will not block (data, end of file, an error or a hang-up to
    /// read) -> Result<void>.
    [[nodiscard]] detail::ReadyAwaitable readable() noexcept {
        return detail::ReadyAwaitable(fd_, Interest::readable);
    }
    /// Completes when a write will not block (room, or an error to report) -> Result<void>.
    [[nodiscard]] detail::ReadyAwaitable writable() noexcept {
        return detail::ReadyAwaitable(fd_, Interest::writable);
    }
    /// Completes when priority data is there (TCP urgent data, a cgroup or /proc event, a
    /// pseudo-terminal's state change) or the descriptor failed -> Result<void>.
    [[nodiscard]] detail::ReadyAwaitable priority() noexcept {
        return detail::ReadyAwaitable(fd_, Interest::priority);
    }
    /// Completes when any of `interest` holds, or the descriptor failed or hung up ->
    /// Result<Readiness>: which of them happened.
    [[nodiscard]] detail::ReadinessAwaitable ready(Interest interest) noexcept {
        return detail::ReadinessAwaitable(fd_, interest);
    }

private:
    AsyncFd(int fd, bool owns) noexcept
        : fd_(fd)
        , owns_(owns) {}
    /// Forget the descriptor in every driver and take it out of the object.
    int stop_watching() noexcept;

    int fd_ = -1;
    bool owns_ = false;
};

} // namespace galay
