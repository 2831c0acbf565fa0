// tls::Stream: OpenSSL over a pair of memory BIOs, every wire byte moved by the TcpStream's own
// operations. The slow paths are coroutines whose frames the stream keeps (no allocation per
// operation); the ciphertext goes between the socket and the BIO pair's buffers without a copy
// (BIO_nread0/BIO_nwrite0 lend those buffers).
#include "galay/tls/stream.hpp"

#include "tls/context_state.hpp"
#include "tls/ktls.hpp"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace galay::tls {

namespace detail {

namespace {

// Ciphertext buffers of the BIO pair: what OpenSSL writes (several records before one send) and
// what galay receives for it (several records per recv).
constexpr std::size_t kOutBuffer = 64 * 1024;
constexpr std::size_t kInBuffer = 32 * 1024;
// Plaintext per record, and the most one record can take in the out buffer (header, padding,
// MAC or tag: far less than 2 KiB for every suite): with this much room SSL_write never has to
// keep a half-written record of the caller's bytes.
constexpr std::size_t kRecordPlain = 16 * 1024;
constexpr std::size_t kRecordRoom = kRecordPlain + 2048;

std::chrono::steady_clock::time_point time_point(std::int64_t ns) {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

std::size_t out_room(Core& c) {
    return BIO_ctrl_get_write_guarantee(SSL_get_wbio(c.ssl));
}

/// Send every ciphertext byte OpenSSL has produced. One writer at a time (the lock); a failure
/// leaves the unsent bytes in the BIO, exactly, for whoever flushes next.
galay::detail::CachedTask<Result<void>> flush_slow(galay::detail::FrameCache&, Core& c,
                                                   std::int64_t deadline_ns) {
    Mutex::Guard guard = c.write_lock.try_lock();
    if (!guard) {
        auto wait = c.write_lock.lock();
        if (deadline_ns != 0) (void)std::move(wait).deadline(time_point(deadline_ns));
        Result<Mutex::Guard> got = co_await wait;
        if (!got) co_return std::unexpected(got.error());
        guard = std::move(*got);
    }
    for (;;) {
        char* data = nullptr;
        const int n = BIO_nread0(c.net, &data);
        if (n <= 0) break;
        auto op = c.tcp.send_all(std::span<const char>(data, static_cast<std::size_t>(n)));
        if (deadline_ns != 0) (void)std::move(op).deadline(time_point(deadline_ns));
        Result<std::size_t> sent = co_await op;
        ktls_sent(c, data, op.transferred());
        if (op.transferred() > 0) BIO_nread(c.net, &data, static_cast<int>(op.transferred()));
        if (!sent) co_return std::unexpected(sent.error());
    }
    co_return Result<void>{};
}

/// One receive from the socket into the BIO pair. 0: the peer closed the TCP stream.
galay::detail::CachedTask<Result<std::size_t>> fill_slow(galay::detail::FrameCache&, Core& c,
                                                         std::int64_t deadline_ns) {
    char* room = nullptr;
    const int space = BIO_nwrite0(c.net, &room);
    if (space <= 0) {
        c.error_text = "tls: the incoming record buffer is full";
        co_return std::unexpected(c.mark_broken(make_error_code(errc::protocol_error)));
    }
    auto op = c.tcp.recv(std::span<char>(room, static_cast<std::size_t>(space)));
    if (deadline_ns != 0) (void)std::move(op).deadline(time_point(deadline_ns));
    Result<std::size_t> n = co_await op;
    if (!n) co_return std::unexpected(n.error());
    if (*n == 0)
        c.peer_eof = true;
    else
        BIO_nwrite(c.net, &room, static_cast<int>(*n));
    co_return *n;
}

bool is_ip_address(const std::string& host) {
    unsigned char buf[sizeof(in6_addr)];
    return inet_pton(AF_INET, host.c_str(), buf) == 1 ||
           inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

} // namespace

Core::Core(std::shared_ptr<ContextState> context, TcpStream stream, bool is_server)
    : ctx(std::move(context))
    , tcp(std::move(stream))
    , server(is_server) {
    ssl = SSL_new(ctx->ctx);
    BIO* inner = nullptr;
    if (ssl == nullptr || BIO_new_bio_pair(&inner, kOutBuffer, &net, kInBuffer) != 1) {
        const std::string reason = drain_ssl_errors();
        if (ssl != nullptr) SSL_free(ssl);
        throw Error(std::make_error_code(std::errc::not_enough_memory), "tls stream: " + reason);
    }
    SSL_set_bio(ssl, inner, inner);
    SSL_set_app_data(ssl, this);
    scratch = std::make_unique_for_overwrite<char[]>(kRecordPlain);
    if (ctx->follow) ktls_follow(*this);
}

Core::~Core() {
    // OpenSSL forgets the session of a connection freed without close_notify. A stream that
    // ended without any failure (the application simply closed it, as HTTP clients do) keeps
    // its session resumable; one that failed does not.
    if (ssl != nullptr && handshaken && !broken)
        SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_SENT_SHUTDOWN);
    if (ssl != nullptr) SSL_free(ssl); // (and the BIO half it owns)
    if (net != nullptr) BIO_free(net);
}

void Core::take_ssl_errors(std::string_view what) {
    std::string reason = drain_ssl_errors();
    error_text.assign(what);
    error_text += reason.empty() ? std::string(": no reason given by OpenSSL") : ": " + reason;
}

std::optional<Result<std::size_t>> Core::try_recv(std::span<char> buf) {
    if (broken) return std::unexpected(broken);
    if (!handshaken) return std::unexpected(make_error_code(errc::not_connected));
    if (buf.empty()) return std::size_t{0};
    if (ktls_rx) return std::nullopt; // (the kernel has the records)
    ERR_clear_error();
    const int r =
        SSL_read(ssl, buf.data(), static_cast<int>(std::min<std::size_t>(buf.size(), INT_MAX)));
    if (r > 0) return static_cast<std::size_t>(r);
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_ZERO_RETURN:
        return std::size_t{0}; // close_notify
    case SSL_ERROR_WANT_READ:
        if (!peer_eof) return std::nullopt;
        error_text = "tls: the peer closed the connection without close_notify";
        return std::unexpected(mark_broken(make_error_code(errc::truncated)));
    case SSL_ERROR_WANT_WRITE:
        read_wants_write = true;
        return std::nullopt;
    default:
        take_ssl_errors("tls: recv");
        return std::unexpected(mark_broken(make_error_code(errc::protocol_error)));
    }
}

galay::detail::CachedTask<Result<void>> handshake_slow(galay::detail::FrameCache&, Core& c,
                                                       std::int64_t deadline_ns) {
    if (c.broken) co_return std::unexpected(c.broken);
    for (;;) {
        ERR_clear_error();
        const int r = SSL_do_handshake(c.ssl);
        const int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(c.ssl, r);
        if (r == 1 || e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            if (BIO_ctrl_pending(c.net) > 0) {
                Result<void> f = co_await flush_slow(c.write_flush_frames, c, deadline_ns);
                if (!f) co_return std::unexpected(f.error());
            }
            if (r == 1) {
                c.handshaken = true;
                ktls_hand_off(c);
                co_return Result<void>{};
            }
            if (e == SSL_ERROR_WANT_WRITE) continue;
            if (!c.peer_eof) {
                Result<std::size_t> n = co_await fill_slow(c.read_frames, c, deadline_ns);
                if (!n) co_return std::unexpected(n.error());
                if (*n > 0) continue;
            }
            c.error_text = "tls: the peer closed the connection during the handshake";
            co_return std::unexpected(c.mark_broken(make_error_code(errc::handshake_failed)));
        }
        std::error_code code = make_error_code(errc::handshake_failed);
        const long verify = SSL_get_verify_result(c.ssl);
        if (!c.server && verify != X509_V_OK) {
            code = make_error_code(errc::certificate_verify_failed);
            drain_ssl_errors();
            c.error_text = std::string("tls: certificate verify failed: ") +
                           X509_verify_cert_error_string(verify);
        } else {
            c.take_ssl_errors("tls: handshake");
        }
        c.mark_broken(code);
        // The alert OpenSSL queued tells the peer why (best effort, within the same deadline).
        if (BIO_ctrl_pending(c.net) > 0)
            (void)co_await flush_slow(c.write_flush_frames, c, deadline_ns);
        co_return std::unexpected(code);
    }
}

galay::detail::CachedTask<Result<std::size_t>>
recv_slow(galay::detail::FrameCache&, Core& c, std::span<char> buf, std::int64_t deadline_ns) {
    if (c.ktls_rx || ktls_retry(c))
        co_return co_await ktls_recv_slow(c.read_fill_frames, c, buf, deadline_ns);
    for (;;) {
        // What reading produced (a KeyUpdate answer, an alert) goes out with the next writer's
        // flush, or here when no writer is busy.
        if (BIO_ctrl_pending(c.net) > 0 && (c.read_wants_write || !c.write_lock.is_locked())) {
            c.read_wants_write = false;
            Result<void> f = co_await flush_slow(c.read_flush_frames, c, deadline_ns);
            if (!f) co_return std::unexpected(f.error());
            if (auto r = c.try_recv(buf)) co_return std::move(*r);
        }
        Result<std::size_t> n = co_await fill_slow(c.read_fill_frames, c, deadline_ns);
        if (!n) co_return std::unexpected(n.error());
        if (auto r = c.try_recv(buf)) co_return std::move(*r);
    }
}

namespace {

/// Encrypt the next record's plaintext from `iov` (starting at piece `i`, offset `off`) into the
/// BIO pair: straight from the caller's memory when the piece is big enough, else gathered with
/// the pieces after it. Returns the bytes taken, or -1 on an OpenSSL failure.
long encrypt_record(Core& c, std::span<const iovec> iov, std::size_t& i, std::size_t& off) {
    const char* src = static_cast<const char*>(iov[i].iov_base) + off;
    std::size_t len = iov[i].iov_len - off;
    if (len < kRecordPlain && i + 1 < iov.size()) {
        len = 0;
        for (std::size_t j = i, o = off; j < iov.size() && len < kRecordPlain; ++j, o = 0) {
            const std::size_t k = std::min(iov[j].iov_len - o, kRecordPlain - len);
            std::memcpy(c.scratch.get() + len, static_cast<const char*>(iov[j].iov_base) + o, k);
            len += k;
        }
        src = c.scratch.get();
    }
    len = std::min(len, kRecordPlain);
    const int w = SSL_write(c.ssl, src, static_cast<int>(len));
    if (w <= 0) return -1;
    for (std::size_t left = static_cast<std::size_t>(w); left > 0;) { // advance (i, off)
        const std::size_t k = std::min(left, iov[i].iov_len - off);
        off += k;
        left -= k;
        if (off == iov[i].iov_len) {
            ++i;
            off = 0;
        }
    }
    return w;
}

} // namespace

galay::detail::CachedTask<Result<std::size_t>> write_slow(galay::detail::FrameCache&, Core& c,
                                                          std::span<const iovec> iov, bool all,
                                                          std::int64_t deadline_ns) {
    if (c.broken) co_return std::unexpected(c.broken);
    if (!c.handshaken) co_return std::unexpected(make_error_code(errc::not_connected));
    if (c.ktls_tx)
        co_return co_await ktls_write_slow(c.write_flush_frames, c, iov, all, deadline_ns);
    std::size_t total = 0;
    for (const iovec& v : iov)
        total += v.iov_len;
    std::size_t taken = 0, i = 0, off = 0;
    while (i < iov.size() && iov[i].iov_len == 0)
        ++i;
    for (;;) {
        if (out_room(c) < kRecordRoom || taken > 0) {
            Result<void> f = co_await flush_slow(c.write_flush_frames, c, deadline_ns);
            if (!f && taken == 0) co_return std::unexpected(f.error()); // nothing taken: as before
            if (!f) {
                c.error_text = "tls: a send failed after " + std::to_string(taken) +
                               " bytes were encrypted (" + f.error().message() + ")";
                c.mark_broken(make_error_code(errc::broken));
                co_return std::unexpected(f.error());
            }
            if (taken == total || (!all && taken > 0)) co_return taken;
        }
        ERR_clear_error();
        while (taken < total && out_room(c) >= kRecordRoom) {
            const long w = encrypt_record(c, iov, i, off);
            if (w < 0) {
                c.take_ssl_errors("tls: send");
                co_return std::unexpected(c.mark_broken(make_error_code(errc::protocol_error)));
            }
            taken += static_cast<std::size_t>(w);
        }
        if (taken == 0) co_return std::size_t{0}; // (an empty send)
    }
}

galay::detail::CachedTask<Result<void>> shutdown_slow(galay::detail::FrameCache&, Core& c,
                                                      Shutdown how, std::int64_t deadline_ns) {
    if (c.broken) co_return std::unexpected(c.broken);
    if (!c.handshaken) co_return std::unexpected(make_error_code(errc::not_connected));
    if (c.ktls_tx) co_return co_await ktls_shutdown_slow(c.write_flush_frames, c, how, deadline_ns);
    if ((SSL_get_shutdown(c.ssl) & SSL_SENT_SHUTDOWN) == 0) {
        ERR_clear_error();
        if (SSL_shutdown(c.ssl) < 0) {
            const int e = SSL_get_error(c.ssl, -1);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                c.take_ssl_errors("tls: shutdown");
                co_return std::unexpected(make_error_code(errc::protocol_error));
            }
        }
    }
    Result<void> f = co_await flush_slow(c.write_flush_frames, c, deadline_ns);
    if (!f) co_return std::unexpected(f.error());
    if (how != Shutdown::read) {
        Result<void> s = shutdown_tcp(c, how);
        if (!s) co_return std::unexpected(s.error());
    }
    co_return Result<void>{};
}

