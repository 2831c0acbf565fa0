// Helpers of the send tests (send_to_test, zero_copy_test): a connected loopback TCP pair,
// deterministic text, and the current scheduler's operations in flight.
#pragma once

#include "driver/driver.hpp"
#include "runtime/scheduler_access.hpp"
#include "support/tcp_pair.hpp"

#include <galay/galay.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace galay::test {

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
