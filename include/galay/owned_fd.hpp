// galay/owned_fd.hpp: a file descriptor with one owner, closed when the owner is done with it.
//
//     galay::OwnedFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); // galay closes it from now on
//     if (!fd.is_open()) return;                                     // (-1: open failed)
//     int raw = fd.get();                                            // still owned by `fd`
//     galay::OwnedFd other = std::move(fd);                          // `fd` is empty now
//     int mine = other.release();                                    // the caller's to close
//
// An OwnedFd is a value: move it and the descriptor goes with it; destroy it (or move-assign over
// it) and the descriptor is closed. What galay adds over a plain close(2): every scheduler forgets
// the descriptor first (io_uring's registered-file slot, an armed multishot receive), so the close
// is complete when the destructor returns (the peer sees the FIN, a listener's port is free).
// `release()` makes them forget it too before it hands the descriptor back. Descriptors received
// over a Unix socket (`FdMessage::fds`, galay/net/unix.hpp) are OwnedFds; `UniqueFd` is the same
// type under the name descriptor passing gave it first.
//
// An OwnedFd owns a number; the objects that do I/O on the descriptor they own (listeners,
// sockets, pipes) are built on FdHandle (galay/fd_handle.hpp), which holds one.
#pragma once

#include <utility>

namespace galay {

class FdHandle;
namespace fs {
class File;
} // namespace fs

namespace detail {
/// galay is about to close `fd`, or to hand it to the user (`release()`): the current thread's
/// driver forgets it, and so does the driver that registered it (at once when that driver belongs
/// to this thread, even outside block_on; from another thread it is told to, and does so the
/// next time it runs). Returns false in that last case: a driver on another thread may still hold
/// the fd's file for a while.
bool forget_fd_everywhere(int fd) noexcept;
/// forget_fd_everywhere(fd), then close(2), so that the close is complete when this returns (the
/// peer sees the FIN, a listener's port is free). Nothing for fd < 0.
void close_fd(int fd) noexcept;
} // namespace detail

/// A file descriptor with one owner (see the top of this header). Move-only.
class OwnedFd {
public:
    /// No descriptor.
    OwnedFd() noexcept = default;
    /// Take ownership of `fd` (-1: none).
    explicit OwnedFd(int fd) noexcept
        : fd_(fd) {}
    /// Takes over the descriptor of `o`, which holds none after.
    OwnedFd(OwnedFd&& o) noexcept
        : fd_(o.take()) {}
    /// Closes its own descriptor, then takes over the one of `o`.
    OwnedFd& operator=(OwnedFd&& o) noexcept {
        if (this != &o) {
            detail::close_fd(fd_);
            fd_ = o.take();
        }
        return *this;
    }
    OwnedFd(const OwnedFd&) = delete;
    OwnedFd& operator=(const OwnedFd&) = delete;
    /// Closes the descriptor: galay forgets it, then close(2), complete on return.
    ~OwnedFd() { detail::close_fd(fd_); }

    /// The descriptor (-1 when empty), still owned.
    int get() const noexcept { return fd_; }
    /// True while it holds a descriptor.
    bool is_open() const noexcept { return fd_ >= 0; }
    /// Give up ownership: galay forgets the descriptor (and drops it from io_uring's registered
    /// files), and closing it is now the caller's job.
    int release() noexcept {
        detail::forget_fd_everywhere(fd_);
        return take();
    }

private:
    // The asynchronous closes (FdHandle::close, fs::File::close) hand the descriptor to a close
    // operation, which makes the drivers forget it itself: nothing is forgotten here.
    friend class FdHandle;
    friend class fs::File;
    int take() noexcept { return std::exchange(fd_, -1); }

    int fd_ = -1;
};

/// The same type under the name descriptor passing gave it first (`FdMessage::fds`).
using UniqueFd = OwnedFd;

} // namespace galay
