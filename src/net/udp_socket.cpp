// UdpSocket: creating and binding sockets (alone or as a SO_REUSEPORT group), connecting, and
// socket options. The operations: src/net/udp.cpp (one datagram), src/net/udp_batch.cpp (batches).
#include "galay/detail/platform.hpp"
#include "galay/net/udp.hpp"
#include "net/udp_batch.hpp"
#include "net/udp_msg.hpp"

#include "sockopt.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>

#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

namespace galay {

// --- UdpSocket --------------------------------------------------------------------------------

Result<UdpSocket> UdpSocket::create(int family, const UdpOptions& o) noexcept {
    if (family != AF_INET && family != AF_INET6) return fail(EAFNOSUPPORT);
    auto fd = detail::make_socket(family, SOCK_DGRAM);
    if (!fd) return std::unexpected(fd.error());
    UdpSocket s;
    s.fd_ = OwnedFd(*fd);
    s.family_ = family;
    s.local_address_ = o.local_address;
    s.scratch_.reset(new detail::BatchScratch());
#if GALAY_HAVE_MMSG // (UDP_SEGMENT and UDP_GRO are Linux's: elsewhere each datagram goes alone)
    if (o.segmentation_offload) { // the kernel knows UDP_SEGMENT (Linux 4.18+)
        int seg = 0;
        socklen_t len = sizeof seg;
        s.gso_ = ::getsockopt(s.fd_.get(), SOL_UDP, UDP_SEGMENT, &seg, &len) == 0;
    }
    if (o.receive_offload) { // Linux 5.0+; without it, every datagram is received on its own
        if (detail::setsockopt_int(s.fd_.get(), SOL_UDP, UDP_GRO, 1))
            s.gro_ = std::make_unique<detail::GroStash>();
    }
#endif
    using detail::setsockopt_int;
    auto set = [&](bool when, int level, int name, int value) -> Result<void> {
        return when ? setsockopt_int(s.fd_.get(), level, name, value) : Result<void>{};
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
        // A dual-stack IPv6 socket reports IPv4 datagrams through IP_PKTINFO (IP_RECVDSTADDR).
        if (r = set(true, IPPROTO_IP, detail::kRecvDestinationV4, 1); !r && family == AF_INET)
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
    if (::bind(s->fd_.get(), addr.data(), addr.size()) < 0) return fail(errno);
    s->local_port_ = addr.port() != 0 ? addr.port() : detail::bound_port(s->fd_.get());
    return s;
}

Result<std::vector<UdpSocket>> UdpSocket::bind_group(const SocketAddr& addr, std::size_t count,
                                                     UdpOptions options) {
    if (count == 0) return fail(EINVAL);
    options.reuse_addr = false;
    options.reuse_port = false;
    auto first = bind(addr, options); // exclusive: fails if anyone holds the port
    if (!first) return std::unexpected(first.error());
    if (auto r = detail::setsockopt_int(first->fd_.get(), SOL_SOCKET, SO_REUSEPORT, 1); !r)
        return std::unexpected(r.error());
    SocketAddr at = addr;
    at.set_port(first->local_port_);
    std::vector<UdpSocket> group;
    group.reserve(count);
    group.push_back(std::move(*first));
    options.reuse_port = true;
    while (group.size() < count) {
        auto s = bind(at, options);
        if (!s) return std::unexpected(s.error());
        group.push_back(std::move(*s));
    }
    return group;
}

Result<void> UdpSocket::connect(const SocketAddr& addr) noexcept {
    if (int err = detail::check_destination(family_, addr); err != 0) return fail(err);
    if (::connect(fd_.get(), addr.data(), addr.size()) < 0) return fail(errno);
    if (local_port_ == 0) local_port_ = detail::bound_port(fd_.get()); // connect bound it
    return {};
}

Result<void> UdpSocket::set_recv_buffer_size(int bytes) noexcept {
    return detail::setsockopt_int(fd_.get(), SOL_SOCKET, SO_RCVBUF, bytes);
}
Result<void> UdpSocket::set_send_buffer_size(int bytes) noexcept {
    return detail::setsockopt_int(fd_.get(), SOL_SOCKET, SO_SNDBUF, bytes);
}
Result<int> UdpSocket::recv_buffer_size() const noexcept {
    return detail::getsockopt_int(fd_.get(), SOL_SOCKET, SO_RCVBUF);
}
Result<int> UdpSocket::send_buffer_size() const noexcept {
    return detail::getsockopt_int(fd_.get(), SOL_SOCKET, SO_SNDBUF);
}
Result<void> UdpSocket::set_broadcast(bool on) noexcept {
    return detail::setsockopt_int(fd_.get(), SOL_SOCKET, SO_BROADCAST, on ? 1 : 0);
}
Result<SocketAddr> UdpSocket::local_addr() const noexcept {
    return detail::sock_name(fd_.get(), false);
}
Result<SocketAddr> UdpSocket::peer_addr() const noexcept {
    return detail::sock_name(fd_.get(), true);
}

} // namespace galay
