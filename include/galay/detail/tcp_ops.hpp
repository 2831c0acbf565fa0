// The awaitables of TCP's own operations: accept (TcpListener), connect (TcpStream), and the
// receive into a pooled buffer (TcpStream and UnixStream). Each is made only by the type whose
// operation it is (docs/driver.md: who makes an operation).
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"
#include "galay/net/socket_addr.hpp"

#include <cstdint>

namespace galay {
class PooledBuffer;
class TcpListener;
class TcpStream;
class UnixStream;
} // namespace galay

namespace galay::detail {

/// A receive into a buffer of the scheduler's pool -> Result<PooledBuffer>.
class [[nodiscard]] RecvPooledAwaitable : public IoAwaitable<RecvPooledAwaitable> {
public:
    Result<PooledBuffer> result();

private:
    friend class galay::TcpStream;
    friend class galay::UnixStream;
    explicit RecvPooledAwaitable(int fd) noexcept {
        op_.code = OpCode::recv_pooled;
        op_.fd = fd;
    }
};

/// The next connection of a listener -> Result<TcpStream>.
class [[nodiscard]] AcceptAwaitable : public IoAwaitable<AcceptAwaitable> {
public:
    /// The kernel fills in the peer address only when the caller asked for it.
    void prepare() noexcept {
        if (peer_ != nullptr) op_.set_accept_address(addr_.data(), &addrlen_);
    }
    Result<TcpStream> result();

private:
    friend class galay::TcpListener;
    AcceptAwaitable(int fd, SocketAddr* peer) noexcept;

    SocketAddr addr_;
    std::uint32_t addrlen_ = SocketAddr::capacity();
    SocketAddr* peer_;
};

/// A new socket connected to an address -> Result<TcpStream>.
class [[nodiscard]] ConnectAwaitable : public IoAwaitable<ConnectAwaitable> {
public:
    ConnectAwaitable(ConnectAwaitable&& o) noexcept;
    ~ConnectAwaitable();
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept { op_.set_connect_address(addr_.data(), addr_.size()); }
    Result<TcpStream> result();

private:
    friend class galay::TcpStream;
    explicit ConnectAwaitable(const SocketAddr& addr) noexcept;

    SocketAddr addr_;
    int setup_error_ = 0;
};

} // namespace galay::detail
