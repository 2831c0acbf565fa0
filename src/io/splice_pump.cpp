// io::copy between two TcpStreams: each direction splices socket -> pipe -> socket through a
// pipe of this thread's pool (relay_pipes.hpp), so the bytes never enter user space.
#include "galay/detail/copy_pump.hpp"
#include "galay/detail/io_awaitable.hpp"
#include "io/relay_pipes.hpp"

#include <sys/socket.h>

namespace galay::io::detail {
namespace {

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
Task<bool> drain_pipe(TcpStream& dst, const RelayPipe& pipe, std::size_t& held, CopyState& st,
                      std::uint64_t& moved) {
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

} // namespace

/// A pipe is taken only once `src` has bytes (a one-byte MSG_PEEK waits for them) and kept while
/// each splice fills it (more is likely waiting); a splice that leaves it part-empty has drained
/// the socket, and the pipe goes back, so a quiet direction holds none.
Task<void> splice_pump(TcpStream& src, TcpStream& dst, CopyState& st, std::uint64_t& moved) {
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

} // namespace galay::io::detail
