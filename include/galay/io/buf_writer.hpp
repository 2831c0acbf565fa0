// galay/io/buf_writer.hpp: coalescing writes over any galay byte stream.
//
//     galay::io::BufWriter writer(conn, 16384);
//     co_await writer.write(header);              // copied into the buffer: no system call
//     co_await writer.write(body);                // likewise, or one writev of buffer + body
//     auto sent = co_await writer.flush().timeout(5s); // one send for all of it
//     if (!sent) co_return;
//
// Small writes are copied into the buffer and complete without suspending; `flush()` sends what
// is buffered. A write that does not fit goes out in one `writev` of the buffered bytes and the
// caller's, so a large body is never copied; what is left of it afterwards, if smaller than the
// capacity, is buffered. Formatting straight into the buffer: `spare()` + `commit(n)`.
//
// A writer that has sent everything it buffered gives its (2 KiB) block to a small per-thread
// stack of spare blocks, and takes one back when it next buffers: the writers of one thread share
// the block that is in the core's cache, and an idle connection holds no write buffer. (So a span
// from `spare()` is good until the next commit, write or flush, not longer.)
//
// Every operation takes `.timeout(d)` / `.deadline(t)` (one deadline for the whole operation) and
// is cancelled with the task that awaits it. `flush()` keeps exact accounting: when it fails or
// times out, the bytes not yet sent are still buffered and a later flush continues with them. A
// `write()` that fails part way has sent an unknown part of the caller's bytes (as
// TcpStream::send_all): the stream is then only good for closing. Destroying a writer does not
// flush it.
#pragma once

#include "galay/detail/byte_window.hpp"
#include "galay/detail/cached_task.hpp"
#include "galay/io/stream.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

namespace galay::io {

/// A stream whose `send_all` reports how much it moved even when it fails (TcpStream): a flush
/// of a BufWriter is then that one operation, with exact accounting.
template <class S>
concept ExactSendAll = requires(S& s, std::span<const char> b) {
    { s.send_all(b).transferred() } -> std::convertible_to<std::size_t>;
};
/// What a BufWriter's flush keeps in its awaitable for a stream `S` without ExactSendAll.
template <class S>
struct DirectFlushOp {
    /// Nothing: the flush runs a coroutine of its own.
    using type = std::monostate;
};
/// What a BufWriter's flush keeps in its awaitable for an ExactSendAll stream.
template <ExactSendAll S>
struct DirectFlushOp<S> {
    /// The stream's send_all operation, made in place when the flush starts.
    using type = std::optional<decltype(std::declval<S&>().send_all(std::span<const char>{}))>;
};

/// Buffered writes to a stream `S` (which must outlive the writer). One operation at a time.
template <WriteStream S>
class BufWriter {
    static constexpr bool kDirectFlush = ExactSendAll<S>;

public:
    /// The capacity when none is given.
    static constexpr std::size_t default_capacity = 8192;

    /// A writer to `stream` holding at most `capacity` bytes at once (allocated on first use,
    /// growing up to it).
    explicit BufWriter(S& stream, std::size_t capacity = default_capacity) noexcept
        : stream_(&stream)
        , buf_(capacity) {}
    /// Only while no operation is pending.
    BufWriter(BufWriter&&) noexcept = default;

    /// Bytes written and not yet sent.
    std::size_t buffered() const noexcept { return buf_.size(); }
    /// The most bytes it buffers.
    std::size_t capacity() const noexcept { return buf_.capacity(); }
    /// The stream it writes to.
    S& stream() noexcept { return *stream_; }

    /// Free space to format into; `commit(n)` makes its first `n` bytes part of the output.
    /// The buffer starts small (2 KiB) and grows up to the capacity: `spare(n)` asks for at
    /// least `n` bytes (fewer only when capacity() - buffered() is less). The span is good until
    /// the next commit, write or flush.
    std::span<char> spare(std::size_t n = 0) { return buf_.room(n); }
    /// Make the first `n` bytes of the last `spare()` part of the output.
    void commit(std::size_t n) noexcept { buf_.commit(n); }
    /// Copy `data` into the buffer if it fits (no I/O); false, with nothing copied, if not. What
    /// a reply formatter uses: append replies while they fit, `co_await flush()` when one does
    /// not (or at the end of a batch), with no suspension per reply.
    template <ConstBuffer B>
    bool try_write(const B& data) {
        return buf_.append(as_chars(data));
    }

    /// Take all of `data` (buffered or sent) -> Result<size_t> (= data.size()). `data` must stay
    /// alive AND unchanged until the operation completes: a write that does not fit in the buffer
    /// sends from the caller's memory across a suspension (no copy), so bytes changed meanwhile
    /// go out changed.
    class [[nodiscard]] Write : public detail::Deadlined<Write> {
    public:
        /// A write of `data` to `w` (made by `BufWriter::write`).
        Write(BufWriter& w, std::span<const char> data) noexcept
            : w_(w)
            , data_(data) {}
        /// Awaiter protocol, called by `co_await`: ready when `data` fits in the buffer (copied, no
        /// I/O).
        bool await_ready() { return w_.buf_.append(data_); }
        /// Awaiter protocol: sends the buffered bytes and `data` until the rest fits in the buffer.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_ = write_slow(w_.frames_, w_, data_, this->deadline_ns_);
            return slow_.start(h);
        }
        /// Awaiter protocol: `data.size()`, or the error.
        Result<std::size_t> await_resume() {
            if (!slow_.valid()) return data_.size();
            return slow_.take();
        }

