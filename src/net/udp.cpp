#include "galay/net/udp.hpp"

#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace galay {
namespace detail {
namespace {

Result<void> setsockopt_int(int fd, int level, int name, int value) noexcept {
    if (::setsockopt(fd, level, name, &value, sizeof value) < 0) return fail(errno);
    return {};
}

Result<int> getsockopt_int(int fd, int level, int name) noexcept {
    int value = 0;
    socklen_t len = sizeof value;
    if (::getsockopt(fd, level, name, &value, &len) < 0) return fail(errno);
    return value;
}

Result<SocketAddr> sock_name(int fd, bool peer) noexcept {
    SocketAddr a;
    socklen_t len = SocketAddr::capacity();
    int r = peer ? ::getpeername(fd, a.data(), &len) : ::getsockname(fd, a.data(), &len);
    if (r < 0) return fail(errno);
    return a;
}

std::uint16_t bound_port(int fd) noexcept {
    auto a = sock_name(fd, false);
    return a ? a->port() : 0;
}

/// Can a socket of `family` send to `to`? An IPv6 socket also reaches IPv4 addresses (the
/// kernel maps them unless the socket is v6-only, which it then reports itself).
int check_destination(int family, const SocketAddr& to) noexcept {
    if (to.size() == 0) return EAFNOSUPPORT; // AF_UNSPEC would mean "the connected peer"
    if (to.family() != family && !(family == AF_INET6 && to.is_v4())) return EAFNOSUPPORT;
    return 0;
}

/// The destination address of a datagram, from its IP_PKTINFO / IPV6_PKTINFO control message.
SocketAddr local_from_control(msghdr& msg, std::uint16_t port) noexcept {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            in_pktinfo pi;
            std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
            sockaddr_in sin{};
            sin.sin_family = AF_INET;
            sin.sin_addr = pi.ipi_addr;
            sin.sin_port = htons(port);
            return SocketAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&sin), sizeof sin);
        }
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            in6_pktinfo pi;
            std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
            sockaddr_in6 sin6{};
            sin6.sin6_family = AF_INET6;
            sin6.sin6_addr = pi.ipi6_addr;
            sin6.sin6_port = htons(port);
            if (IN6_IS_ADDR_LINKLOCAL(&pi.ipi6_addr)) sin6.sin6_scope_id = pi.ipi6_ifindex;
            return SocketAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&sin6), sizeof sin6);
        }
    }
    return SocketAddr{};
}

RecvInfo recv_info(std::size_t real, std::size_t capacity, int msg_flags) noexcept {
    RecvInfo info;
    info.datagram_size = real;
    info.size = std::min(real, capacity);
    info.truncated = (msg_flags & MSG_TRUNC) != 0 || real > capacity;
    return info;
}

} // namespace

static_assert(CMSG_SPACE(sizeof(in6_pktinfo)) <= kPktinfoControl);
static_assert(CMSG_SPACE(sizeof(in_pktinfo)) <= kPktinfoControl);

// --- send_to / send ---------------------------------------------------------------------------

SendToAwaitable::SendToAwaitable(int fd, int family, const void* buf, std::size_t len,
                                 const SocketAddr* to) noexcept {
    op_.code = OpCode::sendmsg;
    op_.fd = fd;
    iov_.iov_base = const_cast<void*>(buf);
    iov_.iov_len = len;
    if (to != nullptr) {
        setup_error_ = check_destination(family, *to);
        to_ = *to;
        has_to_ = true;
    }
}

void SendToAwaitable::prepare() noexcept {
    msg_.msg_iov = &iov_;
    msg_.msg_iovlen = 1;
    if (has_to_) {
        msg_.msg_name = to_.data();
        msg_.msg_namelen = to_.size();
    }
    op_.buf = &msg_;
}

Result<std::size_t> SendToAwaitable::result() {
    if (setup_error_ != 0) return fail(setup_error_);
    return size_result(op_.result);
}

// --- recv_from / recv -------------------------------------------------------------------------

RecvFromAwaitable::RecvFromAwaitable(int fd, void* buf, std::size_t len, SocketAddr* from,
                                     SocketAddr* local, std::uint16_t local_port) noexcept
    : from_(from)
    , local_(local)
    , local_port_(local_port) {
    op_.code = OpCode::recvmsg;
    op_.fd = fd;
    op_.msg_flags = MSG_TRUNC; // the result is the datagram's real length
    iov_.iov_base = buf;
    iov_.iov_len = len;
}

