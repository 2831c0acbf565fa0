// The asynchronous close of a socket that TcpStream, TcpListener and UdpSocket offer as close().
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"

namespace galay::detail {

/// Close `fd` through the driver (io_uring: IORING_OP_CLOSE); nothing to do for fd < 0.
class [[nodiscard]] CloseAwaitable : public IoAwaitable<CloseAwaitable> {
public:
    explicit CloseAwaitable(int fd) noexcept {
        op_.code = OpCode::close;
        op_.fd = fd;
    }
    bool await_ready() const noexcept { return op_.fd < 0; }
    Result<void> result() {
        if (op_.fd < 0) return {};
        if (op_.result < 0) return fail(static_cast<int>(-op_.result));
        return {};
    }
};

} // namespace galay::detail
