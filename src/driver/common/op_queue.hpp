// An intrusive FIFO of IoOps linked through the op's driver scratch (op_scratch.hpp): no
// allocation, O(1) push/pop, O(n) removal (cancellation). Used by the epoll driver (ops waiting for
// readiness or for a pool buffer) and its file engine (ops waiting for io_submit). Singly linked,
// so an IoOp (one in every awaiting frame) pays one pointer for it.
#pragma once

#include "driver/common/op_scratch.hpp"
#include "galay/detail/intrusive_list.hpp"
#include "galay/detail/io_op.hpp"

namespace galay::detail {

struct OpQueueLinks {
    static IoOp*& next(IoOp& op) noexcept { return driver_scratch<IoOp*>(op); }
};

using OpQueue = IntrusiveList<IoOp, OpQueueLinks>;

} // namespace galay::detail
