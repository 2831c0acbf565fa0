// galay/net/udp.hpp: UDP sockets, one datagram at a time or in batches.
//
//     galay::Task<void> echo_worker(std::uint16_t port) {
//         auto sock = galay::UdpSocket::bind(galay::SocketAddr::any_v4(port));
//         if (!sock) co_return; // e.g. EADDRINUSE: another socket holds the port
//         std::vector<std::array<char, 2048>> storage(32);
//         std::vector<galay::Datagram> in(storage.begin(), storage.end()); // a buffer each
//         std::vector<galay::OutDatagram> out(in.size());
//         for (;;) {
//             auto n = co_await sock->recv_batch(in); // up to 32 datagrams at once
//             if (!n) co_return;
//             for (std::size_t i = 0; i < *n; ++i)
//                 out[i] = galay::OutDatagram(in[i].data(), &in[i].from);
//             co_await sock->send_batch(std::span(out).first(*n)); // all of them
//         }
//     }
//
//     auto socks = galay::UdpSocket::bind_group(addr, 4); // 4 workers on one port, nobody else
//     auto r = co_await sock.recv_from(buf, &from).timeout(2s);   // Result<RecvInfo>
//     if (r && r->truncated) { /* r->datagram_size bytes were sent, r->size fit in buf */ }
//
// Every operation returns `Result<...>` and accepts `.timeout(d)`; destroying a socket closes it.
//
// How batches reach the kernel: one `recvmmsg`/`sendmmsg` per batch (on io_uring, which has no
// such opcode, the same system calls once io_uring reports the socket ready: src/driver/mmsg.hpp).
// By default a socket also uses the kernel's UDP offloads, probed per socket: send_batch sends a
// run of equal-size datagrams to one destination as one UDP_SEGMENT (GSO) message, and receives
// accept UDP_GRO, so one receive may carry a sender's whole run. Each datagram still arrives in
// its own buffer, in order; per datagram this costs several times less kernel work (bench_udp:
// server CPU per echoed 256-byte packet 0.6-0.8 us with offloads, 3.4-4 us without).
#pragma once

