// UDP batches: recv_batch (recvmmsg, with or without receive offload) and send_batch (sendmmsg,
// runs of equal-size datagrams coalesced into UDP_SEGMENT messages). One datagram at a time:
// src/net/udp.cpp; the pooled kernel-facing arrays: src/net/udp_batch.hpp.
#include "net/udp_batch.hpp"
#include "driver/mmsg.hpp"
#include "galay/net/udp.hpp"
#include "net/udp_msg.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace galay {
namespace detail {

static_assert(CMSG_SPACE(sizeof(in6_pktinfo)) <= kPktinfoControl);
#if defined(IP_PKTINFO)
static_assert(CMSG_SPACE(sizeof(in_pktinfo)) <= kPktinfoControl);
#else
static_assert(CMSG_SPACE(sizeof(in_addr)) <= kPktinfoControl); // IP_RECVDSTADDR
#endif

// --- recv_batch -------------------------------------------------------------------------------

RecvBatchAwaitable::RecvBatchAwaitable(int fd, std::span<Datagram> out, bool local_address,
                                       std::uint16_t local_port, GroStash* gro,
                                       BatchScratch* pool) noexcept
    : out_(out.first(std::min(out.size(), kMaxUdpBatch)))
    , local_address_(local_address)
    , local_port_(local_port)
    , gro_(gro)
    , pool_(pool) {
    op_.code = OpCode::recvmmsg;
    op_.fd = fd;
    op_.msg_flags = MSG_TRUNC;
}

void RecvBatchAwaitable::prepare() {
    RecvBatchScratch& s = *(s_ = pool_->recv.acquire());
    for (std::size_t i = 0; i < out_.size(); ++i) {
        Datagram& d = out_[i];
        msghdr& m = s.msgs[i].msg_hdr;
        if (gro_ != nullptr) { // into blocks: one message may bring several datagrams
            GroStash::Block* b = s.blocks[i] = gro_->acquire();
            s.iov[i].iov_base = b->payload;
            s.iov[i].iov_len = GroStash::kPayload;
            m.msg_name = b->from.data();
            m.msg_control = b->control;
            m.msg_controllen = GroStash::kControl;
        } else {
            s.iov[i].iov_base = d.buffer.data();
            s.iov[i].iov_len = d.buffer.size();
            m.msg_name = d.from.data();
            m.msg_control = local_address_ ? s.control[i].data() : nullptr;
            m.msg_controllen = local_address_ ? kPktinfoControl : 0;
        }
        m.msg_namelen = SocketAddr::capacity();
        m.msg_iov = &s.iov[i];
        m.msg_iovlen = 1;
        m.msg_flags = 0;
        s.msgs[i].msg_len = 0;
    }
    op_.buf = s.msgs.data();
    op_.len = static_cast<std::uint32_t>(out_.size());
}

Result<std::size_t> RecvBatchAwaitable::offload_result() {
    if (s_ != nullptr) { // queue what the kernel brought; give back the blocks it did not fill
        RecvBatchScratch& s = *s_;
        const std::size_t n = op_.result > 0 ? static_cast<std::size_t>(op_.result) : 0;
        std::uint16_t port = local_port_;
        if (local_address_ && port == 0 && n > 0) port = bound_port(op_.fd);
        for (std::size_t i = 0; i < out_.size(); ++i) {
            if (i >= n) {
                gro_->release(s.blocks[i]);
                continue;
            }
            ControlInfo c = parse_control(s.msgs[i].msg_hdr, local_address_, port);
            gro_->push(s.blocks[i], s.msgs[i].msg_len, c.segment, c.local);
        }
        pool_->recv.release(std::exchange(s_, nullptr));
        if (op_.result < 0 && !gro_->has_pending()) return fail(static_cast<int>(-op_.result));
    }
    std::size_t k = 0;
    for (; k < out_.size() && gro_->has_pending(); ++k) {
        // Keep a sender's run whole when it no longer fits: the next call gets it entire, so an
        // echo of these slots re-coalesces into one UDP_SEGMENT send instead of two.
        if (k > 0 && gro_->front_run_size() > out_.size() - k) break;
        Datagram& d = out_[k];
        const RecvInfo info = gro_->take(d.buffer, &d.from, local_address_ ? &d.local : nullptr);
        d.size = info.size;
        d.datagram_size = info.datagram_size;
        d.truncated = info.truncated;
    }
    return k;
}

Result<std::size_t> RecvBatchAwaitable::plain_result() {
    if (s_ == nullptr) return 0; // nothing was asked (no slots)
    RecvBatchScratch& s = *s_;
    if (op_.result >= 0) {
        const auto n = static_cast<std::size_t>(op_.result);
        std::uint16_t port = local_port_;
        if (local_address_ && port == 0) port = bound_port(op_.fd);
        for (std::size_t i = 0; i < n; ++i) {
            Datagram& d = out_[i];
            const RecvInfo info =
                recv_info(s.msgs[i].msg_len, d.buffer.size(), s.msgs[i].msg_hdr.msg_flags);
            d.size = info.size;
            d.datagram_size = info.datagram_size;
            d.truncated = info.truncated;
            if (local_address_) d.local = local_from_control(s.msgs[i].msg_hdr, port);
        }
    }
    pool_->recv.release(std::exchange(s_, nullptr));
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    return static_cast<std::size_t>(op_.result);
}

Result<std::size_t> RecvBatchAwaitable::result() {
    return gro_ != nullptr ? offload_result() : plain_result();
}

// --- send_batch -------------------------------------------------------------------------------

namespace {
// Kernel limits for one UDP_SEGMENT send: 64 segments (UDP_MAX_SEGMENTS on older kernels) and
// one UDP length field for the whole payload.
constexpr std::size_t kMaxGsoSegments = 64;
constexpr std::size_t kMaxGsoBytes = 65000;

bool same_destination(const SocketAddr* a, const SocketAddr* b) noexcept {
    return a == b || (a != nullptr && b != nullptr && *a == *b);
}
} // namespace

SendBatchAwaitable::SendBatchAwaitable(int fd, int family, std::span<const OutDatagram> in,
                                       bool* gso, BatchScratch* pool) noexcept
    : in_(in.first(std::min(in.size(), kMaxUdpBatch)))
    , gso_(gso)
    , pool_(pool) {
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

void SendBatchAwaitable::prepare() {
    SendBatchScratch& s = *(s_ = pool_->send.acquire());
    for (std::size_t i = 0; i < count_; ++i) {
        s.iov[i].iov_base = const_cast<std::byte*>(in_[i].data.data());
        s.iov[i].iov_len = in_[i].data.size();
    }
#if defined(UDP_SEGMENT)
    const bool coalesce = gso_ != nullptr && *gso_;
#else
    // No UDP_SEGMENT (macOS, FreeBSD): one datagram per message.
    const bool coalesce = false;
#endif
    std::size_t m = 0;
    [[maybe_unused]] std::size_t groups = 0; // UDP_SEGMENT messages so far
    for (std::size_t i = 0; i < count_; ++m) {
        // A run: same destination, same size, except that the last one may be shorter.
        std::size_t j = i + 1;
        const std::size_t size = in_[i].data.size();
        if (coalesce && size > 0) {
            std::size_t total = size;
            while (j < count_ && j - i < kMaxGsoSegments &&
                   same_destination(in_[i].to, in_[j].to)) {
                const std::size_t s = in_[j].data.size();
                if (s == 0 || s > size || total + s > kMaxGsoBytes) break;
                total += s;
                ++j;
                if (s < size) break;
            }
        }
        // The group's iovecs, merged where one datagram ends where the next begins (a sender
        // that stamps its messages back to back gets one copy per group in the kernel).
        std::size_t w = i + 1;
        for (std::size_t k = i + 1; k < j; ++k) {
            auto* end = static_cast<std::byte*>(s.iov[w - 1].iov_base) + s.iov[w - 1].iov_len;
            if (end == in_[k].data.data())
                s.iov[w - 1].iov_len += in_[k].data.size();
            else
                s.iov[w++] = s.iov[k];
        }
        msghdr& h = s.msgs[m].msg_hdr;
        const SocketAddr* to = in_[i].to;
        h.msg_name = to != nullptr ? const_cast<sockaddr*>(to->data()) : nullptr;
        h.msg_namelen = to != nullptr ? to->size() : 0;
        h.msg_iov = &s.iov[i];
        h.msg_iovlen = w - i;
        h.msg_control = nullptr;
        h.msg_controllen = 0;
        h.msg_flags = 0;
#if defined(UDP_SEGMENT)
        if (j - i > 1) {
            h.msg_control = s.control[groups].data();
            h.msg_controllen = CMSG_SPACE(sizeof(std::uint16_t));
            cmsghdr* c = CMSG_FIRSTHDR(&h);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
            const auto seg = static_cast<std::uint16_t>(size);
            std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
            ++groups;
        }
#endif
        s.msgs[m].msg_len = 0;
        s.first[m] = static_cast<std::uint8_t>(i);
        s.segs[m] = static_cast<std::uint8_t>(j - i);
        i = j;
    }
    messages_ = m;
    op_.buf = s.msgs.data();
    op_.len = static_cast<std::uint32_t>(m);
}

void SendBatchAwaitable::one_message_per_datagram(std::size_t from) noexcept {
    SendBatchScratch& s = *s_;
    for (std::size_t i = from; i < count_; ++i) { // prepare() may have merged iovecs: redo them
        s.iov[i].iov_base = const_cast<std::byte*>(in_[i].data.data());
        s.iov[i].iov_len = in_[i].data.size();
        msghdr& h = s.msgs[i - from].msg_hdr;
        const SocketAddr* to = in_[i].to;
        h = msghdr{};
        h.msg_name = to != nullptr ? const_cast<sockaddr*>(to->data()) : nullptr;
        h.msg_namelen = to != nullptr ? to->size() : 0;
        h.msg_iov = &s.iov[i];
        h.msg_iovlen = 1;
    }
}

Result<std::size_t> SendBatchAwaitable::send_rest_without_gso(std::size_t from) noexcept {
    SendBatchScratch& s = *s_;
    // Rare: the first UDP_SEGMENT send on a route that cannot take it (no checksum offload,
    // IPsec, a segment larger than the MTU allows). The rest goes now, non-blocking.
    one_message_per_datagram(from);
    std::size_t sent = from;
    while (sent < count_) {
        const auto left = static_cast<unsigned>(count_ - sent);
        int r = detail::mmsg_call(false, op_.fd, s.msgs.data() + (sent - from), left, MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (sent > 0) return sent;
            return fail(errno);
        }
        sent += static_cast<std::size_t>(r);
    }
    return sent;
}

Result<std::size_t> SendBatchAwaitable::result() {
    if (count_ == 0) return fail(setup_error_);
    Result<std::size_t> r = outcome();
    pool_->send.release(std::exchange(s_, nullptr));
    return r;
}

std::size_t SendBatchAwaitable::datagrams_in(std::size_t messages) const noexcept {
    return messages >= messages_ ? count_ : s_->first[messages];
}

Result<std::size_t> SendBatchAwaitable::outcome() {
    // `done` counts the messages sent, also when an error (or a cancel) stopped the rest.
    const std::size_t messages_sent = op_.done;
    const std::size_t sent = datagrams_in(messages_sent);
    if (op_.result >= 0) return sent;
    const int err = static_cast<int>(-op_.result);
    if ((err == EIO || err == EINVAL) && messages_sent < messages_ && s_->segs[messages_sent] > 1) {
        *gso_ = false; // this socket's route refuses UDP_SEGMENT: one datagram per message now
        return send_rest_without_gso(sent);
    }
    if (sent > 0) return sent; // the error shows again when the caller sends the rest
    return fail(err);
}

void BatchScratchDelete::operator()(BatchScratch* p) const noexcept {
    delete p;
}

} // namespace detail
} // namespace galay
