// Helpers of the send tests (send_to_test, zero_copy_test): a connected loopback TCP pair,
// deterministic text, and the current scheduler's operations in flight.
#pragma once

#include "driver/driver.hpp"
#include "runtime/scheduler_access.hpp"

#include <galay/galay.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace galay::test {

/// A client and the server side of one loopback TCP connection.
inline Task<std::pair<TcpStream, TcpStream>> loopback_pair() {
    auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
    if (!l) throw Error(l.error(), "bind");
    auto [c, s] = co_await when_all(
        as_task(TcpStream::connect(SocketAddr::loopback_v4(l->local_addr()->port()))),
        as_task(l->accept()));
    if (!c) throw Error(c.error(), "connect");
    if (!s) throw Error(s.error(), "accept");
    co_return std::pair{std::move(*c), std::move(*s)};
}

/// `n` deterministic lowercase letters of stream `seed`.
inline std::string letters(std::size_t n, unsigned seed) {
    std::string s(n, '\0');
    std::uint32_t x = seed * 2654435761u + 1;
    for (char& c : s) {
        x = x * 1103515245u + 12345u;
        c = static_cast<char>('a' + (x >> 16) % 26);
    }
    return s;
}

/// Operations the current scheduler's driver has in flight.
inline std::size_t ops_in_flight() {
    return detail::SchedulerAccess::driver(*Scheduler::current()).in_flight();
}

} // namespace galay::test
