// An intrusive FIFO of IoOps linked through IoOp::next_waiter: no allocation, O(1) push/pop,
// O(n) removal (cancellation). Used by the epoll driver (ops waiting for readiness or for a pool
// buffer) and its file engine (ops waiting for io_submit). Singly linked, so an IoOp (one in every
// awaiting frame) pays one pointer for it.
#pragma once

#include "galay/detail/intrusive_list.hpp"
#include "galay/detail/io_op.hpp"

namespace galay::detail {

struct OpQueueLinks {
    static IoOp*& next(IoOp& op) noexcept { return op.next_waiter; }
};

using OpQueue = IntrusiveList<IoOp, OpQueueLinks>;

} // namespace galay::detail
