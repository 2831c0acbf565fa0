// galay/io/copy.hpp: copy_bidirectional, the body of every TCP proxy.
//
//     galay::Task<void> proxy(galay::TcpStream client, galay::SocketAddr upstream) {
//         auto server = co_await galay::TcpStream::connect(upstream).timeout(5s);
//         if (!server) co_return;
//         auto r = co_await galay::io::copy_bidirectional(client, *server, {.idle_timeout = 60s});
//         // r: Result<CopyStats> {a_to_b, b_to_a}, or the first error (timed_out when idle)
//     }
//
// Bytes flow both ways at once until each side has closed its sending direction. Half-close is
// passed on: when `a` finishes sending (EOF), `b` gets a write shutdown and still sends to `a`
// until it finishes too. The copy ends with an error when either direction fails (reset, ...)
// (the other direction is cancelled and finished first), and with `std::errc::timed_out` when no
// byte moved in either direction for `idle_timeout`. A direction that is quiet while the other
// is busy is not idle. The streams are left open: closing them is the caller's.
//
// Between two TcpStreams the bytes go socket -> pipe -> socket with splice(2) and never enter
// user space; the pipe is taken from a per-thread pool only while bytes move (an idle relay
// holds none) and holds at most one pipe's worth per direction. Any other stream (a TLS stream,
// a BufReader, a wrapper of your own) is copied through a buffer of `buffer_size` bytes.
// `CopyStats::spliced` says which path ran; `CopyOptions::splice = false` forces the copy.
#pragma once

#include "galay/io/stream.hpp"
#include "galay/runtime.hpp"
#include "galay/task.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

namespace galay::io {

/// How `copy_bidirectional` runs.
struct CopyOptions {
    /// End the copy with `timed_out` after this long without a byte moving either way (0: never).
    std::chrono::nanoseconds idle_timeout{0};
    /// Bytes in flight per direction (one receive, then its send) when copying.
    std::size_t buffer_size = 16 * 1024;
    /// Splice between streams that allow it (TcpStream); false copies through the buffer,
    /// which costs less CPU when every read is smaller than the buffer (the copy's receive is
    /// its wait; a splice first waits with a one-byte peek) but holds the buffer while idle.
    bool splice = true;
};

/// What `copy_bidirectional` moved, in bytes, each way. (The flag comes first so that the struct
/// has no tail padding: libc++ 16 and 17 keep `std::expected`'s has-value flag in its value's tail
/// padding, where copying a trivially copyable value overwrites it.)
struct CopyStats {
    bool spliced = false;     ///< moved through a pipe with splice(2), not through user space
    std::uint64_t a_to_b = 0; ///< bytes received from `a` and sent to `b`
    std::uint64_t b_to_a = 0; ///< bytes received from `b` and sent to `a`
};

/// Streams whose descriptor the kernel can splice to and from a pipe: a plain TcpStream (a
/// stream with bytes of its own in user space, such as TLS or a BufReader, is not one).
template <class S>
concept SpliceableStream = std::same_as<S, TcpStream>;

namespace detail {

struct CopyState {
    std::int64_t idle_ns = 0;
    std::int64_t last_activity_ns = 0;
    std::error_code error;
    CancelSource stop; // cancels both directions