Result<void> shutdown_tcp(Core& c, Shutdown how) noexcept {
    if (c.tcp_shut == Shutdown::both || c.tcp_shut == how) return {};
    Result<void> s = c.tcp.shutdown(how);
    if (s) c.tcp_shut = how;
    return s;
}

} // namespace detail

Stream Stream::server(const Context& ctx, TcpStream tcp) {
    if (!ctx.is_server())
        throw Error(std::make_error_code(std::errc::invalid_argument),
                    "tls::Stream::server needs a server context");
    auto core = std::make_unique<detail::Core>(ctx.state(), std::move(tcp), true);
    SSL_set_accept_state(core->ssl);
    return Stream(std::move(core));
}

Stream Stream::client(const Context& ctx, TcpStream tcp, std::string_view host_view) {
    if (ctx.is_server())
        throw Error(std::make_error_code(std::errc::invalid_argument),
                    "tls::Stream::client needs a client context");
    const std::string host(host_view);
    Result<SocketAddr> peer = tcp.peer_addr();
    auto core = std::make_unique<detail::Core>(ctx.state(), std::move(tcp), false);
    SSL* ssl = core->ssl;
    SSL_set_connect_state(ssl);
    const bool ip = detail::is_ip_address(host);
    if (!host.empty() && !ip) SSL_set_tlsext_host_name(ssl, host.c_str()); // SNI: names only
    if (core->ctx->verify && !host.empty()) {
        const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str())
                          : SSL_set1_host(ssl, host.c_str());
        if (ok != 1)
            throw Error(std::make_error_code(std::errc::invalid_argument),
                        "tls::Stream::client: bad host name '" + host + "'");
    }
    if (core->ctx->session_cache) {
        core->session_key = host + ":" + (peer ? std::to_string(peer->port()) : std::string("?"));
        if (SSL_SESSION* s = core->ctx->find_session(core->session_key)) {
            SSL_set_session(ssl, s);
            SSL_SESSION_free(s);
        }
    }
    return Stream(std::move(core));
}

