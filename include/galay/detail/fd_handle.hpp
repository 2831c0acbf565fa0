// galay/detail/fd_handle.hpp: the owned descriptor under the streams and pipes, with what every
// one of them offers on it (close, is_open, fd, release).
#pragma once

#include "galay/detail/close_op.hpp"
#include "galay/detail/owned_fd.hpp"

namespace galay::detail {

/// An owned descriptor and the operations on it that do not depend on what it is. Derived classes
/// add the I/O; destroying one closes the descriptor.
class FdHandle {
public:
    /// Close asynchronously (IORING_OP_CLOSE on io_uring). Empty at once.
    [[nodiscard]] CloseAwaitable close() noexcept { return CloseAwaitable(fd_.take()); }
    /// True while it holds a descriptor.
    bool is_open() const noexcept { return fd_.is_open(); }
    /// The descriptor, still owned (-1 when empty).
    int fd() const noexcept { return fd_.get(); }
    /// Give up ownership of the descriptor: galay forgets it (and drops it from io_uring's
    /// registered files), and closing it is now the caller's job.
    int release() noexcept { return fd_.release(); }

protected:
    FdHandle() noexcept = default;
    explicit FdHandle(int fd) noexcept
        : fd_(fd) {}
    FdHandle(FdHandle&& o) noexcept = default;
    FdHandle& operator=(FdHandle&& o) noexcept = default;
    ~FdHandle() = default;

    OwnedFd fd_;
};

} // namespace galay::detail