void RecvFromAwaitable::prepare() noexcept {
    msg_.msg_iov = &iov_;
    msg_.msg_iovlen = 1;
    if (from_ != nullptr) {
        msg_.msg_name = from_->data();
        msg_.msg_namelen = SocketAddr::capacity();
    }
    if (local_ != nullptr) {
        msg_.msg_control = control_;
        msg_.msg_controllen = sizeof control_;
    }
    op_.buf = &msg_;
}

Result<RecvInfo> RecvFromAwaitable::result() {
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    if (local_ != nullptr) {
        std::uint16_t port = local_port_ != 0 ? local_port_ : bound_port(op_.fd);
        *local_ = local_from_control(msg_, port);
    }
    return recv_info(static_cast<std::size_t>(op_.result), iov_.iov_len, msg_.msg_flags);
}

// --- recv_batch -------------------------------------------------------------------------------

RecvBatchAwaitable::RecvBatchAwaitable(int fd, std::span<Datagram> out, bool local_address,
                                       std::uint16_t local_port) noexcept
    : out_(out.first(std::min(out.size(), kMaxUdpBatch)))
    , local_address_(local_address)
    , local_port_(local_port) {
    op_.code = OpCode::recvmmsg;
    op_.fd = fd;
    op_.msg_flags = MSG_TRUNC;
}

void RecvBatchAwaitable::prepare() noexcept {
    for (std::size_t i = 0; i < out_.size(); ++i) {
        Datagram& d = out_[i];
        iov_[i].iov_base = d.buffer.data();
        iov_[i].iov_len = d.buffer.size();
        msghdr& m = msgs_[i].msg_hdr;
        m.msg_name = d.from.data();
        m.msg_namelen = SocketAddr::capacity();
        m.msg_iov = &iov_[i];
        m.msg_iovlen = 1;
        m.msg_control = local_address_ ? control_[i].data() : nullptr;
        m.msg_controllen = local_address_ ? kPktinfoControl : 0;
        m.msg_flags = 0;
        msgs_[i].msg_len = 0;
    }
    op_.buf = msgs_.data();
    op_.len = static_cast<std::uint32_t>(out_.size());
}

Result<std::size_t> RecvBatchAwaitable::result() {
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    const auto n = static_cast<std::size_t>(op_.result);
    std::uint16_t port = local_port_;
    if (local_address_ && port == 0) port = bound_port(op_.fd);
    for (std::size_t i = 0; i < n; ++i) {
        Datagram& d = out_[i];
        const RecvInfo info =
            recv_info(msgs_[i].msg_len, d.buffer.size(), msgs_[i].msg_hdr.msg_flags);
        d.size = info.size;
        d.datagram_size = info.datagram_size;
        d.truncated = info.truncated;
        if (local_address_) d.local = local_from_control(msgs_[i].msg_hdr, port);
    }
    return n;
}

// --- send_batch -------------------------------------------------------------------------------

SendBatchAwaitable::SendBatchAwaitable(int fd, int family, std::span<const OutDatagram> in) noexcept
    : in_(in.first(std::min(in.size(), kMaxUdpBatch))) {
    op_.code = OpCode::sendmmsg;
    op_.fd = fd;
    op_.all = true; // a batch the socket buffer cannot take at once is finished when writable
    // Stop the batch before the first unusable address: the ones before it are still sent.
    count_ = in_.size();
    for (std::size_t i = 0; i < in_.size(); ++i) {
        if (in_[i].to == nullptr) continue;
        if (int err = check_destination(family, *in_[i].to); err != 0) {
            count_ = i;
            setup_error_ = err;
            break;
        }
    }
}

void SendBatchAwaitable::prepare() noexcept {
    for (std::size_t i = 0; i < count_; ++i) {
        const OutDatagram& d = in_[i];
        iov_[i].iov_base = const_cast<std::byte*>(d.data.data());
        iov_[i].iov_len = d.data.size();
        msghdr& m = msgs_[i].msg_hdr;
        if (d.to != nullptr) {
            m.msg_name = const_cast<sockaddr*>(d.to->data());
            m.msg_namelen = d.to->size();
        } else {
            m.msg_name = nullptr;
            m.msg_namelen = 0;
        }
        m.msg_iov = &iov_[i];
        m.msg_iovlen = 1;
        m.msg_control = nullptr;
        m.msg_controllen = 0;
        m.msg_flags = 0;
        msgs_[i].msg_len = 0;
    }
    op_.buf = msgs_.data();
    op_.len = static_cast<std::uint32_t>(count_);
}

Result<std::size_t> SendBatchAwaitable::result() {
    if (count_ == 0) return fail(setup_error_);
    // An error after some datagrams left (or a cancelled remainder) still reports those.
    if (op_.done > 0) return op_.done;
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    return static_cast<std::size_t>(op_.result);
}

} // namespace detail

