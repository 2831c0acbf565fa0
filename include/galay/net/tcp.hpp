// galay/net/tcp.hpp: TCP listeners and streams.
//
//     galay::Task<void> echo(galay::TcpStream s) {
//         std::array<char, 4096> buf;
//         for (;;) {
//             auto n = co_await s.recv(buf).timeout(30s);
//             if (!n || *n == 0) co_return;                       // error, timeout or EOF
//             auto sent = co_await s.send_all(std::span(buf.data(), *n));
//             if (!sent) co_return;
//         }
//     }
//     galay::Task<void> serve() {
//         auto listener = galay::TcpListener::bind(*galay::SocketAddr::parse("0.0.0.0:8080"));
//         if (!listener) co_return;
//         for (;;) {
//             auto conn = co_await listener->accept();
//             if (!conn) continue;
//             galay::spawn(echo(std::move(*conn)));
//         }
//     }
//
// Every operation returns `Result<...>` and accepts `.timeout(d)`; destroying a stream closes it.
// Streams that galay accepts or connects have TCP_NODELAY on (as Go does): a write leaves at once
// instead of waiting for the peer's delayed ACK, which otherwise costs ~40 ms per message whose
// last segment is short. `set_nodelay(false)` or `ListenOptions::nodelay = false` turns Nagle
// back on for a program that makes many tiny writes and prefers fewer packets.
#pragma once

#include "galay/detail/buffers.hpp"
#include "galay/detail/tcp_ops.hpp"
#include "galay/detail/transfer_ops.hpp"
#include "galay/fd_handle.hpp"
#include "galay/net/socket_addr.hpp"
#include "galay/task.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace galay {

namespace io::detail {
struct ZeroCopy; // io::send_all_zc's way to its stream's socket (galay/io/zero_copy.hpp)
} // namespace io::detail

/// Bytes received by `recv_pooled`, in a buffer lent by the scheduler's pool. Move-only; the
/// buffer goes back to the pool when this is destroyed (or `release()`d), so keep it only as long
/// as needed and destroy it on the scheduler's thread, before the scheduler.
class PooledBuffer {
public:
    PooledBuffer() noexcept = default;
    /// Takes over the buffer of `o`, which holds none after.
    PooledBuffer(PooledBuffer&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr))
        , data_(o.data_)
        , size_(o.size_)
        , id_(o.id_) {}
    /// Gives its own buffer back, then takes over the one of `o`.
    PooledBuffer& operator=(PooledBuffer&& o) noexcept {
        if (this != &o) {
            release();
            owner_ = std::exchange(o.owner_, nullptr);
            data_ = o.data_;
            size_ = o.size_;
            id_ = o.id_;
        }
        return *this;
    }
    ~PooledBuffer() { release(); }

    /// The first byte received.
    const char* data() const noexcept { return data_; }
    /// Bytes received (0 after `release()`).
    std::size_t size() const noexcept { return size_; }
    /// True when it holds no bytes.
    bool empty() const noexcept { return size_ == 0; }
    /// The bytes received, as a span.
    std::span<const char> bytes() const noexcept { return {data_, size_}; }

    /// Give the buffer back to the pool now (the destructor does it otherwise).
    void release() noexcept {
        if (owner_ != nullptr) give_back(*std::exchange(owner_, nullptr), id_);
        size_ = 0;
    }

private:
    friend class detail::RecvPooledAwaitable;
    PooledBuffer(Scheduler* owner, const char* data, std::size_t size, std::uint16_t id) noexcept
        : owner_(owner)
        , data_(data)
        , size_(size)
        , id_(id) {}
    static void give_back(Scheduler& owner, std::uint16_t id) noexcept;

    Scheduler* owner_ = nullptr;
    const char* data_ = nullptr;
    std::size_t size_ = 0;
    std::uint16_t id_ = 0;
};

/// Which direction `TcpStream::shutdown` ends (shutdown(2)'s SHUT_RD, SHUT_WR, SHUT_RDWR).
enum class Shutdown { read = SHUT_RD, write = SHUT_WR, both = SHUT_RDWR };

