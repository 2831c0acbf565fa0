// The kernel-facing arrays of a UDP batch (recv_batch/send_batch): Linux mmsghdr, iovecs and
// control data, pooled per socket. Private to the library, so that include/galay/net/udp.hpp
// names no Linux-only type.
#pragma once

#include "galay/net/udp.hpp"
#include "platform/mmsghdr.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cstdint>

namespace galay::detail {

inline constexpr std::size_t kPktinfoControl = 40; // CMSG_SPACE(sizeof(in6_pktinfo))
inline constexpr std::size_t kGsoControl = 24;     // CMSG_SPACE(sizeof(std::uint16_t))

// The kernel-facing arrays of one batch (6-8 KiB) live in a per-socket pool, not in the
// awaitable: GCC 12 copies an awaitable into the coroutine frame before awaiting it, which
// measured as an 8 KiB memcpy per recv_batch (~40% of bench_udp's client coroutine).
struct RecvBatchScratch {
    std::array<platform::mmsghdr, kMaxUdpBatch> msgs;
    std::array<iovec, kMaxUdpBatch> iov;
    std::array<std::array<unsigned char, kPktinfoControl>, kMaxUdpBatch> control;
    std::array<GroStash::Block*, kMaxUdpBatch> blocks;
};
struct SendBatchScratch {
    std::array<platform::mmsghdr, kMaxUdpBatch> msgs;
    std::array<iovec, kMaxUdpBatch> iov;
    std::array<std::uint8_t, kMaxUdpBatch> first; // first datagram of message m
    std::array<std::uint8_t, kMaxUdpBatch> segs;  // datagrams in message m
    alignas(8) std::array<std::array<unsigned char, kGsoControl>, kMaxUdpBatch / 2> control;
};
struct BatchScratch {
    Pool<RecvBatchScratch> recv;
    Pool<SendBatchScratch> send;
};

} // namespace galay::detail
