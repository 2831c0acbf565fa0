// kTLS after the hand-off: the socket carries plaintext, so recv and send are the TcpStream's
// own operations. What is not application data travels with a control message: the record type
// of what the kernel received (TLS_GET_RECORD_TYPE: the peer's alerts, its handshake messages)
// and of what galay sends (TLS_SET_RECORD_TYPE: close_notify).
#include "galay/tls/stream.hpp"
#include "tls/ktls.hpp"

#include <linux/tls.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

namespace galay::tls::detail {

namespace {

constexpr unsigned char kAlert = 21, kHandshake = 22, kApplicationData = 23;
constexpr unsigned char kNewSessionTicket = 4, kKeyUpdate = 24;
constexpr unsigned char kCloseNotify = 0, kUserCanceled = 90;

std::chrono::steady_clock::time_point time_point(std::int64_t ns) {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

/// recvmsg or sendmsg of one buffer with a record-type control message.
class RecordMsg : public galay::detail::IoAwaitable<RecordMsg> {
public:
    RecordMsg(galay::detail::OpCode code, int fd, void* buf, std::size_t len,
              unsigned char type) noexcept
        : iov_{buf, len}
        , type_(type) {
        op_.code = code;
        op_.fd = fd;
    }
    void prepare() noexcept {
        msg_ = {};
        msg_.msg_iov = &iov_;
        msg_.msg_iovlen = 1;
        msg_.msg_control = control_;
        msg_.msg_controllen = sizeof control_;
        if (op_.code == galay::detail::OpCode::sendmsg) {
            cmsghdr* cm = CMSG_FIRSTHDR(&msg_);
            cm->cmsg_level = SOL_TLS;
            cm->cmsg_type = TLS_SET_RECORD_TYPE;
            cm->cmsg_len = CMSG_LEN(1);
            *CMSG_DATA(cm) = type_;
            msg_.msg_controllen = CMSG_SPACE(1);
        }
        op_.buf = &msg_;
    }
    Result<std::size_t> result() {
        if (op_.code == galay::detail::OpCode::recvmsg && op_.result >= 0)
            type_ = received_record_type(msg_.msg_control, msg_.msg_controllen);
        return galay::detail::size_result(op_.result);
    }
    /// After a recvmsg: the type of the record the bytes came from.
    unsigned char type() const noexcept { return type_; }

private:
    iovec iov_;
    msghdr msg_{};
    alignas(cmsghdr) unsigned char control_[CMSG_SPACE(1)]{};
    unsigned char type_;
};

Result<std::size_t> fail(Core& c, errc code, std::string text) {
    c.error_text = std::move(text);
    return std::unexpected(c.mark_broken(make_error_code(code)));
}

} // namespace

unsigned char received_record_type(const void* control, std::size_t len) noexcept {
    msghdr msg{};
    msg.msg_control = const_cast<void*>(control);
    msg.msg_controllen = len;
    unsigned char type = kApplicationData; // (no control message: data)
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
        // A message too short for its byte, or running past the buffer, says nothing.
        const auto at =
            reinterpret_cast<const unsigned char*>(cm) - static_cast<const unsigned char*>(control);
        if (cm->cmsg_len < CMSG_LEN(1) || cm->cmsg_len > len - static_cast<std::size_t>(at)) break;
        if (cm->cmsg_level == SOL_TLS && cm->cmsg_type == TLS_GET_RECORD_TYPE)
            type = *CMSG_DATA(cm);
    }
    return type;
}

ControlRead read_control(KtlsTrack& t, unsigned char type, const unsigned char* p, std::size_t n) {
    using Kind = ControlRead::Kind;
    if (type != kAlert && type != kHandshake)
        return {Kind::refused,
                "tls: a record of type " + std::to_string(type) + " after the kTLS hand-off"};
    // A message is not interleaved with records of another type (RFC 8446 5.1): a header
    // gathered, or a body skipped, must go on in a record of its own type.
    if ((t.control_have > 0 || t.control_skip > 0) && type != t.control_type)
        return {Kind::refused, "tls: a record of type " + std::to_string(type) +
                                   " inside a message of type " + std::to_string(t.control_type)};
    t.control_type = type;
    while (n > 0) {
        if (type == kHandshake && t.control_skip > 0) { // the body of a NewSessionTicket
            const std::size_t k = std::min(n, t.control_skip);
            t.control_skip -= k;
            p += k;
            n -= k;
            continue;
        }
        t.control[t.control_have++] = *p++;
        --n;
        if (type == kAlert && t.control_have == 2) {
            t.control_have = 0;
            const unsigned char description = t.control[1];
            if (description == kCloseNotify) return {Kind::close_notify, {}};
            if (description == kUserCanceled) continue; // (a warning; close_notify follows)
            return {Kind::refused, "tls: the peer sent alert " + std::to_string(description)};
        }
        if (type == kHandshake && t.control_have == 4) {
            t.control_have = 0;
            t.control_skip =
                std::size_t{t.control[1]} << 16 | std::size_t{t.control[2]} << 8 | t.control[3];
            if (t.control[0] == kNewSessionTicket) continue; // no resumption from this one
            if (t.control[0] == kKeyUpdate)
                return {Kind::refused, "tls: the peer updated its keys (KeyUpdate), which galay "
                                       "does not pass to the kernel"};
            return {Kind::refused, "tls: handshake message " + std::to_string(t.control[0]) +
                                       " after the kTLS hand-off"};
        }
    }
    return {Kind::more, {}};
}

std::optional<Result<std::size_t>> ktls_control(Core& c, unsigned char type, const unsigned char* p,
                                                std::size_t n) {
    ControlRead r = read_control(*c.ktls_track, type, p, n);
    switch (r.kind) {
    case ControlRead::Kind::more:
        return std::nullopt;
    case ControlRead::Kind::close_notify:
        c.peer_eof = true;
        return std::size_t{0};
    case ControlRead::Kind::refused:
        break;
    }
    return fail(c, errc::protocol_error, std::move(r.reason));
}

galay::detail::CachedTask<Result<std::size_t>>
ktls_recv_slow(galay::detail::FrameCache&, Core& c, std::span<char> buf, std::int64_t deadline_ns) {
    for (;;) {
        if (c.peer_eof) co_return std::size_t{0}; // after close_notify
        RecordMsg op(galay::detail::OpCode::recvmsg, c.tcp.fd(), buf.data(), buf.size(), 0);
        if (deadline_ns != 0) (void)std::move(op).deadline(time_point(deadline_ns));
        Result<std::size_t> n = co_await op;
        if (!n && n.error() == std::errc::bad_message)
            co_return fail(c, errc::protocol_error, "tls: the kernel rejected a record (bad MAC)");
        if (!n) co_return std::unexpected(n.error());
        if (*n == 0)
            co_return fail(c, errc::truncated,
                           "tls: the peer closed the connection without close_notify");
        if (op.type() == kApplicationData) co_return *n;
        if (auto r = ktls_control(c, op.type(), reinterpret_cast<unsigned char*>(buf.data()), *n))
            co_return std::move(*r);
    }
}

galay::detail::CachedTask<Result<std::size_t>> ktls_write_slow(galay::detail::FrameCache&, Core& c,
                                                               std::span<const iovec> iov, bool all,
                                                               std::int64_t deadline_ns) {
    if (!all) {
        auto op = c.tcp.writev(iov);
        if (deadline_ns != 0) (void)std::move(op).deadline(time_point(deadline_ns));
        co_return co_await op;
    }
    // The kernel makes the records: a send cut short leaves whole plaintext bytes behind, never
    // part of a record, so the stream stays usable.
    std::size_t total = 0;
    for (const iovec& v : iov) {
        auto op = c.tcp.send_all(std::span(static_cast<const char*>(v.iov_base), v.iov_len));
        if (deadline_ns != 0) (void)std::move(op).deadline(time_point(deadline_ns));
        Result<std::size_t> r = co_await op;
        total += op.transferred();
        if (!r) co_return std::unexpected(r.error());
    }
    co_return total;
}

galay::detail::CachedTask<Result<void>> ktls_shutdown_slow(galay::detail::FrameCache&, Core& c,
                                                           Shutdown how, std::int64_t deadline_ns) {
    if (!c.ktls_close_sent) {
        unsigned char alert[2] = {1, kCloseNotify}; // warning, close_notify
        RecordMsg op(galay::detail::OpCode::sendmsg, c.tcp.fd(), alert, sizeof alert, kAlert);
        if (deadline_ns != 0) (void)std::move(op).deadline(time_point(deadline_ns));
        Result<std::size_t> r = co_await op;
        if (!r) co_return std::unexpected(r.error());
        c.ktls_close_sent = true;
    }
    if (how != Shutdown::read) {
        Result<void> s = shutdown_tcp(c, how);
        if (!s) co_return std::unexpected(s.error());
    }
    co_return Result<void>{};
}

} // namespace galay::tls::detail
