// The asynchronous close that FdHandle::close() returns (the close of every listener, socket and
// pipe).
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"

namespace galay {
class FdHandle;
} // namespace galay

namespace galay::detail {

/// Close `fd` through the driver (io_uring: IORING_OP_CLOSE); nothing to do for fd < 0. Made only
/// by FdHandle::close(), from the descriptor the handle gives up: a close cannot be pointed at a
/// descriptor that something else owns.
class [[nodiscard]] CloseAwaitable : public IoAwaitable<CloseAwaitable> {
public:
    bool await_ready() const noexcept { return op_.fd < 0; }
    Result<void> result() {
        if (op_.fd < 0) return {};
        if (op_.result < 0) return fail(static_cast<int>(-op_.result));
        return {};
    }

private:
    friend class galay::FdHandle;
    explicit CloseAwaitable(int fd) noexcept {
        op_.code = OpCode::close;
        op_.fd = fd;
    }
};

} // namespace galay::detail
