// What a tls::Stream owns (Core, at a fixed address: operations in flight point to it), the
// slow paths of its operations (src/tls/stream.cpp) and the awaitables its operations return
// (galay/tls/stream.hpp names them Stream::Handshake, Recv, Write and ShutdownOp).
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
class Stream;
} // namespace galay::tls

namespace galay::tls::detail {

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
    Shutdown tcp_shut = Shutdown::read; // write or both once the TCP side was shut (read: not)
    // kTLS: what the hand-off needs from the handshake (null when the context turns kTLS off
    // or the kernel has none),
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
/// The TCP shutdown after close_notify (`how`: write or both), each direction once: shutdown(2)
/// again is a wasted system call, and fails (ENOTCONN) once the peer has closed as well.
Result<void> shutdown_tcp(Core& c, Shutdown how) noexcept;

/// The handshake -> Result<void> (made by handshake()).
class [[nodiscard]] HandshakeOp : public io::detail::Deadlined<HandshakeOp> {
public:
    /// The handshake of the stream behind `c`.
    explicit HandshakeOp(Core* c) noexcept
        : c_(c) {}
    /// Awaiter protocol: ready when the handshake is already done.
    bool await_ready() const noexcept { return c_ == nullptr || c_->handshaken; }
    /// Awaiter protocol: runs the handshake's coroutine.
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
        slow_ = handshake_slow(c_->write_frames, *c_, this->deadline_ns_);
        return slow_.start(h);
    }
    /// Awaiter protocol: done, or why not.
    Result<void> await_resume() {
        if (c_ == nullptr) return std::unexpected(make_error_code(errc::not_connected));
        if (!slow_.valid()) return {};
        return slow_.take();
    }

private:
    Core* c_;
    galay::detail::CachedTask<Result<void>> slow_;
};

/// A receive of plaintext -> Result<size_t> (made by recv()).
class [[nodiscard]] RecvOp : public io::detail::Deadlined<RecvOp> {
public:
    /// Up to buf.size() bytes from the stream behind `c`.
    RecvOp(Core* c, std::span<char> buf) noexcept
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
        slow_ = recv_slow(c_->read_frames, *c_, buf_, this->deadline_ns_);
        return slow_.start(h);
    }
    /// Awaiter protocol: the bytes received (0: close_notify), or the error.
    Result<std::size_t> await_resume() {
        if (ready_) return std::move(*ready_);
        return slow_.take();
    }

private:
    Core* c_;
    std::span<char> buf_;
    std::optional<Result<std::size_t>> ready_;
    galay::detail::CachedTask<Result<std::size_t>> slow_;
};

/// A send -> Result<size_t> (made by send(), send_all() and writev()).
class [[nodiscard]] WriteOp : public io::detail::Deadlined<WriteOp> {
public:
    /// The bytes of `iov` (all of them when `all`) to the stream behind `c`.
    WriteOp(Core* c, std::span<const iovec> iov, bool all) noexcept
        : c_(c)
        , iov_(iov)
        , all_(all) {}
    /// The bytes of `buf` (all of them when `all`) to the stream behind `c`.
    WriteOp(Core* c, std::span<const char> buf, bool all) noexcept
        : c_(c)
        , one_{const_cast<char*>(buf.data()), buf.size()}
        , all_(all) {}
    /// Awaiter protocol: ready only without a stream (the error).
    bool await_ready() const noexcept { return c_ == nullptr; }
    /// Awaiter protocol: encrypts and sends in the send's coroutine.
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
        const std::span<const iovec> iov = iov_.data() != nullptr ? iov_ : std::span(&one_, 1);
        slow_ = write_slow(c_->write_frames, *c_, iov, all_, this->deadline_ns_);
        return slow_.start(h);
    }
    /// Awaiter protocol: the bytes taken, or the error.
    Result<std::size_t> await_resume() {
        if (c_ == nullptr) return std::unexpected(make_error_code(errc::not_connected));
        return slow_.take();
    }

private:
    Core* c_;
    std::span<const iovec> iov_{};
    iovec one_{};
    bool all_;
    galay::detail::CachedTask<Result<std::size_t>> slow_;
};

/// close_notify and a TCP shutdown -> Result<void> (made by shutdown()).
class [[nodiscard]] ShutdownOp : public io::detail::Deadlined<ShutdownOp> {
public:
    /// Shut the stream behind `c` (`how`: what the TCP shutdown after close_notify stops).
    ShutdownOp(Core* c, Shutdown how) noexcept
        : c_(c)
        , how_(how) {}
    /// Awaiter protocol: ready only without a stream (the error).
    bool await_ready() const noexcept { return c_ == nullptr; }
    /// Awaiter protocol: sends close_notify in the shutdown's coroutine.
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
        slow_ = shutdown_slow(c_->write_frames, *c_, how_, this->deadline_ns_);
        return slow_.start(h);
    }
    /// Awaiter protocol: done, or why not.
    Result<void> await_resume() {
        if (c_ == nullptr) return std::unexpected(make_error_code(errc::not_connected));
        return slow_.take();
    }

private:
    Core* c_;
    Shutdown how_;
    galay::detail::CachedTask<Result<void>> slow_;
};

} // namespace galay::tls::detail
