// A connected loopback TCP pair, the fixture of most stream tests.
#pragma once

#include <galay/galay.hpp>

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

} // namespace galay::test
