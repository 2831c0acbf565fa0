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
#include "galay/detail/close_op.hpp"
#include "galay/detail/io_awaitable.hpp"
#include "galay/detail/owned_fd.hpp"
#include "galay/net/socket_addr.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <concepts>
#include <cstddef>
#include <ranges>
#include <span>
#include <string_view>
#include <vector>

namespace galay {

class TcpStream;
namespace detail {
class RecvPooledAwaitable;
} // namespace detail

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

namespace detail {

/// How much of its buffer a stream transfer moves before it completes.
enum class Transfer : std::uint8_t {
    some,  // what one system call moves (recv, send)
    all,   // every byte, or an error (send_all)
    exact, // every byte; EOF before that is `errc::unexpected_eof` (recv_exact)
};

class [[nodiscard]] TransferAwaitable : public IoAwaitable<TransferAwaitable> {
public:
    TransferAwaitable(OpCode code, int fd, const void* buf, std::size_t len, Transfer mode,
                      int flags) noexcept;
    /// An all-or-error transfer larger than one op can carry fails at once (never in part).
    bool await_ready() const noexcept { return too_large_; }
    Result<std::size_t> result();
    /// After completion: the bytes moved, also when it failed (a send_all that timed out after
    /// sending part of its buffer tells how much of it left).
    std::size_t transferred() const noexcept { return op_.done; }

private:
    bool exact_;             // recv_exact: fewer bytes than asked (EOF) is an error
    bool too_large_ = false; // send_all/recv_exact of more than UINT32_MAX bytes
};

class [[nodiscard]] RecvPooledAwaitable : public IoAwaitable<RecvPooledAwaitable> {
public:
    explicit RecvPooledAwaitable(int fd) noexcept {
        op_.code = OpCode::recv_pooled;
        op_.fd = fd;
    }
    Result<PooledBuffer> result();
};

class [[nodiscard]] VectorAwaitable : public IoAwaitable<VectorAwaitable> {
public:
    VectorAwaitable(OpCode code, int fd, std::span<const iovec> iov) noexcept;
    void prepare() noexcept { op_.buf = &msg_; }
    Result<std::size_t> result() { return size_result(op_.result); }

private:
    msghdr msg_{};
};

class [[nodiscard]] AcceptAwaitable : public IoAwaitable<AcceptAwaitable> {
public:
    AcceptAwaitable(int fd, SocketAddr* peer) noexcept;
    /// The kernel fills in the peer address only when the caller asked for it.
    void prepare() noexcept {
        if (peer_ != nullptr) op_.set_accept_address(addr_.data(), &addrlen_);
    }
    Result<TcpStream> result();

private:
    SocketAddr addr_;
    std::uint32_t addrlen_ = SocketAddr::capacity();
    SocketAddr* peer_;
};

class [[nodiscard]] ConnectAwaitable : public IoAwaitable<ConnectAwaitable> {
public:
    explicit ConnectAwaitable(const SocketAddr& addr) noexcept;
    ConnectAwaitable(ConnectAwaitable&& o) noexcept;
    ~ConnectAwaitable();
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept { op_.set_connect_address(addr_.data(), addr_.size()); }
    Result<TcpStream> result();

private:
    SocketAddr addr_;
    int setup_error_ = 0;
};

} // namespace detail

/// Which direction `TcpStream::shutdown` ends (shutdown(2)'s SHUT_RD, SHUT_WR, SHUT_RDWR).
enum class Shutdown { read = SHUT_RD, write = SHUT_WR, both = SHUT_RDWR };

/// A connected byte-stream socket: the base of TcpStream and UnixStream, with its descriptor and
/// the operations on it that do not depend on the address family (receive, send, shutdown,
/// close). Each stream adds its own constructors, addresses and options; a function that only
/// moves bytes can take a `StreamSocket&` and serve both.
class StreamSocket {
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
    /// Close asynchronously (IORING_OP_CLOSE on io_uring). The stream is empty afterwards.
    [[nodiscard]] detail::CloseAwaitable close() noexcept {
        return detail::CloseAwaitable(fd_.take());
    }

    /// True while it holds an open socket.
    bool is_open() const noexcept { return fd_.is_open(); }
    /// The socket's file descriptor, still owned by the stream (-1 when empty).
    int fd() const noexcept { return fd_.get(); }
    /// Give up ownership of the fd: galay forgets it (and drops it from io_uring's registered
    /// files), and closing it is now the caller's job.
    int release() noexcept { return fd_.release(); }

protected:
    StreamSocket() noexcept = default;
    /// Adopt a connected socket (made non-blocking if it is not).
    explicit StreamSocket(int fd) noexcept;
    /// Tag: the fd is known to be O_NONBLOCK (galay made it), so no fcntl.
    struct NonBlocking {};
    /// Adopt a socket galay made non-blocking.
    StreamSocket(int fd, NonBlocking) noexcept
        : fd_(fd) {}
    /// Move: the socket goes with it, `o` is left empty.
    StreamSocket(StreamSocket&& o) noexcept = default;
    /// Move-assign: closes what this held, takes `o`'s socket.
    StreamSocket& operator=(StreamSocket&& o) noexcept = default;
    ~StreamSocket() = default;

    /// The owned descriptor (closed on destruction).
    detail::OwnedFd fd_;
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
    TcpStream(int fd, NonBlocking) noexcept
        : StreamSocket(fd, NonBlocking{}) {}
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

/// A listening TCP socket.
class TcpListener {
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
    /// The socket's file descriptor, still owned by the listener (-1 when empty).
    int fd() const noexcept { return fd_.get(); }
    /// Close asynchronously; the listener is empty at once.
    [[nodiscard]] detail::CloseAwaitable close() noexcept {
        return detail::CloseAwaitable(fd_.take());
    }

private:
    detail::OwnedFd fd_;
};

} // namespace galay
