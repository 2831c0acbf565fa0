// src/net/sockopt.hpp: sockets, their options and names, for TCP and UDP.
#pragma once

#include "galay/error.hpp"
#include "galay/net/socket_addr.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace galay::detail {

/// A non-blocking, close-on-exec socket.
Result<int> make_socket(int family, int type, int protocol = 0) noexcept;

inline Result<void> setsockopt_int(int fd, int level, int name, int value) noexcept {
    if (::setsockopt(fd, level, name, &value, sizeof value) < 0) return fail(errno);
    return {};
}

inline Result<int> getsockopt_int(int fd, int level, int name) noexcept {
    int value = 0;
    socklen_t len = sizeof value;
    if (::getsockopt(fd, level, name, &value, &len) < 0) return fail(errno);
    return value;
}

/// getpeername(2) (`peer`) or getsockname(2).
inline Result<SocketAddr> sock_name(int fd, bool peer) noexcept {
    SocketAddr a;
    socklen_t len = SocketAddr::capacity();
    int r = peer ? ::getpeername(fd, a.data(), &len) : ::getsockname(fd, a.data(), &len);
    if (r < 0) return fail(errno);
    return a;
}

} // namespace galay::detail
