// galay/tls/stream.hpp: a TLS connection over a TcpStream.
//
//     galay::Task<void> serve(const galay::tls::Context& ctx, galay::TcpStream conn) {
//         galay::tls::Stream tls = galay::tls::Stream::server(ctx, std::move(conn));
//         auto hs = co_await tls.handshake().timeout(10s);
//         if (!hs) co_return; // reason: tls.last_error()
//         std::array<char, 4096> buf;
//         for (;;) {
//             auto n = co_await tls.recv(buf).timeout(30s);
//             if (!n || *n == 0) break; // error, timeout, or close_notify
//             auto sent = co_await tls.send_all(std::span(buf.data(), *n)).timeout(30s);
//             if (!sent) break;
//         }
//         (void)co_await tls.shutdown().timeout(1s); // close_notify
//     }
//
// OpenSSL never touches the socket: it reads and writes a pair of memory BIOs, and every byte on
// the wire moves through the TcpStream's own recv and send_all, on either backend. So every
// operation takes `.timeout(d)` / `.deadline(t)` (one deadline for the whole operation, however
// many socket operations it takes) and is cancelled with the task that awaits it (when_any,
// JoinHandle::abort, a TaskGroup).
//
// What a failed operation leaves behind:
// - recv, handshake: nothing is lost; a timed-out or cancelled one can simply be called again.
// - send, send_all, writev: one that fails before any of its bytes were encrypted leaves the
//   stream as it was. One that fails after (the ciphertext could not all be sent in time) marks
//   the stream broken: every later operation fails with `tls::errc::broken`, since part of a
//   record may be on the wire.
//
// The end of the stream: recv returns 0 only after the peer's close_notify. A connection that
// ends without it is `tls::errc::truncated`, which a careful protocol treats as an attack.
// Renegotiation is refused. One recv and one send may run at once (copy_bidirectional does);
// two of a kind may not.
//
// After the handshake no operation allocates on galay's side: the slow paths run in frames the
// stream keeps, and the ciphertext goes from the socket to OpenSSL and back without a copy.
#pragma once

#include "galay/detail/tls_core.hpp"
#include "galay/io/stream.hpp"
#include "galay/tls/context.hpp"
#include "galay/tls/error.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace galay::tls {

/// A TLS connection over a TcpStream (see the top of this header). Move-only; destroying it
/// closes the socket (without close_notify: shutdown() first for a clean end).
class Stream {
public:
    /// The server side of a connection accepted on `tcp`.
    static Stream server(const Context& ctx, TcpStream tcp);
    /// The client side of a connection to `host` (a DNS name or an IP address): sent as SNI for
    /// a name, and what the certificate is verified against unless the context says otherwise.
    static Stream client(const Context& ctx, TcpStream tcp, std::string_view host);

    /// No connection (every operation fails with `errc::not_connected`).
    Stream() noexcept = default;
    /// Only while no operation is in flight (operations point to what the stream owns, which
    /// moves with it).
    Stream(Stream&&) noexcept = default;
    /// As the move constructor.
    Stream& operator=(Stream&&) noexcept = default;

    /// The handshake -> Result<void> (made by handshake()).
    using Handshake = detail::HandshakeOp;
    /// A receive of plaintext -> Result<size_t> (made by recv()).
    using Recv = detail::RecvOp;
    /// A send -> Result<size_t> (made by send(), send_all() and writev()).
    using Write = detail::WriteOp;
    /// close_notify and a TCP shutdown -> Result<void> (made by shutdown()).
    using ShutdownOp = detail::ShutdownOp;

    /// Run the handshake (as server or client, per the context) -> Result<void>. Idempotent.
    Handshake handshake() noexcept { return Handshake(core_.get()); }
    /// Receive up to buf.size() bytes of plaintext -> Result<size_t>; 0: the peer's close_notify.
    Recv recv(std::span<char> buf) noexcept { return Recv(core_.get(), buf); }
    /// Encrypt and send some of `buf` -> Result<size_t> (how much was taken; at least one
    /// record's worth when buf is that long).
    Write send(std::span<const char> buf) noexcept { return Write(core_.get(), buf, false); }
    /// Encrypt and send all of `buf` -> Result<size_t> (= buf.size()).
    Write send_all(std::span<const char> buf) noexcept { return Write(core_.get(), buf, true); }
    /// Gathered send: small pieces are coalesced into one record -> Result<size_t>.
    Write writev(std::span<const iovec> iov) noexcept { return Write(core_.get(), iov, false); }
    /// Send close_notify (and, after it, shut the TCP stream's write side, or both with
    /// Shutdown::both) -> Result<void>. Reading stays possible after Shutdown::write.
    ShutdownOp shutdown(Shutdown how = Shutdown::write) noexcept {
        return ShutdownOp(core_.get(), how);
    }
    /// Close the socket (no close_notify: shutdown() first for a clean end).
    [[nodiscard]] galay::detail::CloseAwaitable close() noexcept;

    /// The socket is open.
    bool is_open() const noexcept { return core_ != nullptr && core_->tcp.is_open(); }
    /// Made by Stream::server.
    bool is_server() const noexcept { return core_ != nullptr && core_->server; }
    /// The negotiated ALPN protocol ("" when none).
    std::string_view alpn() const noexcept;
    /// "TLSv1.3", "TLSv1.2".
    std::string_view version() const noexcept;
    /// The cipher suite, e.g. "TLS_AES_128_GCM_SHA256".
    std::string_view cipher() const noexcept;
    /// The peer certificate's subject ("CN=localhost"), "" when it sent none.
    std::string peer_subject() const;
    /// Whether the handshake resumed an earlier session.
    bool session_reused() const noexcept;
    /// Whether the kernel does the record layer for this stream (kTLS) in both directions.
    bool ktls() const noexcept { return core_ != nullptr && core_->ktls_tx && core_->ktls_rx; }
    /// Why the stream does not use kTLS after its handshake ("kTLS not used: kernel has no kTLS
    /// (CONFIG_TLS) ..."), "" when it does or before the handshake.
    std::string_view ktls_status() const noexcept {
        return core_ ? std::string_view(core_->ktls_why) : std::string_view();
    }
    /// The reason of the last failure, with OpenSSL's text ("" when none).
    std::string_view last_error() const noexcept {
        return core_ ? std::string_view(core_->error_text) : std::string_view();
    }
    /// The X509 verify result of the peer's certificate (X509_V_OK = 0 when it verified).
    long verify_result() const noexcept;
    /// The TCP stream underneath (socket options; its bytes are the TLS records': do not send
    /// or receive on it).
    TcpStream& tcp() noexcept { return core_->tcp; }
    /// The OpenSSL connection, for what galay does not wrap.
    ssl_st* native() const noexcept { return core_ ? core_->ssl : nullptr; }

private:
    explicit Stream(std::unique_ptr<detail::Core> c) noexcept
        : core_(std::move(c)) {}
    std::unique_ptr<detail::Core> core_;
};

static_assert(io::ReadStream<Stream> && io::WriteStream<Stream> && io::DuplexStream<Stream>);

} // namespace galay::tls
