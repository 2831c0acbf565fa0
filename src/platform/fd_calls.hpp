// Descriptors made close-on-exec (and non-blocking where asked) in one call where Linux has it
// (SOCK_CLOEXEC, accept4, pipe2, eventfd), with fcntl after the call in the POSIX profile, on
// macOS and on FreeBSD (galay/detail/platform.hpp decides). Also: no SIGPIPE from a send
// (MSG_NOSIGNAL, or SO_NOSIGPIPE where the system has no such flag) and a wake-up descriptor for
// cross-thread notifications (an eventfd, or a pipe).
#pragma once

#include "galay/detail/platform.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#if GALAY_HAVE_EVENTFD
#include <sys/eventfd.h>
#endif

namespace galay::platform {

/// The open(2) flag of a `direct` file: O_DIRECT on Linux and FreeBSD, else 0 (macOS sets
/// F_NOCACHE after the open: set_direct; the POSIX profile refuses the open, GALAY_HAVE_DIRECT_IO).
#if GALAY_HAVE_O_DIRECT || defined(__FreeBSD__)
inline constexpr int kODirect = O_DIRECT;
#else
inline constexpr int kODirect = 0;
#endif

/// Make a just-opened `direct` file bypass the page cache where open(2) has no flag for it:
/// fcntl(F_NOCACHE) on macOS, nothing elsewhere. 0, or -1 with errno.
inline int set_direct(int fd) noexcept {
#if defined(__APPLE__)
    return ::fcntl(fd, F_NOCACHE, 1) < 0 ? -1 : 0;
#else
    (void)fd;
    return 0;
#endif
}

/// Was `fd` opened to bypass the page cache? O_DIRECT in its status flags. macOS has no public
/// call that reads F_NOCACHE back: there a descriptor galay did not open counts as buffered.
inline bool is_direct(int fd) noexcept {
#if GALAY_HAVE_DIRECT_IO && !defined(__APPLE__)
    const int fl = ::fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & kODirect) != 0;
#else
    (void)fd;
    return false;
#endif
}

/// Set FD_CLOEXEC, and O_NONBLOCK when `nonblocking`. 0, or -1 with errno.
inline int set_fd_flags(int fd, bool nonblocking) noexcept {
    const int fdf = ::fcntl(fd, F_GETFD);
    if (fdf < 0 || ::fcntl(fd, F_SETFD, fdf | FD_CLOEXEC) < 0) return -1;
    if (!nonblocking) return 0;
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    return 0;
}

/// Closes `fd` keeping errno (after a failed fcntl), and returns -1.
inline int close_failed(int fd) noexcept {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
}

/// SO_NOSIGPIPE on the systems whose send has no MSG_NOSIGNAL (macOS): a send to a closed peer
/// then fails with EPIPE instead of killing the process. Nothing where MSG_NOSIGNAL exists.
inline void no_sigpipe(int fd) noexcept {
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#else
    (void)fd;
#endif
}

/// The send flag that keeps a closed peer from raising SIGPIPE (0 where no_sigpipe() does it).
#if defined(MSG_NOSIGNAL)
inline constexpr int kSendNoSignal = MSG_NOSIGNAL;
#else
inline constexpr int kSendNoSignal = 0;
#endif

/// socket(2), close-on-exec, non-blocking when asked, never raising SIGPIPE. -1 with errno.
inline int socket_cloexec(int domain, int type, int protocol, bool nonblocking) noexcept {
#if GALAY_HAVE_ATOMIC_FD_FLAGS
    return ::socket(domain, type | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), protocol);
#else
    const int fd = ::socket(domain, type, protocol);
    if (fd < 0) return -1;
    if (set_fd_flags(fd, nonblocking) < 0) return close_failed(fd);
    no_sigpipe(fd);
    return fd;
#endif
}

/// socketpair(2) as socket_cloexec. 0, or -1 with errno.
inline int socketpair_cloexec(int domain, int type, int protocol, int sv[2],
                              bool nonblocking) noexcept {
#if GALAY_HAVE_ATOMIC_FD_FLAGS
    return ::socketpair(domain, type | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), protocol,
                        sv);
#else
    if (::socketpair(domain, type, protocol, sv) < 0) return -1;
    for (int i = 0; i < 2; ++i) {
        if (set_fd_flags(sv[i], nonblocking) < 0) {
            ::close(sv[1 - i]);
            return close_failed(sv[i]);
        }
        no_sigpipe(sv[i]);
    }
    return 0;
#endif
}

/// pipe(2), both ends close-on-exec (and non-blocking when asked). 0, or -1 with errno.
inline int pipe_cloexec(int fds[2], bool nonblocking) noexcept {
#if GALAY_HAVE_ATOMIC_FD_FLAGS
    return ::pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0));
#else
    if (::pipe(fds) < 0) return -1;
    if (set_fd_flags(fds[0], nonblocking) < 0 || set_fd_flags(fds[1], nonblocking) < 0) {
        ::close(fds[1]);
        return close_failed(fds[0]);
    }
    return 0;
#endif
}

/// accept(2) of a connection that is close-on-exec and non-blocking (accept4 on Linux; accept and
/// fcntl elsewhere, where a fork + exec on another thread between the two may inherit it, as with
/// every POSIX runtime there). -1 with errno.
inline int accept_cloexec(int fd, sockaddr* addr, socklen_t* len) noexcept {
#if GALAY_HAVE_ATOMIC_FD_FLAGS
    return ::accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    const int c = ::accept(fd, addr, len);
    if (c < 0) return -1;
    if (set_fd_flags(c, true) < 0) return close_failed(c);
    no_sigpipe(c);
    return c;
#endif
}

/// A descriptor that becomes readable when another thread (or a signal handler) calls signal():
/// an eventfd on Linux, a pipe elsewhere (both ends non-blocking, close-on-exec). signal() and
/// drain() are async-signal-safe.
class WakeFd {
public:
    WakeFd() = default;
    WakeFd(const WakeFd&) = delete;
    WakeFd& operator=(const WakeFd&) = delete;
    ~WakeFd() { close(); }

    /// Creates the descriptor(s). 0, or -1 with errno.
    int open() noexcept {
#if GALAY_HAVE_EVENTFD
        read_ = write_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        return read_ < 0 ? -1 : 0;
#else
        int fds[2];
        if (pipe_cloexec(fds, true) < 0) return -1;
        read_ = fds[0];
        write_ = fds[1];
        return 0;
#endif
    }
    /// The end to wait on (poll/epoll/kqueue for readability).
    int read_fd() const noexcept { return read_; }
    /// Makes read_fd() readable (a full pipe already is: nothing is lost).
    void signal() const noexcept {
        const std::uint64_t one = 1;
        [[maybe_unused]] const ssize_t r = ::write(write_, &one, write_ == read_ ? 8 : 1);
    }
    /// Consumes every signal() so far: read_fd() is not readable until the next one.
    void drain() const noexcept {
        std::uint64_t buf[16];
        while (::read(read_, buf, write_ == read_ ? 8 : sizeof buf) > 0 && write_ != read_) {
        }
    }
    void close() noexcept {
        if (write_ >= 0 && write_ != read_) ::close(write_);
        if (read_ >= 0) ::close(read_);
        read_ = write_ = -1;
    }

private:
    int read_ = -1;
    int write_ = -1;
};

} // namespace galay::platform
