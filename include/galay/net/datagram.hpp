// galay/net/datagram.hpp: what a datagram receive reports, and the slots a batch of datagrams
// is received into and sent from (UdpSocket, galay/net/udp.hpp; RecvInfo also UnixDatagram's).
//
//     std::vector<std::array<char, 2048>> storage(32);
//     std::vector<galay::Datagram> in(storage.begin(), storage.end()); // one buffer each
//     // ... auto n = co_await sock.recv_batch(in): in[0 .. n) hold datagrams
//     galay::SocketAddr to = galay::SocketAddr::loopback_v4(9000);
//     galay::OutDatagram reply(in[0].data(), &to);                        // its bytes, to `to`
//     galay::RecvInfo info;                  // what recv_from gives: size, truncated, real size
//
// A datagram that does not fit its buffer is cut: `truncated` is set and `datagram_size` says
// how long it was; its tail is gone (the kernel discards it).
#pragma once

#include "galay/detail/buffers.hpp"
#include "galay/net/socket_addr.hpp"

#include <cstddef>
#include <ranges>
#include <span>

namespace galay {

/// What one receive produced. (The flag comes first: no tail padding, see io::CopyStats.)
struct RecvInfo {
    bool truncated = false;        ///< the datagram did not fit; its tail was discarded
    std::size_t size = 0;          ///< bytes stored in the caller's buffer
    std::size_t datagram_size = 0; ///< the datagram's real length (> size when truncated)
};

/// One slot of `recv_batch`: the caller's buffer (in) and what arrived in it (out).
struct Datagram {
    Datagram() noexcept = default;
    /// A slot receiving into `buf`, which must outlive the receive.
    template <MutableBuffer B>
    explicit Datagram(B&& buf) noexcept
        : buffer(reinterpret_cast<std::byte*>(std::ranges::data(buf)), std::ranges::size(buf)) {}

    std::span<std::byte> buffer;   ///< in: where the datagram goes
    std::size_t size = 0;          ///< out: bytes stored in `buffer`
    std::size_t datagram_size = 0; ///< out: the datagram's real length
    bool truncated = false;        ///< out: datagram_size > buffer.size()
    SocketAddr from;               ///< out: the sender
    SocketAddr local; ///< out: the address it was sent to (UdpOptions::local_address), else unset

    /// The bytes received: the first `size` bytes of `buffer`.
    std::span<std::byte> data() const noexcept { return buffer.first(size); }
};

/// One datagram for `send_batch`. `to` must stay valid until the send completes; null sends to
/// the connected peer.
struct OutDatagram {
    OutDatagram() noexcept = default;
    /// `bytes` (which must outlive the send) to `dest`, or to the connected peer when null.
    template <ConstBuffer B>
    explicit OutDatagram(const B& bytes, const SocketAddr* dest = nullptr) noexcept
        : data(reinterpret_cast<const std::byte*>(std::ranges::data(bytes)),
               std::ranges::size(bytes))
        , to(dest) {}

    /// The datagram's bytes.
    std::span<const std::byte> data;
    /// The destination; null: the connected peer.
    const SocketAddr* to = nullptr;
};

} // namespace galay
