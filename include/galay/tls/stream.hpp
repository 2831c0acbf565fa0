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

#include "galay/detail/cached_task.hpp"
#include "galay/io/stream.hpp"
#include "galay/sync/mutex.hpp"
#include "galay/tls/context.hpp"
#include "galay/tls/error.hpp"

#include <sys/uio.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

struct ssl_st;
struct bio_st;

namespace galay::tls {

namespace detail {

struct KtlsTrack;

/// Everything a Stream owns, at a fixed address (operations in flight point to it).
struct Core {
    Core(std::shared_ptr<ContextState> ctx, TcpStream tcp, bool server);
    ~Core();
    Core(const Core&) = delete;
    Core& operator=(const Core&) = delete;

    /// recv from what OpenSSL already has, without waiting: nullopt when it needs more bytes.
    std::optional<Result<std::size_t>> try_recv(std::span<char> buf);
    /// Fail every later operation with `e` (the first reason is kept).
    std::error_code mark_broken(std::error_code e) noexcept {
        if (!broken) broken = e;
        return e;
    }
    /// Keep OpenSSL's queued errors as the reason text (prefix: what was being done).
    void take_ssl_errors(std::string_view what);

    std::shared_ptr<ContextState> ctx;
    TcpStream tcp;
    ssl_st* ssl = nullptr;
    bio_st* net = nullptr; // galay's end of the BIO pair (OpenSSL holds the other)
    Mutex write_lock;      // one writer of ciphertext to the socket at a time
    // Frames of the slow paths: the read side's and the write side's, and those of the socket
    // operations they nest (kept apart: a recv and a send may be in flight at once).
    galay::detail::FrameCache read_frames, read_fill_frames, read_flush_frames;
    galay::detail::FrameCache write_frames, write_flush_frames;
    std::unique_ptr<char[]> scratch; // small gathered writes become one record
    std::error_code broken;
    std::string error_text;
    std::string session_key; // client: where its session cache entry lives
    bool server;
    bool handshaken = false;
    bool peer_eof = false; // the socket ended (without close_notify, or after it)
    bool read_wants_write = false;
    // kTLS: what the hand-off needs from the handshake (null when the context turns kTLS off),
    // which directions the kernel took, and why not when it did not.
    std::unique_ptr<KtlsTrack> ktls_track;
    bool ktls_tx = false, ktls_rx = false;
    bool ktls_close_sent = false;
    std::string ktls_why;
};

galay::detail::CachedTask<Result<void>> handshake_slow(galay::detail::FrameCache&, Core& c,
                                                       std::int64_t deadline_ns);
galay::detail::CachedTask<Result<std::size_t>>
recv_slow(galay::detail::FrameCache&, Core& c, std::span<char> buf, std::int64_t deadline_ns);
galay::detail::CachedTask<Result<std::size_t>> write_slow(galay::detail::FrameCache&, Core& c,
                                                          std::span<const iovec> iov, bool all,
                                                          std::int64_t deadline_ns);
galay::detail::CachedTask<Result<void>> shutdown_slow(galay::detail::FrameCache&, Core& c,
                                                      Shutdown how, std::int64_t deadline_ns);

} // namespace detail

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
    class [[nodiscard]] Handshake : public io::detail::Deadlined<Handshake> {
    public:
        /// The handshake of the stream behind `c`.
        explicit Handshake(detail::Core* c) noexcept
            : c_(c) {}
        /// Awaiter protocol: ready when the handshake is already done.
        bool await_ready() const noexcept { return c_ == nullptr || c_->handshaken; }
        /// Awaiter protocol: runs the handshake's coroutine.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_ = detail::handshake_slow(c_->write_frames, *c_, this->deadline_ns_);
            return slow_.start(h);
        }
        /// Awaiter protocol: done, or why not.
        Result<void> await_resume() {
            if (c_ == nullptr) return std::unexpected(make_error_code(errc::not_connected));
            if (!slow_.valid()) return {};
            return slow_.take();
        }

