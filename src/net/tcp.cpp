#include "galay/net/tcp.hpp"

#include "platform/fd_calls.hpp"
#include "runtime/scheduler_access.hpp"
#include "sockopt.hpp"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace galay {
namespace detail {

Result<int> make_socket(int family, int type, int protocol) noexcept {
    const int fd = platform::socket_cloexec(family, type, protocol, true);
    if (fd < 0) return fail(errno);
    return fd;
}

namespace {
std::uint32_t clamp_len(std::size_t n) noexcept {
    return n > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(n);
}
} // namespace

TransferAwaitable::TransferAwaitable(OpCode code, int fd, const void* buf, std::size_t len,
                                     Transfer mode, int flags) noexcept
    : exact_(mode == Transfer::exact) {
    const bool all = mode != Transfer::some;
    op_.code = code;
    op_.fd = fd;
    op_.buf = const_cast<void*>(buf);
    op_.len = clamp_len(len);
    // A plain send/recv of more moves part of it, as send(2) does; an all-or-error one must not
    // report success for the first 4 GiB only.
    too_large_ = all && len > UINT32_MAX;
    op_.all = all;
    op_.msg_flags = flags;
}

Result<std::size_t> TransferAwaitable::result() {
    if (too_large_) return fail(errc::transfer_too_large);
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    if (exact_ && static_cast<std::size_t>(op_.result) < op_.len) return fail(errc::unexpected_eof);
    return static_cast<std::size_t>(op_.result);
}

Result<PooledBuffer> RecvPooledAwaitable::result() {
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    if (op_.result == 0) return PooledBuffer{};
    return PooledBuffer(&current_scheduler(), static_cast<const char*>(op_.buf),
                        static_cast<std::size_t>(op_.result), static_cast<std::uint16_t>(op_.aux));
}

VectorAwaitable::VectorAwaitable(OpCode code, int fd, std::span<const iovec> iov) noexcept {
    op_.code = code;
    op_.fd = fd;
    msg_.msg_iov = const_cast<iovec*>(iov.data());
    msg_.msg_iovlen = iov.size();
}

AcceptAwaitable::AcceptAwaitable(int fd, SocketAddr* peer) noexcept
    : peer_(peer) {
    op_.code = OpCode::accept;
    op_.fd = fd;
}

Result<TcpStream> AcceptAwaitable::result() {
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    if (peer_ != nullptr) *peer_ = addr_;
    // Accepted non-blocking by both drivers (and the multishot accept).
    return TcpStream(static_cast<int>(op_.result), TcpStream::NonBlocking{});
}

ConnectAwaitable::ConnectAwaitable(const SocketAddr& addr) noexcept
    : addr_(addr) {
    op_.code = OpCode::connect;
    if (addr.size() == 0) {
        setup_error_ = EAFNOSUPPORT;
        return;
    }
    auto fd = make_socket(addr.family(), SOCK_STREAM);
    if (!fd) {
        setup_error_ = fd.error().value();
        return;
    }
    op_.fd = *fd;
    // Set before connecting, so it holds from the first byte and costs no call after.
    if (auto r = setsockopt_int(op_.fd, IPPROTO_TCP, TCP_NODELAY, 1); !r)
        setup_error_ = r.error().value();
}

ConnectAwaitable::ConnectAwaitable(ConnectAwaitable&& o) noexcept
    : IoAwaitable(std::move(o))
    , addr_(o.addr_)
    , setup_error_(o.setup_error_) {
    o.op_.fd = -1;
}

ConnectAwaitable::~ConnectAwaitable() {
    close_fd(op_.fd);
}

Result<TcpStream> ConnectAwaitable::result() {
    if (setup_error_ != 0) return fail(setup_error_);
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    return TcpStream(std::exchange(op_.fd, -1), TcpStream::NonBlocking{}); // (make_socket)
}

} // namespace detail

StreamSocket::StreamSocket(int fd) noexcept
    : FdHandle(fd) {
    if (fd < 0) return;
    int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK)) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

Result<void> StreamSocket::shutdown(Shutdown how) noexcept {
    if (::shutdown(fd_.get(), static_cast<int>(how)) < 0) return fail(errno);
    return {};
}

void PooledBuffer::give_back(Scheduler& owner, std::uint16_t id) noexcept {
    detail::SchedulerAccess::driver(owner).give_back(id);
}

Task<Result<TcpStream>> TcpStream::connect(std::string host, std::uint16_t port,
                                           std::chrono::nanoseconds per_attempt) {
    auto addrs = co_await resolve(std::move(host), port);
    if (!addrs) co_return std::unexpected(addrs.error());
    std::error_code last = std::make_error_code(std::errc::host_unreachable);
    for (const SocketAddr& a : *addrs) {
        // (Not `cond ? co_await x : co_await y`: with GCC 12 the connect op's socket was closed
        // while the connect was still in flight, and the stream returned was a closed fd.)
        Result<TcpStream> s = std::unexpected(last);
        if (per_attempt.count() > 0)
            s = co_await connect(a).timeout(per_attempt);
        else
            s = co_await connect(a);
        if (s) co_return s;
        last = s.error();
    }
    co_return std::unexpected(last);
}