#include "galay/detail/buffers.hpp"
#include "galay/detail/udp_ops.hpp"
#include "galay/fd_handle.hpp"
#include "galay/net/datagram.hpp"
#include "galay/net/socket_addr.hpp"

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace galay {

/// Socket options for UdpSocket::bind and UdpSocket::open.
struct UdpOptions {
    /// SO_REUSEADDR.
    bool reuse_addr = false;
    /// SO_REUSEPORT: share the port with every socket of the same user that set it too,
    /// another process's included (a leftover server would take part of the traffic). To share
    /// a port among your own sockets only, use UdpSocket::bind_group.
    bool reuse_port = false;
    bool v6_only = false;     ///< an IPv6 socket refuses IPv4 traffic
    int recv_buffer_size = 0; ///< SO_RCVBUF in bytes (0: system default; capped by rmem_max)
    int send_buffer_size = 0; ///< SO_SNDBUF in bytes (0: system default)
    /// IP_PKTINFO / IPV6_RECVPKTINFO: report the local address each datagram was sent to
    /// (`recv_from(buf, &from, &local)`, `Datagram::local`). Useful on wildcard binds.
    bool local_address = false;
    /// send_batch: a run of datagrams of one size to one destination leaves as one UDP_SEGMENT
    /// (GSO) send, which the kernel splits into the same datagrams. If the kernel or the route
    /// refuses it, the socket quietly goes back to one datagram per message.
    bool segmentation_offload = true;
    /// UDP_GRO: the kernel may hand one receive several datagrams from one sender at once (its
    /// GSO send, or NIC GRO), which is several times cheaper per datagram. Receives then land in
    /// pooled 64 KiB blocks and are split into the caller's buffers: the API is unchanged, each
    /// datagram still fills its own buffer.
    bool receive_offload = true;
};

/// A UDP socket (IPv4 or IPv6). Move-only; destroying it closes the socket. Its descriptor
/// (`fd`, `is_open`, `close`, `release`) is an FdHandle's.
class UdpSocket : public FdHandle {
public:
    /// The most datagrams one recv_batch/send_batch call moves; larger spans are served in part
    /// (the returned count says how many).
    static constexpr std::size_t max_batch = detail::kMaxUdpBatch;

    UdpSocket() noexcept = default;
    /// Takes over the socket of `o`, which is empty after.
    UdpSocket(UdpSocket&& o) noexcept = default;
    /// Closes its own socket, then takes over the one of `o`.
    UdpSocket& operator=(UdpSocket&& o) noexcept = default;
    ~UdpSocket() = default;

    /// socket + options + bind. Port 0 picks a free port (see local_addr()). A port another
    /// socket holds is EADDRINUSE (unless both set reuse_port / reuse_addr).
    static Result<UdpSocket> bind(const SocketAddr& addr, UdpOptions options = {}) noexcept;
    /// `count` sockets on one address that share it with SO_REUSEPORT (the kernel spreads the
    /// datagrams over them by sender: one per worker or thread) and with nobody else: if any
    /// other socket holds the port, one of another process included, SO_REUSEPORT or not, this
    /// fails with EADDRINUSE. (The first socket binds without SO_REUSEPORT, so the kernel itself
    /// checks that the port is free, and sets it afterwards for the others to join.) Port 0
    /// picks a free port for all of them. `reuse_addr`/`reuse_port` in `options` are ignored.
    static Result<std::vector<UdpSocket>> bind_group(const SocketAddr& addr, std::size_t count,
                                                     UdpOptions options = {});
    /// An unbound socket of `family` (AF_INET or AF_INET6); the first send binds it to an
    /// ephemeral port.
    static Result<UdpSocket> open(int family, UdpOptions options = {}) noexcept;

    /// Fix the peer: send()/recv() then talk to `addr` only, and datagrams from anyone else are
    /// dropped by the kernel. Synchronous (UDP connect sends nothing).
    Result<void> connect(const SocketAddr& addr) noexcept;

    /// Send `buf` as one datagram to `to`. An unspecified address or one of the wrong family is
    /// `address_family_not_supported`.
    template <ConstBuffer B>
    [[nodiscard]] detail::SendToAwaitable send_to(const B& buf, const SocketAddr& to) noexcept {
        return {fd_.get(), family_, detail::buffer_data(buf), std::ranges::size(buf), &to};
    }
    /// Receive one datagram into `buf`; `from` (optional) gets the sender, `local` (optional,
    /// with UdpOptions::local_address) the address it was sent to.
    template <MutableBuffer B>
    [[nodiscard]] detail::RecvFromAwaitable recv_from(B&& buf, SocketAddr* from,
                                                      SocketAddr* local = nullptr) noexcept {
        return {fd_.get(), std::ranges::data(buf), std::ranges::size(buf), from, local, local_port_,
                gro_.get()};
    }
    /// Send one datagram to the connected peer.
    template <ConstBuffer B>
    [[nodiscard]] detail::SendToAwaitable send(const B& buf) noexcept {
        return {fd_.get(), family_, detail::buffer_data(buf), std::ranges::size(buf), nullptr};
    }
    /// Receive one datagram (from the connected peer, on a connected socket).
    template <MutableBuffer B>
    [[nodiscard]] detail::RecvFromAwaitable recv(B&& buf) noexcept {
        return {fd_.get(), std::ranges::data(buf), std::ranges::size(buf), nullptr, nullptr, 0,
                gro_.get()};
    }

    /// Receive at least one and up to min(out.size(), max_batch) datagrams, one per slot, in
    /// arrival order. Returns how many slots were filled.
    [[nodiscard]] detail::RecvBatchAwaitable recv_batch(std::span<Datagram> out) noexcept {
        return {fd_.get(), out, local_address_, local_port_, gro_.get(), scratch_.get()};
    }
    /// Send up to min(in.size(), max_batch) datagrams in order. Returns how many were sent: all
    /// of them unless an error stopped the batch (the error is returned when none was sent).
    [[nodiscard]] detail::SendBatchAwaitable send_batch(std::span<const OutDatagram> in) noexcept {
        return {fd_.get(), family_, in, &gso_, scratch_.get()};
    }

    /// SO_RCVBUF, in bytes (capped by the kernel's rmem_max).
    Result<void> set_recv_buffer_size(int bytes) noexcept;
    /// SO_SNDBUF, in bytes (capped by the kernel's wmem_max).
    Result<void> set_send_buffer_size(int bytes) noexcept;
    /// The kernel's SO_RCVBUF / SO_SNDBUF (it doubles what was asked, for bookkeeping).
    Result<int> recv_buffer_size() const noexcept;
    /// The kernel's SO_SNDBUF.
    Result<int> send_buffer_size() const noexcept;
    /// SO_BROADCAST: allow sends to a broadcast address.
    Result<void> set_broadcast(bool on) noexcept;
    /// The address the socket is bound to (getsockname).
    Result<SocketAddr> local_addr() const noexcept;
    /// The connected peer (getpeername); fails when not connected.
    Result<SocketAddr> peer_addr() const noexcept;

    /// AF_INET or AF_INET6.
    int family() const noexcept { return family_; }
    /// UdpOptions::segmentation_offload is on and the kernel accepted it (so far).
    bool segmentation_offload() const noexcept { return gso_; }
    /// UdpOptions::receive_offload is on and the kernel accepted it.
    bool receive_offload() const noexcept { return gro_ != nullptr; }

private:
    static Result<UdpSocket> create(int family, const UdpOptions& options) noexcept;

    int family_ = AF_UNSPEC;
    std::uint16_t local_port_ = 0; // for `local` addresses (pktinfo carries no port)
    bool local_address_ = false;
    bool gso_ = false; // UdpOptions::segmentation_offload, and the kernel has UDP_SEGMENT
    std::unique_ptr<detail::GroStash> gro_; // UdpOptions::receive_offload, and UDP_GRO is on
    // recv_batch/send_batch arrays, pooled
    std::unique_ptr<detail::BatchScratch, detail::BatchScratchDelete> scratch_;
};

} // namespace galay
