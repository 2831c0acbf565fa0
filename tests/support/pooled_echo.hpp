// An echo server on recv_pooled, and the driver of its clients: what the pooled-buffer tests (with
// and without injected faults) run many connections through.
#pragma once

#include <galay/galay.hpp>

#include <cstdint>
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

/// Runs `clients` and `server` together; the sum of what the clients return.
inline Task<std::uint64_t> sum_with_server(std::vector<Task<std::uint64_t>> clients,
                                           Task<void> server) {
    auto [counts, _] = co_await when_all(when_all(std::move(clients)), std::move(server));
    std::uint64_t total = 0;
    for (auto c : counts)
        total += c;
    co_return total;
}

} // namespace galay::test
