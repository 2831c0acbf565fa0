// The two directions of io::copy_bidirectional and io::copy (galay/io/copy.hpp): the state they
// share, and the pump that copies one direction through a buffer. The pump that splices between
// two TcpStreams through a pooled pipe is the library's (src/io/splice_pump.cpp).
#pragma once

#include "galay/io/stream.hpp"
#include "galay/net/tcp.hpp"
#include "galay/scheduler.hpp"
#include "galay/task.hpp"

#include <cstdint>
#include <span>
#include <system_error>

namespace galay::io::detail {

/// What the two directions of one copy share: the idle deadline, the first error, and the
/// source that stops both.
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

/// One direction between two TcpStreams: socket -> pipe -> socket with splice(2), through a pipe
/// of this thread's pool that is held only while bytes move.
Task<void> splice_pump(TcpStream& src, TcpStream& dst, CopyState& st, std::uint64_t& moved);

/// One direction through `buf`: receive, then send all of it, until `src` ends (then `dst` gets a
/// write shutdown) or the copy fails.
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

} // namespace galay::io::detail
