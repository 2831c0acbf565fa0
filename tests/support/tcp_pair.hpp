// Loopback TCP connections for the stream tests: a connected pair (the fixture of most of them),
// and a blocking client for a peer that runs on a thread with no scheduler.
#pragma once

#include <galay/galay.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

namespace galay::test {

/// A client and the server side of one loopback TCP connection, over `listener` (a fresh one on
/// an ephemeral port when null).
inline Task<std::pair<TcpStream, TcpStream>> loopback_pair(TcpListener* listener = nullptr) {
    TcpListener own;
    if (listener == nullptr) {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        if (!l) throw Error(l.error(), "bind");
        own = std::move(*l);
    }
    TcpListener& l = listener ? *listener : own;
    auto [c, s] = co_await when_all(
        as_task(TcpStream::connect(SocketAddr::loopback_v4(l.local_addr()->port()))),
        as_task(l.accept()));
    if (!c) throw Error(c.error(), "connect");
    if (!s) throw Error(s.error(), "accept");
    co_return std::pair{std::move(*c), std::move(*s)};
}

/// A blocking loopback client (plain system calls, usable with no scheduler running) whose
/// receives time out after 10 s, so that a FIN that never comes fails the test instead of hanging.
/// -1 when it cannot connect.
inline int connect_blocking(std::uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    timeval tv{.tv_sec = 10, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

} // namespace galay::test
