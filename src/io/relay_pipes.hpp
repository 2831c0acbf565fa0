// The per-thread pool of pipes that io::copy splices through (relay_pipes.cpp), for the splice
// pump (splice_pump.cpp) and the tests that count what the pool holds.
#pragma once

#include "galay/error.hpp"

#include <cstddef>
#include <cstdint>

namespace galay::io::detail {

/// A pipe of the current thread's pool: taken while bytes move, given back empty.
struct RelayPipe {
    int read = -1;
    int write = -1;
    std::uint32_t capacity = 0;
};
/// A pipe from this thread's pool (a new one when it is empty).
Result<RelayPipe> take_relay_pipe() noexcept;
/// Back to the pool; a pipe that still holds bytes (a failed or cancelled relay) is closed.
void give_relay_pipe(RelayPipe p, bool empty) noexcept;
/// Pipes waiting in this thread's pool.
std::size_t relay_pipes_pooled() noexcept;

} // namespace galay::io::detail
