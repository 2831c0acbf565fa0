// The bytes every IoOp keeps for the driver that holds it (IoOp::driver_scratch), given a type.
// The public header only sizes them; each driver views them as a small trivial type of its own
// (epoll: its queue link, op_queue.hpp; io_uring: UringOpScratch), so what a driver keeps per op
// is no field an awaitable can see, and costs no allocation.
#pragma once

#include "galay/detail/io_op.hpp"

#include <new>
#include <type_traits>

namespace galay::detail {

/// `op`'s driver scratch as a `T`. The scratch is an array of unsigned char, whose lifetime
/// implicitly creates the trivial `T` this access needs ([intro.object]); a driver writes a field
/// before it reads it (the bytes start zeroed).
template <class T>
T& driver_scratch(IoOp& op) noexcept {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_default_constructible_v<T>,
                  "the driver scratch holds implicit-lifetime types only");
    static_assert(sizeof(T) <= sizeof(IoOp::DriverScratch::bytes), "too big for the scratch");
    static_assert(alignof(T) <= alignof(IoOp::DriverScratch), "over-aligned for the scratch");
    return *std::launder(reinterpret_cast<T*>(op.driver_scratch.bytes));
}

} // namespace galay::detail
