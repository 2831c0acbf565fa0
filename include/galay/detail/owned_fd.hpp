// galay/detail/owned_fd.hpp: the file descriptor that TcpStream, TcpListener, UdpSocket and
// fs::File own.
#pragma once

#include "galay/detail/io_op.hpp" // close_fd, forget_fd_everywhere

#include <utility>

namespace galay::detail {

/// A file descriptor with one owner. Move-only; destroying it (or move-assigning over it)
/// closes it with close_fd (galay forgets it first, then close(2), complete on return).
class OwnedFd {
public:
    OwnedFd() noexcept = default;
    explicit OwnedFd(int fd) noexcept
        : fd_(fd) {}
    OwnedFd(OwnedFd&& o) noexcept
        : fd_(o.take()) {}
    OwnedFd& operator=(OwnedFd&& o) noexcept {
        if (this != &o) {
            close_fd(fd_);
            fd_ = o.take();
        }
        return *this;
    }
    ~OwnedFd() { close_fd(fd_); }

    int get() const noexcept { return fd_; }
    bool is_open() const noexcept { return fd_ >= 0; }
    /// Hand the fd to whoever closes it next (an asynchronous close): nothing is forgotten here.
    int take() noexcept { return std::exchange(fd_, -1); }
    /// Give up ownership: galay forgets the fd (and drops it from io_uring's registered files),
    /// and closing it is now the caller's job.
    int release() noexcept {
        forget_fd_everywhere(fd_);
        return take();
    }

private:
    int fd_ = -1;
};

} // namespace galay::detail
