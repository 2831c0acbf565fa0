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
#pragma once

#include "galay/io/stream.hpp"
#include "galay/runtime.hpp"
#include "galay/task.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

namespace galay::io {

struct CopyOptions {
    /// End the copy with `timed_out` after this long without a byte moving either way (0: never).
    std::chrono::nanoseconds idle_timeout{0};
    /// Bytes in flight per direction (one receive, then its send).
    std::size_t buffer_size = 16 * 1024;
};

struct CopyStats {
    std::uint64_t a_to_b = 0; ///< bytes received from `a` and sent to `b`
    std::uint64_t b_to_a = 0;
};

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
    auto buffers = std::make_unique_for_overwrite<char[]>(2 * size);
    detail::CopyState st;
    st.idle_ns = options.idle_timeout.count();
    st.last_activity_ns = Scheduler::now_ns();
    // Both directions answer `st.stop` (one direction's failure cancels the other without
    // touching the caller) and, through with_cancel, the caller's cancellation too.
    CopyStats stats;
    co_await when_all(
        with_cancel(st.stop, detail::pump(a, b, std::span(buffers.get(), size), st, stats.a_to_b)),
        with_cancel(st.stop,
                    detail::pump(b, a, std::span(buffers.get() + size, size), st, stats.b_to_a)));
    if (st.error) co_return std::unexpected(st.error);
    co_return stats;
}

} // namespace galay::io
