// UDP, one datagram at a time: send_to/send, recv_from/recv, and the receive-offload stash that
// hands out a coalesced (UDP_GRO) receive one datagram per caller buffer. Batches:
// src/net/udp_batch.cpp; the socket and its options: src/net/udp_socket.cpp.
#include "galay/net/udp.hpp"
#include "net/udp_msg.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace galay {
namespace detail {

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

} // namespace detail
} // namespace galay
