// galay/net/udp.hpp: UDP sockets, one datagram at a time or in batches.
//
//     galay::Task<void> echo_worker(std::uint16_t port) {
//         auto sock = galay::UdpSocket::bind(galay::SocketAddr::any_v4(port), {.reuse_port =
//         true}); if (!sock) co_return; std::vector<std::array<char, 2048>> storage(32);
//         std::vector<galay::Datagram> in(storage.begin(), storage.end()); // one buffer each
//         std::vector<galay::OutDatagram> out(in.size());
//         for (;;) {
//             auto n = co_await sock->recv_batch(in);            // recvmmsg: up to 32 at once
//             if (!n) co_return;
//             for (std::size_t i = 0; i < *n; ++i)
//                 out[i] = galay::OutDatagram(in[i].data(), &in[i].from);
//             co_await sock->send_batch(std::span(out).first(*n)); // sendmmsg: all of them
//         }
//     }
//
//     auto r = co_await sock.recv_from(buf, &from).timeout(2s);   // Result<RecvInfo>
//     if (r && r->truncated) { /* r->datagram_size bytes were sent, r->size fit in buf */ }
//
// Every operation returns `Result<...>` and accepts `.timeout(d)`; destroying a socket closes it.
// Batches: on epoll one `recvmmsg`/`sendmmsg` per batch; on io_uring (which has no recvmmsg
// opcode) the same system calls, issued once io_uring reports the socket ready (see
// src/driver/mmsg.hpp).
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/net/socket_addr.hpp"
#include "galay/net/tcp.hpp" // MutableBuffer/ConstBuffer, make_socket, close_fd

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <span>

namespace galay {

/// What one receive produced.
struct RecvInfo {
    std::size_t size = 0;          ///< bytes stored in the caller's buffer
    std::size_t datagram_size = 0; ///< the datagram's real length (> size when truncated)
    bool truncated = false;        ///< the datagram did not fit; its tail was discarded
};

/// One slot of `recv_batch`: the caller's buffer (in) and what arrived in it (out).
struct Datagram {
    Datagram() noexcept = default;
    template <MutableBuffer B>
    explicit Datagram(B&& buf) noexcept
        : buffer(reinterpret_cast<std::byte*>(std::ranges::data(buf)), std::ranges::size(buf)) {}

    std::span<std::byte> buffer;   ///< in: where the datagram goes
    std::size_t size = 0;          ///< out: bytes stored in `buffer`
    std::size_t datagram_size = 0; ///< out: the datagram's real length
    bool truncated = false;        ///< out: datagram_size > buffer.size()
    SocketAddr from;               ///< out: the sender
    SocketAddr local; ///< out: the address it was sent to (UdpOptions::local_address), else unset

    std::span<std::byte> data() const noexcept { return buffer.first(size); }
};

/// One datagram for `send_batch`. `to` must stay valid until the send completes; null sends to
/// the connected peer.
struct OutDatagram {
    OutDatagram() noexcept = default;
    template <ConstBuffer B>
    explicit OutDatagram(const B& bytes, const SocketAddr* dest = nullptr) noexcept
        : data(reinterpret_cast<const std::byte*>(std::ranges::data(bytes)),
               std::ranges::size(bytes))
        , to(dest) {}

    std::span<const std::byte> data;
    const SocketAddr* to = nullptr;
};

struct UdpOptions {
    bool reuse_addr = false;
    bool reuse_port = false;  ///< SO_REUSEPORT: several sockets (workers, threads) share a port
    bool v6_only = false;     ///< an IPv6 socket refuses IPv4 traffic
    int recv_buffer_size = 0; ///< SO_RCVBUF in bytes (0: system default; capped by rmem_max)
    int send_buffer_size = 0; ///< SO_SNDBUF in bytes (0: system default)
    /// IP_PKTINFO / IPV6_RECVPKTINFO: report the local address each datagram was sent to
    /// (`recv_from(buf, &from, &local)`, `Datagram::local`). Useful on wildcard binds.
    bool local_address = false;
};

class UdpSocket;

namespace detail {

/// sendmsg to an address (or to the connected peer when `to` is null).
class SendToAwaitable : public IoAwaitable<SendToAwaitable> {
public:
    SendToAwaitable(int fd, int family, const void* buf, std::size_t len,
                    const SocketAddr* to) noexcept;
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept;
    Result<std::size_t> result();

private:
    msghdr msg_{};
    iovec iov_{};
    SocketAddr to_;
    bool has_to_ = false;
    int setup_error_ = 0;
};

/// recvmsg with MSG_TRUNC (the kernel reports the real length of a datagram that did not fit).
class RecvFromAwaitable : public IoAwaitable<RecvFromAwaitable> {
public:
    RecvFromAwaitable(int fd, void* buf, std::size_t len, SocketAddr* from, SocketAddr* local,
                      std::uint16_t local_port) noexcept;
    void prepare() noexcept;
    Result<RecvInfo> result();

private:
    msghdr msg_{};
    iovec iov_{};
    SocketAddr* from_;
    SocketAddr* local_;
    std::uint16_t local_port_;
    alignas(8) unsigned char control_[64];
};

inline constexpr std::size_t kMaxUdpBatch = 64;
inline constexpr std::size_t kPktinfoControl = 40; // CMSG_SPACE(sizeof(in6_pktinfo))

/// recvmmsg into up to kMaxUdpBatch caller buffers.
class RecvBatchAwaitable : public IoAwaitable<RecvBatchAwaitable> {
public:
    RecvBatchAwaitable(int fd, std::span<Datagram> out, bool local_address,
                       std::uint16_t local_port) noexcept;
    bool await_ready() const noexcept { return out_.empty(); }
    void prepare() noexcept;
    Result<std::size_t> result();

private:
    std::span<Datagram> out_;
    bool local_address_;
    std::uint16_t local_port_;
    // Filled for the first out_.size() entries only, in prepare(): no per-op zeroing of 7 KiB.
    std::array<mmsghdr, kMaxUdpBatch> msgs_;
    std::array<iovec, kMaxUdpBatch> iov_;
    std::array<std::array<unsigned char, kPktinfoControl>, kMaxUdpBatch> control_;
};

/// sendmmsg of up to kMaxUdpBatch datagrams; finishes the batch unless an error stops it.
class SendBatchAwaitable : public IoAwaitable<SendBatchAwaitable> {
public:
    SendBatchAwaitable(int fd, int family, std::span<const OutDatagram> in) noexcept;
    bool await_ready() const noexcept { return count_ == 0; }
    void prepare() noexcept;
    Result<std::size_t> result();

private:
    std::span<const OutDatagram> in_;
    std::size_t count_ = 0; // datagrams handed to the kernel (stops before a bad address)
    int setup_error_ = 0;   // the address of datagram `count_` is unusable
    std::array<mmsghdr, kMaxUdpBatch> msgs_;
    std::array<iovec, kMaxUdpBatch> iov_;
};

} // namespace detail

/// A UDP socket (IPv4 or IPv6). Move-only; destroying it closes the socket.
class UdpSocket {
public:
    /// The most datagrams one recv_batch/send_batch call moves; larger spans are served in part
    /// (the returned count says how many).
    static constexpr std::size_t max_batch = detail::kMaxUdpBatch;