// --- UdpSocket --------------------------------------------------------------------------------

UdpSocket::UdpSocket(UdpSocket&& o) noexcept
    : fd_(std::exchange(o.fd_, -1))
    , family_(o.family_)
    , local_port_(o.local_port_)
    , local_address_(o.local_address_) {}

UdpSocket& UdpSocket::operator=(UdpSocket&& o) noexcept {
    if (this != &o) {
        detail::close_fd(fd_);
        fd_ = std::exchange(o.fd_, -1);
        family_ = o.family_;
        local_port_ = o.local_port_;
        local_address_ = o.local_address_;
    }
    return *this;
}

Result<UdpSocket> UdpSocket::create(int family, const UdpOptions& o) noexcept {
    if (family != AF_INET && family != AF_INET6) return fail(EAFNOSUPPORT);
    auto fd = detail::make_socket(family, SOCK_DGRAM);
    if (!fd) return std::unexpected(fd.error());
    UdpSocket s;
    s.fd_ = *fd;
    s.family_ = family;
    s.local_address_ = o.local_address;
    using detail::setsockopt_int;
    auto set = [&](bool when, int level, int name, int value) -> Result<void> {
        return when ? setsockopt_int(s.fd_, level, name, value) : Result<void>{};
    };
    Result<void> r;
    if (r = set(o.reuse_addr, SOL_SOCKET, SO_REUSEADDR, 1); !r) return std::unexpected(r.error());
    if (r = set(o.reuse_port, SOL_SOCKET, SO_REUSEPORT, 1); !r) return std::unexpected(r.error());
    if (r = set(family == AF_INET6, IPPROTO_IPV6, IPV6_V6ONLY, o.v6_only ? 1 : 0); !r)
        return std::unexpected(r.error());
    if (r = set(o.recv_buffer_size > 0, SOL_SOCKET, SO_RCVBUF, o.recv_buffer_size); !r)
        return std::unexpected(r.error());
    if (r = set(o.send_buffer_size > 0, SOL_SOCKET, SO_SNDBUF, o.send_buffer_size); !r)
        return std::unexpected(r.error());
    if (o.local_address) {
        // A dual-stack IPv6 socket reports IPv4 datagrams through IP_PKTINFO.
        if (r = set(true, IPPROTO_IP, IP_PKTINFO, 1); !r && family == AF_INET)
            return std::unexpected(r.error());
        if (r = set(family == AF_INET6, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1); !r)
            return std::unexpected(r.error());
    }
    return s;
}

Result<UdpSocket> UdpSocket::open(int family, UdpOptions options) noexcept {
    return create(family, options);
}

Result<UdpSocket> UdpSocket::bind(const SocketAddr& addr, UdpOptions options) noexcept {
    if (addr.size() == 0) return fail(EAFNOSUPPORT);
    auto s = create(addr.family(), options);
    if (!s) return s;
    if (::bind(s->fd_, addr.data(), addr.size()) < 0) return fail(errno);
    s->local_port_ = addr.port() != 0 ? addr.port() : detail::bound_port(s->fd_);
    return s;
}

Result<void> UdpSocket::connect(const SocketAddr& addr) noexcept {
    if (int err = detail::check_destination(family_, addr); err != 0) return fail(err);
    if (::connect(fd_, addr.data(), addr.size()) < 0) return fail(errno);
    if (local_port_ == 0) local_port_ = detail::bound_port(fd_); // connect bound it
    return {};
}

Result<void> UdpSocket::set_recv_buffer_size(int bytes) noexcept {
    return detail::setsockopt_int(fd_, SOL_SOCKET, SO_RCVBUF, bytes);
}
Result<void> UdpSocket::set_send_buffer_size(int bytes) noexcept {
    return detail::setsockopt_int(fd_, SOL_SOCKET, SO_SNDBUF, bytes);
}
Result<int> UdpSocket::recv_buffer_size() const noexcept {
    return detail::getsockopt_int(fd_, SOL_SOCKET, SO_RCVBUF);
}
Result<int> UdpSocket::send_buffer_size() const noexcept {
    return detail::getsockopt_int(fd_, SOL_SOCKET, SO_SNDBUF);
}
Result<void> UdpSocket::set_broadcast(bool on) noexcept {
    return detail::setsockopt_int(fd_, SOL_SOCKET, SO_BROADCAST, on ? 1 : 0);
}
Result<SocketAddr> UdpSocket::local_addr() const noexcept {
    return detail::sock_name(fd_, false);
}
Result<SocketAddr> UdpSocket::peer_addr() const noexcept {
    return detail::sock_name(fd_, true);
}

} // namespace galay
