#include "galay/net/udp.hpp"
#include "net/udp_batch.hpp"

#include "sockopt.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace galay {
namespace detail {
namespace {

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

/// What the control messages of one receive say: the GRO segment size (0: one datagram) and,
/// when asked for, the local address.
struct ControlInfo {
    std::uint32_t segment = 0;
    SocketAddr local;
};
ControlInfo parse_control(msghdr& msg, bool want_local, std::uint16_t port) noexcept {
    ControlInfo info;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int seg = 0;
            std::memcpy(&seg, CMSG_DATA(c), sizeof seg);
            info.segment = seg > 0 ? static_cast<std::uint32_t>(seg) : 0;
        }
    }
    if (want_local) info.local = local_from_control(msg, port);
    return info;
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

// --- receive offload --------------------------------------------------------------------------

void GroStash::push(Block* b, std::uint32_t len, std::uint32_t segment, const SocketAddr& local) {
    if (segment == 0 || segment > len) segment = len;
    if (len == 0) segment = 0; // an empty datagram is still one datagram
    runs_.push_back(Run{b, 0, len, segment, local});
}

RecvInfo GroStash::take(std::span<std::byte> dst, SocketAddr* from, SocketAddr* local) noexcept {
    Run& r = runs_[head_];
    const std::uint32_t size = std::min(r.segment, r.left);
    RecvInfo info = recv_info(size, dst.size(), 0);
    std::memcpy(dst.data(), r.block->payload + r.offset, info.size);
    if (from != nullptr) *from = r.block->from;
    if (local != nullptr) *local = r.local;
    r.offset += size;
    r.left -= size;
    if (r.left == 0) {
        release(r.block);
        if (++head_ == runs_.size()) {
            runs_.clear();
            head_ = 0;
        }
    }
    return info;
}

// --- recv_from / recv -------------------------------------------------------------------------

RecvFromAwaitable::RecvFromAwaitable(int fd, void* buf, std::size_t len, SocketAddr* from,
                                     SocketAddr* local, std::uint16_t local_port,
                                     GroStash* gro) noexcept
    : from_(from)
    , local_(local)
    , local_port_(local_port)
    , gro_(gro)
    , caller_(static_cast<std::byte*>(buf), len) {
    op_.code = OpCode::recvmsg;
    op_.fd = fd;
    op_.msg_flags = MSG_TRUNC; // the result is the datagram's real length
    iov_.iov_base = buf;
    iov_.iov_len = len;
}

void RecvFromAwaitable::prepare() {
    if (gro_ != nullptr) { // into a block: one receive may bring several datagrams
        block_ = gro_->acquire();
        msg_.msg_iov = &iov_;
        msg_.msg_iovlen = 1;
        msg_.msg_name = block_->from.data();
        msg_.msg_namelen = SocketAddr::capacity();
        msg_.msg_control = block_->control;
        msg_.msg_controllen = GroStash::kControl;
        iov_.iov_base = block_->payload;
        iov_.iov_len = GroStash::kPayload;
        op_.buf = &msg_;
        return;
    }
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
    if (gro_ != nullptr) {
        if (block_ != nullptr) { // the kernel was asked: queue what it brought
            GroStash::Block* b = std::exchange(block_, nullptr);
            if (op_.result < 0) {
                gro_->release(b);
                return fail(static_cast<int>(-op_.result));
            }
            const std::uint16_t port = local_port_ != 0 ? local_port_ : bound_port(op_.fd);
            ControlInfo c = parse_control(msg_, local_ != nullptr, port);
            gro_->push(b, static_cast<std::uint32_t>(op_.result), c.segment, c.local);
        }
        return gro_->take(caller_, from_, local_);
    }
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    if (local_ != nullptr) {
        std::uint16_t port = local_port_ != 0 ? local_port_ : bound_port(op_.fd);
        *local_ = local_from_control(msg_, port);
    }
    return recv_info(static_cast<std::size_t>(op_.result), iov_.iov_len, msg_.msg_flags);
}

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
    const bool coalesce = gso_ != nullptr && *gso_;
    std::size_t m = 0, groups = 0;
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
        int r =
            ::sendmmsg(op_.fd, s.msgs.data() + (sent - from), left, MSG_NOSIGNAL | MSG_DONTWAIT);
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

// --- UdpSocket --------------------------------------------------------------------------------

Result<UdpSocket> UdpSocket::create(int family, const UdpOptions& o) noexcept {
    if (family != AF_INET && family != AF_INET6) return fail(EAFNOSUPPORT);
    auto fd = detail::make_socket(family, SOCK_DGRAM);
    if (!fd) return std::unexpected(fd.error());
    UdpSocket s;
    s.fd_ = detail::OwnedFd(*fd);
    s.family_ = family;
    s.local_address_ = o.local_address;
    s.scratch_.reset(new detail::BatchScratch());
    if (o.segmentation_offload) { // the kernel knows UDP_SEGMENT (Linux 4.18+)
        int seg = 0;
        socklen_t len = sizeof seg;
        s.gso_ = ::getsockopt(s.fd_.get(), SOL_UDP, UDP_SEGMENT, &seg, &len) == 0;
    }
    if (o.receive_offload) { // Linux 5.0+; without it, every datagram is received on its own
        if (detail::setsockopt_int(s.fd_.get(), SOL_UDP, UDP_GRO, 1))
            s.gro_ = std::make_unique<detail::GroStash>();
    }
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