    UdpSocket() noexcept = default;
    UdpSocket(UdpSocket&& o) noexcept;
    UdpSocket& operator=(UdpSocket&& o) noexcept;
    ~UdpSocket() { detail::close_fd(fd_); }

    /// socket + options + bind. Port 0 picks a free port (see local_addr()).
    static Result<UdpSocket> bind(const SocketAddr& addr, UdpOptions options = {}) noexcept;
    /// An unbound socket of `family` (AF_INET or AF_INET6); the first send binds it to an
    /// ephemeral port.
    static Result<UdpSocket> open(int family, UdpOptions options = {}) noexcept;

    /// Fix the peer: send()/recv() then talk to `addr` only, and datagrams from anyone else are
    /// dropped by the kernel. Synchronous (UDP connect sends nothing).
    Result<void> connect(const SocketAddr& addr) noexcept;

    /// Send `buf` as one datagram to `to`. An unspecified address or one of the wrong family is
    /// `address_family_not_supported`.
    template <ConstBuffer B>
    detail::SendToAwaitable send_to(const B& buf, const SocketAddr& to) noexcept {
        return {fd_, family_, detail::buffer_data(buf), std::ranges::size(buf), &to};
    }
    /// Receive one datagram into `buf`; `from` (optional) gets the sender, `local` (optional,
    /// with UdpOptions::local_address) the address it was sent to.
    template <MutableBuffer B>
    detail::RecvFromAwaitable recv_from(B&& buf, SocketAddr* from,
                                        SocketAddr* local = nullptr) noexcept {
        return {fd_, std::ranges::data(buf), std::ranges::size(buf), from, local, local_port_};
    }
    /// Send one datagram to the connected peer.
    template <ConstBuffer B>
    detail::SendToAwaitable send(const B& buf) noexcept {
        return {fd_, family_, detail::buffer_data(buf), std::ranges::size(buf), nullptr};
    }
    /// Receive one datagram (from the connected peer, on a connected socket).
    template <MutableBuffer B>
    detail::RecvFromAwaitable recv(B&& buf) noexcept {
        return {fd_, std::ranges::data(buf), std::ranges::size(buf), nullptr, nullptr, 0};
    }

    /// Receive at least one and up to min(out.size(), max_batch) datagrams, one per slot, in
    /// arrival order. Returns how many slots were filled.
    detail::RecvBatchAwaitable recv_batch(std::span<Datagram> out) noexcept {
        return {fd_, out, local_address_, local_port_};
    }
    /// Send up to min(in.size(), max_batch) datagrams in order. Returns how many were sent: all
    /// of them unless an error stopped the batch (the error is returned when none was sent).
    detail::SendBatchAwaitable send_batch(std::span<const OutDatagram> in) noexcept {
        return {fd_, family_, in};
    }

    detail::CloseAwaitable close() noexcept {
        return detail::CloseAwaitable(std::exchange(fd_, -1));
    }

    Result<void> set_recv_buffer_size(int bytes) noexcept;
    Result<void> set_send_buffer_size(int bytes) noexcept;
    /// The kernel's SO_RCVBUF / SO_SNDBUF (it doubles what was asked, for bookkeeping).
    Result<int> recv_buffer_size() const noexcept;
    Result<int> send_buffer_size() const noexcept;
    Result<void> set_broadcast(bool on) noexcept;
    Result<SocketAddr> local_addr() const noexcept;
    Result<SocketAddr> peer_addr() const noexcept;

    bool is_open() const noexcept { return fd_ >= 0; }
    int fd() const noexcept { return fd_; }
    int family() const noexcept { return family_; }

private:
    static Result<UdpSocket> create(int family, const UdpOptions& options) noexcept;

    int fd_ = -1;
    int family_ = AF_UNSPEC;
    std::uint16_t local_port_ = 0; // for `local` addresses (pktinfo carries no port)
    bool local_address_ = false;
};

} // namespace galay