/// A connected byte-stream socket: the base of TcpStream and UnixStream, with the operations on
/// its descriptor that do not depend on the address family (receive, send, shutdown; close and
/// the descriptor itself come from FdHandle). Each stream adds its own constructors, addresses
/// and options; a function that only moves bytes can take a `StreamSocket&` and serve both.
class StreamSocket : public FdHandle {
public:
    /// Receive up to `buf.size()` bytes; 0 means the peer closed its side.
    template <MutableBuffer B>
    [[nodiscard]] detail::TransferAwaitable recv(B&& buf, int flags = 0) noexcept {
        return {detail::OpCode::recv,   fd_.get(), std::ranges::data(buf), std::ranges::size(buf),
                detail::Transfer::some, flags};
    }
    /// Receive exactly `buf.size()` bytes; EOF before that is `galay::errc::unexpected_eof`.
    /// More than 4 GiB - 1 bytes in one call is `errc::transfer_too_large` (nothing is received).
    template <MutableBuffer B>
    [[nodiscard]] detail::TransferAwaitable recv_exact(B&& buf) noexcept {
        return {detail::OpCode::recv,    fd_.get(), std::ranges::data(buf), std::ranges::size(buf),
                detail::Transfer::exact, 0};
    }
    /// Send some of `buf`; returns how many bytes the kernel took.
    template <ConstBuffer B>
    [[nodiscard]] detail::TransferAwaitable send(const B& buf, int flags = 0) noexcept {
        return {detail::OpCode::send,   fd_.get(), detail::buffer_data(buf), std::ranges::size(buf),
                detail::Transfer::some, flags};
    }
    /// Send all of `buf`, finishing short writes; returns buf.size() on success. More than
    /// 4 GiB - 1 bytes in one call is `errc::transfer_too_large` (nothing is sent).
    template <ConstBuffer B>
    [[nodiscard]] detail::TransferAwaitable send_all(const B& buf) noexcept {
        return {detail::OpCode::send,  fd_.get(), detail::buffer_data(buf), std::ranges::size(buf),
                detail::Transfer::all, 0};
    }
    /// Scatter read into several buffers (one system call / one SQE).
    [[nodiscard]] detail::VectorAwaitable readv(std::span<const iovec> iov) noexcept {
        return {detail::OpCode::recvmsg, fd_.get(), iov};
    }
    /// Gather write from several buffers; may be short like send().
    [[nodiscard]] detail::VectorAwaitable writev(std::span<const iovec> iov) noexcept {
        return {detail::OpCode::sendmsg, fd_.get(), iov};
    }

    /// shutdown(2): stop reading, writing or both (the peer sees EOF after a write shutdown).
    Result<void> shutdown(Shutdown how = Shutdown::write) noexcept;

protected:
    StreamSocket() noexcept = default;
    /// Adopt a connected socket (made non-blocking if it is not).
    explicit StreamSocket(int fd) noexcept;
    /// Tag: the fd is known to be O_NONBLOCK (galay made it), so no fcntl.
    struct NonBlocking {};
    /// Adopt a socket galay made non-blocking.
    StreamSocket(int fd, NonBlocking) noexcept
        : FdHandle(fd) {}
    /// Move: the socket goes with it, `o` is left empty.
    StreamSocket(StreamSocket&& o) noexcept = default;
    /// Move-assign: closes what this held, takes `o`'s socket.
    StreamSocket& operator=(StreamSocket&& o) noexcept = default;
    ~StreamSocket() = default;
};

/// A connected TCP socket. Move-only; destroying it closes the socket. It receives with recv,
/// recv_exact, recv_pooled or readv, sends with send, send_all or writev, and ends with shutdown
/// or close: the byte-stream operations of its base, StreamSocket, which it shares with
/// UnixStream.
class TcpStream : public StreamSocket {
public:
    TcpStream() noexcept = default;
    /// Adopt a connected socket (made non-blocking if it is not).
    explicit TcpStream(int fd) noexcept
        : StreamSocket(fd) {}
    /// Takes over the socket of `o`, which is empty after.
    TcpStream(TcpStream&& o) noexcept = default;
    /// Closes its own socket, then takes over the one of `o`.
    TcpStream& operator=(TcpStream&& o) noexcept = default;
    ~TcpStream() = default;

    /// Connect to `addr`. `co_await TcpStream::connect(addr).timeout(2s)` -> Result<TcpStream>.
    /// A refused connection is `std::errc::connection_refused`.
    [[nodiscard]] static detail::ConnectAwaitable connect(const SocketAddr& addr) noexcept {
        return detail::ConnectAwaitable(addr);
    }
    /// Resolve `host` and connect to the first address that accepts, each attempt bounded by
    /// `per_attempt` (0: no limit).
    [[nodiscard]] static Task<Result<TcpStream>> connect(std::string host, std::uint16_t port,
                                                         std::chrono::nanoseconds per_attempt = {});

    /// Receive whatever has arrived into a buffer lent by the scheduler's pool (empty = the peer
    /// closed). On io_uring this is one multishot recv per connection over a provided-buffer
    /// ring: no submission per receive, and no memory held by idle connections. A timed-out or
    /// cancelled recv_pooled consumes nothing; later bytes come with the next call. Once a
    /// stream has used it, receive from it only with recv_pooled: on io_uring the multishot recv
    /// stays armed and takes what arrives, so a plain recv would wait for bytes it already has
    /// (to keep bytes across calls, `io::BufReader::append` them).
    [[nodiscard]] detail::RecvPooledAwaitable recv_pooled() noexcept {
        return detail::RecvPooledAwaitable(fd_.get());
    }