    private:
        BufWriter& w_;
        std::span<const char> data_;
        galay::detail::CachedTask<Result<std::size_t>> slow_;
    };

    /// Send everything buffered -> Result<void>.
    class [[nodiscard]] Flush : public detail::Deadlined<Flush> {
    public:
        /// A flush of `w` (made by `BufWriter::flush`).
        explicit Flush(BufWriter& w) noexcept
            : w_(w) {}
        /// Awaiter protocol: ready when nothing is buffered.
        bool await_ready() const noexcept { return w_.buf_.size() == 0; }
        /// Awaiter protocol: sends everything buffered (one send_all for an ExactSendAll stream).
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            if constexpr (kDirectFlush) {
                // One send_all op in the awaiting frame: no coroutine of its own.
                direct_.emplace(galay::detail::MadeBy{
                    [&] { return w_.stream_->send_all(w_.buf_.live_bytes()); }});
                if (this->deadline_ns_ != 0)
                    (void)std::move(*direct_).deadline(detail::to_time_point(this->deadline_ns_));
                if (direct_->await_ready() || !direct_->await_suspend(h)) return h;
                return std::noop_coroutine();
            } else {
                slow_ = flush_slow(w_.frames_, w_, this->deadline_ns_);
                return slow_.start(h);
            }
        }
        /// Awaiter protocol: nothing, or the error (bytes the stream took are no longer buffered).
        Result<void> await_resume() {
            if constexpr (kDirectFlush) {
                if (direct_) {
                    Result<std::size_t> n = direct_->await_resume();
                    w_.buf_.consume(direct_->transferred()); // also after a failure: exact
                    if (!n) return std::unexpected(n.error());
                    if (w_.buf_.size() > 0) return fail(EPIPE); // the peer took no more
                    w_.buf_.give_back();
                    return {};
                }
            }
            if (!slow_.valid()) return {};
            return slow_.take();
        }

    private:
        BufWriter& w_;
        galay::detail::CachedTask<Result<void>> slow_;
        [[no_unique_address]] typename DirectFlushOp<S>::type direct_;
    };

    /// Take all of `data`, buffered or sent (see Write).
    template <ConstBuffer B>
    Write write(const B& data) noexcept {
        return Write(*this, as_chars(data));
    }
    /// Send everything buffered (see Flush).
    Flush flush() noexcept { return Flush(*this); }

private:
    template <ConstBuffer B>
    static std::span<const char> as_chars(const B& data) noexcept {
        return {reinterpret_cast<const char*>(std::ranges::data(data)), std::ranges::size(data)};
    }

    static galay::detail::CachedTask<Result<std::size_t>> write_slow(galay::detail::FrameCache&,
                                                                     BufWriter& w,
                                                                     std::span<const char> data,
                                                                     std::int64_t deadline_ns) {
        std::size_t off = 0;
        for (;;) {
            std::span<const char> pending = w.buf_.live_bytes();
            const std::size_t rest = data.size() - off;
            if (pending.empty() && rest < w.capacity()) {
                (void)w.buf_.append(data.subspan(off)); // fits: the buffer is empty
                co_return data.size();
            }
            // The buffered bytes and the caller's in one system call, without copying the
            // caller's into the buffer first.
            iovec iov[2];
            std::size_t count = 0;
            if (!pending.empty())
                iov[count++] = {const_cast<char*>(pending.data()), pending.size()};
            iov[count++] = {const_cast<char*>(data.data() + off), rest};
            Result<std::size_t> n = co_await detail::with_deadline(
                w.stream_->writev(std::span<const iovec>(iov, count)), deadline_ns);
            if (!n) co_return std::unexpected(n.error());
            if (*n == 0) co_return fail(EPIPE);
            const std::size_t from_buffer = std::min(*n, pending.size());
            w.buf_.consume(from_buffer);
            off += *n - from_buffer;
            if (off == data.size() && w.buf_.size() == 0) {
                w.buf_.give_back();
                co_return data.size();
            }
        }
    }

    static galay::detail::CachedTask<Result<void>>
    flush_slow(galay::detail::FrameCache&, BufWriter& w, std::int64_t deadline_ns) {
        while (w.buf_.size() > 0) {
            Result<std::size_t> n =
                co_await detail::with_deadline(w.stream_->send(w.buf_.live_bytes()), deadline_ns);
            if (!n) co_return std::unexpected(n.error());
            if (*n == 0) co_return fail(EPIPE);
            w.buf_.consume(*n);
        }
        w.buf_.give_back();
        co_return Result<void>{};
    }

    S* stream_;
    galay::detail::ByteWindow buf_;
    galay::detail::FrameCache frames_;
};

} // namespace galay::io