Result<void> TcpStream::set_nodelay(bool on) noexcept {
    return detail::setsockopt_int(fd_.get(), IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0);
}
Result<bool> TcpStream::nodelay() const noexcept {
    auto v = detail::getsockopt_int(fd_.get(), IPPROTO_TCP, TCP_NODELAY);
    if (!v) return std::unexpected(v.error());
    return *v != 0;
}
Result<void> TcpStream::set_keepalive(bool on) noexcept {
    return detail::setsockopt_int(fd_.get(), SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0);
}
Result<void> TcpStream::set_recv_buffer_size(int bytes) noexcept {
    return detail::setsockopt_int(fd_.get(), SOL_SOCKET, SO_RCVBUF, bytes);
}
Result<void> TcpStream::set_send_buffer_size(int bytes) noexcept {
    return detail::setsockopt_int(fd_.get(), SOL_SOCKET, SO_SNDBUF, bytes);
}
Result<void> TcpStream::set_linger_reset() noexcept {
    linger l{.l_onoff = 1, .l_linger = 0};
    if (::setsockopt(fd_.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l) < 0) return fail(errno);
    return {};
}
Result<SocketAddr> TcpStream::peer_addr() const noexcept {
    return detail::sock_name(fd_.get(), true);
}
Result<SocketAddr> TcpStream::local_addr() const noexcept {
    return detail::sock_name(fd_.get(), false);
}

Result<TcpListener> TcpListener::bind(const SocketAddr& addr, ListenOptions options) noexcept {
    if (addr.size() == 0) return fail(EAFNOSUPPORT);
    auto fd = detail::make_socket(addr.family(), SOCK_STREAM);
    if (!fd) return std::unexpected(fd.error());
    TcpListener l;
    l.fd_ = OwnedFd(*fd);
    if (options.reuse_addr)
        if (auto r = detail::setsockopt_int(l.fd_.get(), SOL_SOCKET, SO_REUSEADDR, 1); !r)
            return std::unexpected(r.error());
    if (options.reuse_port)
        if (auto r = detail::setsockopt_int(l.fd_.get(), SOL_SOCKET, SO_REUSEPORT, 1); !r)
            return std::unexpected(r.error());
    if (addr.is_v6())
        if (auto r =
                detail::setsockopt_int(l.fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, options.v6_only);
            !r)
            return std::unexpected(r.error());
    if (auto r = detail::setsockopt_int(l.fd_.get(), IPPROTO_TCP, TCP_NODELAY, options.nodelay); !r)
        return std::unexpected(r.error());
    if (::bind(l.fd_.get(), addr.data(), addr.size()) < 0) return fail(errno);
    if (::listen(l.fd_.get(), options.backlog) < 0) return fail(errno);
    return l;
}

Result<std::vector<TcpListener>> TcpListener::bind_sharded(const SocketAddr& addr, unsigned n,
                                                           ListenOptions options) {
    if (n == 0) return fail(EINVAL);
    std::vector<TcpListener> out;
    out.reserve(n);
    // The first one: an exclusive bind (no SO_REUSEPORT yet), which fails with EADDRINUSE on
    // any socket holding the port, with or without SO_REUSEPORT. SO_REUSEPORT is set after the
    // bind and before listen(), which is when the kernel forms the port's reuseport group, so
    // the others can join it.
    options.reuse_port = false;
    auto first = detail::make_socket(addr.family(), SOCK_STREAM);
    if (!first) return std::unexpected(first.error());
    TcpListener l0;
    l0.fd_ = OwnedFd(*first);
    if (options.reuse_addr)
        if (auto r = detail::setsockopt_int(l0.fd_.get(), SOL_SOCKET, SO_REUSEADDR, 1); !r)
            return std::unexpected(r.error());
    if (addr.is_v6())
        if (auto r =
                detail::setsockopt_int(l0.fd_.get(), IPPROTO_IPV6, IPV6_V6ONLY, options.v6_only);
            !r)
            return std::unexpected(r.error());
    if (auto r = detail::setsockopt_int(l0.fd_.get(), IPPROTO_TCP, TCP_NODELAY, options.nodelay);
        !r)
        return std::unexpected(r.error());
    if (::bind(l0.fd_.get(), addr.data(), addr.size()) < 0) return fail(errno);
    if (n > 1)
        if (auto r = detail::setsockopt_int(l0.fd_.get(), SOL_SOCKET, SO_REUSEPORT, 1); !r)
            return std::unexpected(r.error());
    if (::listen(l0.fd_.get(), options.backlog) < 0) return fail(errno);
    auto bound = l0.local_addr();
    if (!bound) return std::unexpected(bound.error());
    out.push_back(std::move(l0));
    options.reuse_port = true;
    for (unsigned i = 1; i < n; ++i) {
        auto l = bind(*bound, options);
        if (!l) return std::unexpected(l.error());
        out.push_back(std::move(*l));
    }
    return out;
}

Result<TcpListener> TcpListener::from_fd(int fd) noexcept {
    if (fd < 0) return fail(EBADF);
    auto type = detail::getsockopt_int(fd, SOL_SOCKET, SO_TYPE);
    if (!type) return std::unexpected(type.error()); // ENOTSOCK, EBADF
    auto listening = detail::getsockopt_int(fd, SOL_SOCKET, SO_ACCEPTCONN);
    if (!listening) return std::unexpected(listening.error());
    auto addr = detail::sock_name(fd, false);
    if (!addr) return std::unexpected(addr.error());
    // A Unix or UDP socket, or a TCP one not listening, would fail at its first accept instead.
    if (*type != SOCK_STREAM || *listening == 0 || !(addr->is_v4() || addr->is_v6()))
        return fail(EINVAL);
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0) return fail(errno);
    if (!(fl & O_NONBLOCK) && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return fail(errno);
    // A descriptor that came from elsewhere may lack it: it must not leak into a child.
    const int fdfl = ::fcntl(fd, F_GETFD);
    if (fdfl < 0) return fail(errno);
    if (!(fdfl & FD_CLOEXEC) && ::fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0) return fail(errno);
    TcpListener l;
    l.fd_ = OwnedFd(fd);
    return l;
}

Result<SocketAddr> TcpListener::local_addr() const noexcept {
    return detail::sock_name(fd_.get(), false);
}

} // namespace galay