    /// TCP_NODELAY: send small writes at once instead of coalescing them (Nagle off). On by
    /// default for streams galay accepts or connects; `false` turns Nagle's algorithm back on.
    Result<void> set_nodelay(bool on) noexcept;
    /// Whether TCP_NODELAY is set (getsockopt).
    Result<bool> nodelay() const noexcept;
    /// SO_KEEPALIVE: probe an idle connection, so a dead peer is found.
    Result<void> set_keepalive(bool on) noexcept;
    /// SO_RCVBUF, in bytes (capped by the kernel's rmem_max).
    Result<void> set_recv_buffer_size(int bytes) noexcept;
    /// SO_SNDBUF, in bytes (capped by the kernel's wmem_max).
    Result<void> set_send_buffer_size(int bytes) noexcept;
    /// SO_LINGER with a zero timeout: close() then sends RST instead of FIN.
    Result<void> set_linger_reset() noexcept;
    /// The remote address (getpeername).
    Result<SocketAddr> peer_addr() const noexcept;
    /// The local address (getsockname).
    Result<SocketAddr> local_addr() const noexcept;

private:
    friend class detail::AcceptAwaitable;
    friend class detail::ConnectAwaitable;
    friend struct io::detail::ZeroCopy;
    TcpStream(int fd, NonBlocking) noexcept
        : StreamSocket(fd, NonBlocking{}) {}
    /// io::send_all_zc on this stream's socket.
    detail::TransferAwaitable send_zc(const void* buf, std::size_t len) noexcept {
        return {detail::OpCode::send_zc, fd_.get(), buf, len, detail::Transfer::all, 0};
    }
};

/// Socket options for TcpListener::bind and bind_sharded.
struct ListenOptions {
    /// listen(2)'s backlog: connections the kernel queues before they are accepted.
    int backlog = 4096;
    /// SO_REUSEADDR: bind a port that connections of an earlier server still hold in TIME_WAIT.
    bool reuse_addr = true;
    /// SO_REUSEPORT: several listeners share one port. Linux lets any socket of the same user
    /// that also sets it share the port, another process included; `bind_sharded` does not.
    bool reuse_port = false;
    /// IPV6_V6ONLY: an IPv6 listener refuses IPv4 connections.
    bool v6_only = false;
    /// TCP_NODELAY on the listener, which accepted streams inherit (no system call per
    /// connection). `false` leaves Nagle's algorithm on for them.
    bool nodelay = true;
};

/// A listening TCP socket. Its descriptor (`fd`, `close`, `release`) is an FdHandle's.
class TcpListener : public FdHandle {
public:
    TcpListener() noexcept = default;
    /// Takes over the socket of `o`, which is empty after.
    TcpListener(TcpListener&& o) noexcept = default;
    /// Closes its own socket, then takes over the one of `o`.
    TcpListener& operator=(TcpListener&& o) noexcept = default;
    ~TcpListener() = default;

    /// socket + options + bind + listen. Port 0 picks a free port (see local_addr()).
    static Result<TcpListener> bind(const SocketAddr& addr, ListenOptions options = {}) noexcept;
    /// `n` listeners on one address that share it with SO_REUSEPORT (the kernel spreads new
    /// connections over them: one per worker). A port that anything else holds (another
    /// process, an unrelated socket, SO_REUSEPORT or not) is `EADDRINUSE`: the first listener is
    /// bound without SO_REUSEPORT, which fails on any holder, and only then opens the port to
    /// the other n-1. Port 0: they all get the port the first one was given.
    static Result<std::vector<TcpListener>> bind_sharded(const SocketAddr& addr, unsigned n,
                                                         ListenOptions options = {});
    /// Adopt a socket that is already listening (inherited, or received over a Unix socket with
    /// SCM_RIGHTS, as a server restarting in place receives its predecessor's). On success the
    /// listener owns `fd` and has made it non-blocking and close-on-exec; a descriptor that is not
    /// a socket is `ENOTSOCK`, one that is not a listening TCP stream socket `EINVAL`, and on
    /// failure `fd` stays the caller's (it is not closed).
    static Result<TcpListener> from_fd(int fd) noexcept;

    /// Wait for the next connection. `peer`, if given, receives the remote address.
    [[nodiscard]] detail::AcceptAwaitable accept(SocketAddr* peer = nullptr) noexcept {
        return detail::AcceptAwaitable(fd_.get(), peer);
    }
    /// The bound address, with the real port when 0 was asked for (getsockname).
    Result<SocketAddr> local_addr() const noexcept;
};

} // namespace galay