galay::detail::CloseAwaitable Stream::close() noexcept {
    if (core_) return core_->tcp.close();
    return TcpStream().close(); // (no socket: done at once)
}

std::string_view Stream::alpn() const noexcept {
    if (!core_) return {};
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(core_->ssl, &p, &len);
    return {reinterpret_cast<const char*>(p), len};
}

std::string_view Stream::version() const noexcept {
    return core_ ? SSL_get_version(core_->ssl) : "";
}

std::string_view Stream::cipher() const noexcept {
    return core_ ? SSL_get_cipher_name(core_->ssl) : "";
}

std::string Stream::peer_subject() const {
    if (!core_) return {};
    X509* cert = SSL_get0_peer_certificate(core_->ssl);
    if (cert == nullptr) return {};
    BIO* mem = BIO_new(BIO_s_mem());
    if (mem == nullptr) return {};
    X509_NAME_print_ex(mem, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
    char* data = nullptr;
    const long n = BIO_get_mem_data(mem, &data);
    std::string out(data, static_cast<std::size_t>(std::max(n, 0L)));
    BIO_free(mem);
    return out;
}

bool Stream::session_reused() const noexcept {
    return core_ && SSL_session_reused(core_->ssl) == 1;
}

long Stream::verify_result() const noexcept {
    return core_ ? SSL_get_verify_result(core_->ssl) : X509_V_OK;
}

} // namespace galay::tls
