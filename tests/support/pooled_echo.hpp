// An echo server on recv_pooled and its clients: what the pooled-buffer tests (with and without
// injected faults) run many connections through.
#pragma once

#include <galay/galay.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace galay::test {

/// Accepts `conns` connections on `l`; each echoes what it receives with recv_pooled until its
/// peer closes. Returns when every connection has ended.
inline Task<void> pooled_echo_server(TcpListener& l, int conns) {
    auto serve = [](TcpStream s) -> Task<void> {
        (void)s.set_nodelay(true); // the echo leaves in pieces: don't let Nagle hold them
        for (;;) {
            auto b = co_await s.recv_pooled();
            if (!b || b->empty()) co_return;
            if (!co_await s.send_all(b->bytes())) co_return;
        }
    };
    std::vector<Task<void>> served;
    for (int i = 0; i < conns; ++i) {
        auto s = co_await l.accept();
        if (!s) throw Error(s.error(), "accept");
        served.push_back(serve(std::move(*s)));
    }
    co_await when_all(std::move(served));
}

/// `conns` clients of a pooled_echo_server on `l`, each sending `msgs` messages of 700 bytes (more
/// than a small pool's buffer: the echo arrives in pieces), message `m` of client `id` filled by
/// `fill(out, id, m)`, each of which must come back whole within 10 s. Returns how many did.
template <class Fill>
Task<std::uint64_t> pooled_echo_round_trips(TcpListener& l, int conns, int msgs, Fill fill) {
    const auto addr = SocketAddr::loopback_v4(l.local_addr()->port());
    auto client = [&](int id) -> Task<std::uint64_t> {
        auto s = co_await TcpStream::connect(addr);
        if (!s) throw Error(s.error(), "connect");
        std::array<std::byte, 700> out, in;
        std::uint64_t ok = 0;
        for (int m = 0; m < msgs; ++m) {
            fill(std::span<std::byte>(out), id, m);
            if (!co_await s->send_all(out)) throw std::runtime_error("send");
            if (!co_await s->recv_exact(in).timeout(std::chrono::seconds(10)))
                throw std::runtime_error("recv");
            if (std::memcmp(in.data(), out.data(), in.size()) != 0)
                throw std::runtime_error("mismatch");
            ++ok;
        }
        co_return ok;
    };
    std::vector<Task<std::uint64_t>> clients;
    for (int i = 0; i < conns; ++i)
        clients.push_back(client(i));
    auto [counts, _] =
        co_await when_all(when_all(std::move(clients)), pooled_echo_server(l, conns));
    std::uint64_t total = 0;
    for (auto c : counts)
        total += c;
    co_return total;
}

} // namespace galay::test