    std::int64_t idle_deadline() const noexcept {
        return idle_ns == 0 ? 0 : last_activity_ns + idle_ns;
    }
    /// A timed-out wait ends the copy only if nothing moved in the other direction meanwhile.
    bool really_idle() const noexcept {
        return idle_ns == 0 || Scheduler::now_ns() >= last_activity_ns + idle_ns;
    }
    void fail(std::error_code e) noexcept {
        if (!error) error = e;
        stop.cancel();
    }
};

/// A pipe of the current thread's pool: taken while bytes move, given back empty.
struct RelayPipe {
    int read = -1;
    int write = -1;
    std::uint32_t capacity = 0;
};
/// A pipe from this thread's pool (a new one when it is empty).
Result<RelayPipe> take_relay_pipe() noexcept;
/// Back to the pool; a pipe that still holds bytes (a failed or cancelled relay) is closed.
void give_relay_pipe(RelayPipe p, bool empty) noexcept;
/// Pipes waiting in this thread's pool.
std::size_t relay_pipes_pooled() noexcept;

/// splice_in (socket -> pipe) or splice_out (pipe -> socket) of up to `len` bytes.
class [[nodiscard]] SpliceAwaitable : public galay::detail::IoAwaitable<SpliceAwaitable> {
public:
    SpliceAwaitable(galay::detail::OpCode code, int socket, int pipe_end,
                    std::uint32_t len) noexcept {
        op_.code = code;
        op_.fd = socket;
        op_.aux = static_cast<std::uint64_t>(pipe_end);
        op_.len = len;
    }
    Result<std::size_t> result() { return galay::detail::size_result(op_.result); }
};

/// Moves what is in the pipe to `dst`. False when the copy must end (st says why).
inline Task<bool> drain_pipe(TcpStream& dst, const RelayPipe& pipe, std::size_t& held,
                             CopyState& st, std::uint64_t& moved) {
    while (held > 0) {
        Result<std::size_t> out =
            co_await with_deadline(SpliceAwaitable(galay::detail::OpCode::splice_out, dst.fd(),
                                                   pipe.read, static_cast<std::uint32_t>(held)),
                                   st.idle_deadline());
        if (!out) {
            if (out.error() == std::errc::timed_out && !st.really_idle()) continue;
            st.fail(out.error());
            co_return false;
        }
        held -= *out;
        moved += *out;
        st.last_activity_ns = Scheduler::now_ns();
    }
    co_return true;
}

/// One direction between two TcpStreams through a pooled pipe. A pipe is taken only once `src`
/// has bytes (a one-byte MSG_PEEK waits for them) and kept while each splice fills it (more is
/// likely waiting); a splice that leaves it part-empty has drained the socket, and the pipe goes
/// back, so a quiet direction holds none.
inline Task<void> splice_pump(TcpStream& src, TcpStream& dst, CopyState& st, std::uint64_t& moved) {
    for (;;) {
        char probe;
        Result<std::size_t> ready =
            co_await with_deadline(src.recv(std::span(&probe, 1), MSG_PEEK), st.idle_deadline());
        if (!ready) {
            if (ready.error() == std::errc::timed_out && !st.really_idle()) continue;
            st.fail(ready.error());
            co_return;
        }
        if (*ready == 0) { // `src` finished sending: pass the half-close on
            (void)dst.shutdown(Shutdown::write);
            co_return;
        }
        auto pipe = take_relay_pipe();
        if (!pipe) {
            st.fail(pipe.error());
            co_return;
        }
        std::size_t held = 0; // bytes in the pipe
        // Given back on every path: the error and cancellation ones too (then closed if not empty).
        struct Giver {
            RelayPipe p;
            std::size_t& held;
            ~Giver() { give_relay_pipe(p, held == 0); }
        } giver{*pipe, held};
        for (;;) {
            Result<std::size_t> in =
                co_await with_deadline(SpliceAwaitable(galay::detail::OpCode::splice_in, src.fd(),
                                                       pipe->write, pipe->capacity),
                                       st.idle_deadline());
            if (!in) {
                if (in.error() == std::errc::timed_out && !st.really_idle()) continue;
                st.fail(in.error());
                co_return;
            }
            if (*in == 0) { // EOF
                (void)dst.shutdown(Shutdown::write);
                co_return;
            }
            held = *in;
            st.last_activity_ns = Scheduler::now_ns();
            const bool drained = co_await drain_pipe(dst, *pipe, held, st, moved);
            if (!drained) co_return;
            if (*in < pipe->capacity) break; // the socket is drained: give the pipe back
        }
    }
}

template <class Src, class Dst>
Task<void> pump(Src& src, Dst& dst, std::span<char> buf, CopyState& st, std::uint64_t& moved) {
    for (;;) {
        Result<std::size_t> n = co_await with_deadline(src.recv(buf), st.idle_deadline());
        if (!n) {
            if (n.error() == std::errc::timed_out && !st.really_idle()) continue;
            st.fail(n.error());
            co_return;
        }
        if (*n == 0) { // `src` finished sending: pass the half-close on
            if constexpr (SyncWriteShutdown<Dst>)
                (void)dst.shutdown(Shutdown::write);
            else
                (void)co_await with_deadline(dst.shutdown(Shutdown::write), st.idle_deadline());
            co_return;
        }
        st.last_activity_ns = Scheduler::now_ns();
        for (std::size_t off = 0; off < *n;) {
            Result<std::size_t> w =
                co_await with_deadline(dst.send(buf.subspan(off, *n - off)), st.idle_deadline());
            if (!w) {
                if (w.error() == std::errc::timed_out && !st.really_idle()) continue;
                st.fail(w.error());
                co_return;
            }
            off += *w;
            moved += *w;
            st.last_activity_ns = Scheduler::now_ns();
        }
    }
}

} // namespace detail

/// Copy `a` -> `b` and `b` -> `a` at once until both directions have ended (see above).
template <DuplexStream A, DuplexStream B>
Task<Result<CopyStats>> copy_bidirectional(A& a, B& b, CopyOptions options = {}) {
    const std::size_t size = options.buffer_size == 0 ? 1 : options.buffer_size;
    detail::CopyState st;
    st.idle_ns = options.idle_timeout.count();
    st.last_activity_ns = Scheduler::now_ns();
    // Both directions answer `st.stop` (one direction's failure cancels the other without
    // touching the caller) and, through with_cancel, the caller's cancellation too.
    CopyStats stats;
    if constexpr (SpliceableStream<A> && SpliceableStream<B>) {
        if (options.splice) {
            stats.spliced = true;
            co_await when_all(with_cancel(st.stop, detail::splice_pump(a, b, st, stats.a_to_b)),
                              with_cancel(st.stop, detail::splice_pump(b, a, st, stats.b_to_a)));
            if (st.error) co_return std::unexpected(st.error);
            co_return stats;
        }
    }
    auto buffers = std::make_unique_for_overwrite<char[]>(2 * size);
    co_await when_all(
        with_cancel(st.stop, detail::pump(a, b, std::span(buffers.get(), size), st, stats.a_to_b)),
        with_cancel(st.stop,
                    detail::pump(b, a, std::span(buffers.get() + size, size), st, stats.b_to_a)));
    if (st.error) co_return std::unexpected(st.error);
    co_return stats;
}

/// Copy `src` -> `dst` until `src` ends (then `dst` gets a write shutdown); spliced between
/// TcpStreams like copy_bidirectional. Returns the bytes moved, or the first error.
template <ReadStream Src, DuplexStream Dst>
Task<Result<std::uint64_t>> copy(Src& src, Dst& dst, CopyOptions options = {}) {
    detail::CopyState st;
    st.idle_ns = options.idle_timeout.count();
    st.last_activity_ns = Scheduler::now_ns();
    std::uint64_t moved = 0;
    if constexpr (SpliceableStream<Src> && SpliceableStream<Dst>) {
        if (options.splice) {
            co_await with_cancel(st.stop, detail::splice_pump(src, dst, st, moved));
            if (st.error) co_return std::unexpected(st.error);
            co_return moved;
        }
    }
    const std::size_t size = options.buffer_size == 0 ? 1 : options.buffer_size;
    auto buffer = std::make_unique_for_overwrite<char[]>(size);
    co_await with_cancel(st.stop, detail::pump(src, dst, std::span(buffer.get(), size), st, moved));
    if (st.error) co_return std::unexpected(st.error);
    co_return moved;
}

} // namespace galay::io
