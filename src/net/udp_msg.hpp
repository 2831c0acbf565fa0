// src/net/udp_msg.hpp: what the UDP operations read from and check in one message: the
// destination family, the control messages (the local address, the GRO segment size) and the
// truncation of a received datagram. Private to the library: src/net/udp.cpp (one datagram),
// src/net/udp_batch.cpp (batches) and src/net/udp_socket.cpp include it.
//
// Internal linkage (an unnamed namespace) on purpose, as when these lived in one .cpp: each
// including file gets its own copy, and the compiler inlines them into the per-datagram paths by
// the same rules as before the split (bench_udp measures those paths).
#pragma once

#include "galay/net/udp.hpp"

#include "sockopt.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace galay::detail {
namespace {

inline std::uint16_t bound_port(int fd) noexcept {
    auto a = sock_name(fd, false);
    return a ? a->port() : 0;
}

/// Can a socket of `family` send to `to`? An IPv6 socket also reaches IPv4 addresses (the
/// kernel maps them unless the socket is v6-only, which it then reports itself).
inline int check_destination(int family, const SocketAddr& to) noexcept {
    if (to.size() == 0) return EAFNOSUPPORT; // AF_UNSPEC would mean "the connected peer"
    if (to.family() != family && !(family == AF_INET6 && to.is_v4())) return EAFNOSUPPORT;
    return 0;
}

/// The IPPROTO_IP option that asks for each datagram's IPv4 destination address, and the type of
/// the control message that brings it: IP_PKTINFO (an in_pktinfo) on Linux and macOS,
/// IP_RECVDSTADDR (an in_addr) on FreeBSD, which has no IP_PKTINFO.
#if defined(IP_PKTINFO)
inline constexpr int kRecvDestinationV4 = IP_PKTINFO;
#else
inline constexpr int kRecvDestinationV4 = IP_RECVDSTADDR;
#endif

/// The destination address of a datagram, from its IP_PKTINFO (IP_RECVDSTADDR) / IPV6_PKTINFO
/// control message.
inline SocketAddr local_from_control(msghdr& msg, std::uint16_t port) noexcept {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == kRecvDestinationV4) {
            sockaddr_in sin{};
            sin.sin_family = AF_INET;
#if defined(IP_PKTINFO)
            in_pktinfo pi;
            std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
            sin.sin_addr = pi.ipi_addr;
#else
            std::memcpy(&sin.sin_addr, CMSG_DATA(c), sizeof sin.sin_addr);
#endif
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

/// What the control messages of one receive say: the GRO segment size (0: one datagram) and,
/// when asked for, the local address.
struct ControlInfo {
    std::uint32_t segment = 0;
    SocketAddr local;
};
inline ControlInfo parse_control(msghdr& msg, bool want_local, std::uint16_t port) noexcept {
    ControlInfo info;
#if defined(UDP_GRO) // (Linux's alone: elsewhere a receive is always one datagram)
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int seg = 0;
            std::memcpy(&seg, CMSG_DATA(c), sizeof seg);
            info.segment = seg > 0 ? static_cast<std::uint32_t>(seg) : 0;
        }
    }
#endif
    if (want_local) info.local = local_from_control(msg, port);
    return info;
}

inline RecvInfo recv_info(std::size_t real, std::size_t capacity, int msg_flags) noexcept {
    RecvInfo info;
    info.datagram_size = real;
    info.size = std::min(real, capacity);
    info.truncated = (msg_flags & MSG_TRUNC) != 0 || real > capacity;
    return info;
}

} // namespace
} // namespace galay::detail
