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
// `CopyStats::spliced` says which path ran; `CopyOptions::splice = false` forces the copy, as a
// build without splice(2) always does (the POSIX profile, macOS, FreeBSD).
#pragma once

#include "galay/detail/copy_pump.hpp"
#include "galay/detail/platform.hpp"
#include "galay/io/stream.hpp"
#include "galay/scheduler.hpp"
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
        if (options.splice && GALAY_HAVE_SPLICE) {
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
        if (options.splice && GALAY_HAVE_SPLICE) {
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
