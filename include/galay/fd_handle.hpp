// galay/fd_handle.hpp: the base of every galay object that owns a descriptor and does I/O on it:
// closing it, asking for it and giving it up, written once for all of them.
//
//     galay::Task<void> done_with(galay::TcpListener& listener, galay::PipeWriter& to_child) {
//         int fd = listener.fd();                     // borrowed: still the listener's
//         auto closed = co_await listener.close();    // Result<void>; the listener is empty now
//         bool open = to_child.is_open();
//         int mine = to_child.release();              // the caller's to close from now on
//     }
//
// TcpListener, UnixListener, UdpSocket, UnixDatagram, PipeReader and PipeWriter derive from
// FdHandle, and so does StreamSocket, the base of TcpStream and UnixStream: each adds its own
// operations and takes these four from here. A function that only closes an object, or only
// needs its number, can take an `FdHandle&`. An FdHandle is never made, copied or moved on its
// own (those members are protected): it is the descriptor part of a listener, socket or pipe.
//
// Closing: `close()` hands the descriptor to an asynchronous close (IORING_OP_CLOSE on io_uring)
// and leaves the object empty at once; destroying the object closes it synchronously (galay
// forgets it first, then close(2): see OwnedFd, galay/owned_fd.hpp, which is what it holds).
#pragma once

#include "galay/detail/close_op.hpp"
#include "galay/owned_fd.hpp"

namespace galay {

/// The descriptor of a listener, socket or pipe, and what is done to it as such (see the top of
/// this header).
class FdHandle {
public:
    /// Close asynchronously (IORING_OP_CLOSE on io_uring) -> Result<void>; the object is empty at
    /// once. An empty object's close succeeds at once.
    [[nodiscard]] detail::CloseAwaitable close() noexcept {
        return detail::CloseAwaitable(fd_.take());
    }
    /// True while it holds an open descriptor.
    bool is_open() const noexcept { return fd_.is_open(); }
    /// The descriptor, still owned by the object (-1 when empty).
    int fd() const noexcept { return fd_.get(); }
    /// Give up ownership of the descriptor: galay forgets it (and drops it from io_uring's
    /// registered files), and closing it is now the caller's job.
    int release() noexcept { return fd_.release(); }

protected:
    /// Empty.
    FdHandle() noexcept = default;
    /// Owns `fd` (-1: empty).
    explicit FdHandle(int fd) noexcept
        : fd_(fd) {}
    /// Takes over the descriptor of `o`, which is empty after.
    FdHandle(FdHandle&& o) noexcept = default;
    /// Closes its own descriptor, then takes over the one of `o`.
    FdHandle& operator=(FdHandle&& o) noexcept = default;
    /// Closes the descriptor (synchronously).
    ~FdHandle() = default;

    /// The owned descriptor.
    OwnedFd fd_;
};

} // namespace galay