    private:
        detail::Core* c_;
        galay::detail::CachedTask<Result<void>> slow_;
    };

    /// A receive of plaintext -> Result<size_t> (made by recv()).
    class [[nodiscard]] Recv : public io::detail::Deadlined<Recv> {
    public:
        /// Up to buf.size() bytes from the stream behind `c`.
        Recv(detail::Core* c, std::span<char> buf) noexcept
            : c_(c)
            , buf_(buf) {}
        /// Awaiter protocol: ready when OpenSSL already has plaintext (or the stream failed).
        bool await_ready() {
            if (c_ == nullptr)
                ready_.emplace(std::unexpected(make_error_code(errc::not_connected)));
            else
                ready_ = c_->try_recv(buf_);
            return ready_.has_value();
        }
        /// Awaiter protocol: waits for records from the socket.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_ = detail::recv_slow(c_->read_frames, *c_, buf_, this->deadline_ns_);
            return slow_.start(h);
        }
        /// Awaiter protocol: the bytes received (0: close_notify), or the error.
        Result<std::size_t> await_resume() {
            if (ready_) return std::move(*ready_);
            return slow_.take();
        }

    private:
        detail::Core* c_;
        std::span<char> buf_;
        std::optional<Result<std::size_t>> ready_;
        galay::detail::CachedTask<Result<std::size_t>> slow_;
    };

    /// A send -> Result<size_t> (made by send(), send_all() and writev()).
    class [[nodiscard]] Write : public io::detail::Deadlined<Write> {
    public:
        /// The bytes of `iov` (all of them when `all`) to the stream behind `c`.
        Write(detail::Core* c, std::span<const iovec> iov, bool all) noexcept
            : c_(c)
            , iov_(iov)
            , all_(all) {}
        /// The bytes of `buf` (all of them when `all`) to the stream behind `c`.
        Write(detail::Core* c, std::span<const char> buf, bool all) noexcept
            : c_(c)
            , one_{const_cast<char*>(buf.data()), buf.size()}
            , all_(all) {}
        /// Awaiter protocol: ready only without a stream (the error).
        bool await_ready() const noexcept { return c_ == nullptr; }
        /// Awaiter protocol: encrypts and sends in the send's coroutine.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            const std::span<const iovec> iov = iov_.data() != nullptr ? iov_ : std::span(&one_, 1);
            slow_ = detail::write_slow(c_->write_frames, *c_, iov, all_, this->deadline_ns_);
            return slow_.start(h);
        }
        /// Awaiter protocol: the bytes taken, or the error.
        Result<std::size_t> await_resume() {
            if (c_ == nullptr) return std::unexpected(make_error_code(errc::not_connected));
            return slow_.take();
        }

    private:
        detail::Core* c_;
        std::span<const iovec> iov_{};
        iovec one_{};
        bool all_;
        galay::detail::CachedTask<Result<std::size_t>> slow_;
    };

    /// close_notify and a TCP shutdown -> Result<void> (made by shutdown()).
    class [[nodiscard]] ShutdownOp : public io::detail::Deadlined<ShutdownOp> {
    public:
        /// Shut the stream behind `c` (`how`: what the TCP shutdown after close_notify stops).
        ShutdownOp(detail::Core* c, Shutdown how) noexcept
            : c_(c)
            , how_(how) {}
        /// Awaiter protocol: ready only without a stream (the error).
        bool await_ready() const noexcept { return c_ == nullptr; }
        /// Awaiter protocol: sends close_notify in the shutdown's coroutine.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_ = detail::shutdown_slow(c_->write_frames, *c_, how_, this->deadline_ns_);
            return slow_.start(h);
        }
        /// Awaiter protocol: done, or why not.
        Result<void> await_resume() {
            if (c_ == nullptr) return std::unexpected(make_error_code(errc::not_connected));
            return slow_.take();
        }

    private:
        detail::Core* c_;
        Shutdown how_;
        galay::detail::CachedTask<Result<void>> slow_;
    };

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
