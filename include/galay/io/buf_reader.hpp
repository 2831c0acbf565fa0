// galay/io/buf_reader.hpp: buffered, bounded reads over any galay byte stream.
//
//     galay::Task<void> lines(galay::TcpStream conn) {
//         galay::io::BufReader reader(conn, 4096);         // at most 4 KiB buffered
//         for (;;) {
//             auto line = co_await reader.read_line().timeout(30s);
//             if (!line) co_return; // end_of_stream, timed_out, limit_exceeded (line > 4 KiB)...
//             std::string_view text = *line;                // a view into the reader's buffer
//             ...
//         }
//     }
//
// The reader owns one buffer, allocated small (2 KiB) on its first receive and doubled when it
// fills, up to its capacity. The capacity is the limit: a line (or any delimited read) that does
// not fit fails with `errc::limit_exceeded` instead of growing the buffer further, so a peer
// cannot make it grow without bound.
//
// Reads return views into the buffer (no copy): a view stays valid until the next operation on
// the reader that receives (fill, read_*, peek); consume() does not move bytes. Every operation
// takes `.timeout(d)` / `.deadline(t)` (one deadline for the whole operation, however many
// receives it takes) and is cancelled with the task that awaits it. An operation that fails
// (timeout, cancellation, EOF in the middle, limit) consumes nothing: the bytes received so far
// stay buffered for the next call, and `buffered()` shows them. (read_exact into the caller's
// buffer is the exception: see there.)
//
// An operation that can be answered from the buffer completes without suspending. One that must
// wait runs a coroutine whose frame the reader keeps and reuses: no allocation per operation.
//
// End of stream: a read that finds the peer closed before its first byte fails with
// `errc::end_of_stream`; one that had part of its data fails with `errc::unexpected_eof`.
#pragma once

#include "galay/detail/byte_window.hpp"
#include "galay/detail/cached_task.hpp"
#include "galay/io/stream.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

namespace galay::io {

/// Buffered reads over a stream `S` (which must outlive the reader). Not thread-safe; one
/// operation at a time.
template <ReadStream S>
class BufReader {
    using RecvOp = decltype(std::declval<S&>().recv(std::span<char>{}));

public:
    /// The capacity when none is given.
    static constexpr std::size_t default_capacity = 8192;

    /// A reader of `stream` holding at most `capacity` bytes at once (allocated on first use,
    /// growing up to it).
    explicit BufReader(S& stream, std::size_t capacity = default_capacity) noexcept
        : stream_(&stream)
        , buf_(capacity) {}
    /// Only while no operation is pending.
    BufReader(BufReader&&) noexcept = default;

    /// Bytes received and not yet consumed (a view; see the lifetime rule above).
    std::string_view buffered() const noexcept { return buf_.live(); }
    /// Drop `n` buffered bytes (at most all of them).
    void consume(std::size_t n) noexcept { buf_.consume(n); }
    /// Put bytes received some other way (e.g. by `recv_pooled`) behind the buffered ones, as
    /// if fill() had received them. False, and nothing taken, when they do not fit within the
    /// capacity.
    bool append(std::string_view bytes) { return buf_.append({bytes.data(), bytes.size()}); }
    /// When nothing is buffered and the block is still its first 2 KiB, give it to this
    /// thread's spare blocks (as a BufWriter does when it has sent everything); the next fill()
    /// or append() takes one again. For a reader that will wait long for its next bytes. Views
    /// returned earlier must not be used after it.
    void give_back() noexcept { buf_.give_back(); }
    /// The limit: the most bytes the reader holds at once.
    std::size_t capacity() const noexcept { return buf_.capacity(); }
    /// The stream it reads from.
    S& stream() noexcept { return *stream_; }

    /// One receive into the free space -> Result<size_t>: the bytes added (0: the peer closed).
    /// With the buffer full it fails at once with `errc::limit_exceeded`.
    class [[nodiscard]] Fill : public galay::detail::AwaitedInPlace<Fill> {
    public:
        /// One receive into the free space of `r` (made by `BufReader::fill`).
        explicit Fill(BufReader& r)
            : r_(r)
            , room_(r.buf_.room())
            , op_(r.stream_->recv(room_)) {}
        /// Give up after `d` (`std::errc::timed_out`).
        Fill&& timeout(Timeout d) && {
            (void)std::move(op_).timeout(d); // sets the deadline in place
            return std::move(*this);
        }
        /// Give up at the steady-clock time `t` (`std::errc::timed_out`).
        Fill&& deadline(std::chrono::steady_clock::time_point t) && {
            (void)std::move(op_).deadline(t);
            return std::move(*this);
        }
        /// Awaiter protocol, called by `co_await`: ready when the buffer is full (the error) or the
        /// receive finished at once.
        bool await_ready() noexcept { return room_.empty() || op_.await_ready(); }
        /// Awaiter protocol: suspends on the receive.
        template <class P>
        auto await_suspend(std::coroutine_handle<P> h) {
            return op_.await_suspend(h);
        }
        /// Awaiter protocol: the bytes added (0: the peer closed), or the error.
        Result<std::size_t> await_resume() {
            if (room_.empty()) return fail(errc::limit_exceeded);
            Result<std::size_t> n = op_.await_resume();
            if (n) r_.buf_.commit(*n);
            return n;
        }

    private:
        BufReader& r_;
        std::span<char> room_;
        RecvOp op_;
    };

    /// The bytes up to and including `delim` (consumed), as a view -> Result<string_view>.
    /// `limit_exceeded` when the capacity fills without it. `delim` must stay alive until the
    /// operation completes (a literal is fine).
    class [[nodiscard]] ReadUntil : public detail::Deadlined<ReadUntil> {
    public:
        /// A read of `r` up to `delim`; `strip_line` drops a line ending (made by read_until and
        /// read_line).
        ReadUntil(BufReader& r, std::string_view delim, bool strip_line) noexcept
            : r_(r)
            , delim_(delim)
            , line_(strip_line) {}
        /// Awaiter protocol: ready when the delimiter is already buffered, or the buffer is full
        /// without it.
        bool await_ready() {
            if (delim_.empty()) {
                ready_.emplace(std::string_view{});
                return true;
            }
            std::size_t at = r_.buf_.find(delim_, 0);
            if (at != std::string_view::npos) {
                ready_.emplace(r_.take(at + delim_.size(), line_));
                return true;
            }
            if (r_.buf_.full()) {
                ready_.emplace(fail(errc::limit_exceeded));
                return true;
            }
            return false;
        }
        /// Awaiter protocol: receives until the delimiter arrives (a cached coroutine, no
        /// allocation after the first).
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_ = until_slow(r_.frames_, r_, delim_, line_, this->deadline_ns_);
            return slow_.start(h);
        }
        /// Awaiter protocol: the bytes up to the delimiter, or the error.
        Result<std::string_view> await_resume() {
            if (ready_) return std::move(*ready_);
            return slow_.take();
        }

    private:
        BufReader& r_;
        std::string_view delim_;
        bool line_;
        std::optional<Result<std::string_view>> ready_;
        galay::detail::CachedTask<Result<std::string_view>> slow_;
    };

    /// At least `n` bytes buffered, not consumed -> Result<string_view> of exactly `n` bytes.
    /// `limit_exceeded` when `n` is larger than the capacity.
    class [[nodiscard]] Peek : public detail::Deadlined<Peek> {
    public:
        /// A peek at `n` bytes of `r` (made by `BufReader::peek`).
        Peek(BufReader& r, std::size_t n) noexcept
            : r_(r)
            , n_(n) {}
        /// Awaiter protocol: ready when `n` bytes are buffered, or `n` exceeds the capacity.
        bool await_ready() noexcept {
            if (n_ > r_.capacity()) {
                ready_.emplace(fail(errc::limit_exceeded));
                return true;
            }
            return r_.buf_.size() >= n_;
        }
        /// Awaiter protocol: receives until `n` bytes are buffered.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_ = peek_slow(r_.frames_, r_, n_, this->deadline_ns_);
            return slow_.start(h);
        }
        /// Awaiter protocol: the first `n` bytes, or the error.
        Result<std::string_view> await_resume() {
            if (ready_) return std::move(*ready_);
            if (!slow_.valid()) return r_.buf_.live().substr(0, n_);
            return slow_.take();
        }

    private:
        BufReader& r_;
        std::size_t n_;
        std::optional<Result<std::string_view>> ready_;
        galay::detail::CachedTask<Result<std::string_view>> slow_;
    };

    /// Fill `out` completely -> Result<size_t> (= out.size()): buffered bytes first, then
    /// receives; a request of at least the capacity is received straight into `out`, without
    /// passing through the buffer. Unlike the other reads it moves bytes out of the reader as it
    /// goes: when it fails part way (EOF: `unexpected_eof`; timeout; error), a prefix of `out`
    /// has been filled and consumed, as with TcpStream::recv_exact. EOF before any byte is
    /// `end_of_stream`.
    class [[nodiscard]] ReadExact : public detail::Deadlined<ReadExact> {
    public:
        /// A read of `r` that fills `out` (made by `BufReader::read_exact`).
        ReadExact(BufReader& r, std::span<char> out) noexcept
            : r_(r)
            , out_(out) {}
        /// Awaiter protocol: copies the buffered bytes; ready when they fill `out`.
        bool await_ready() noexcept {
            std::string_view have = r_.buf_.live();
            done_ = std::min(have.size(), out_.size());
            if (done_ > 0) std::memcpy(out_.data(), have.data(), done_);
            r_.buf_.consume(done_);
            return done_ == out_.size();
        }
        /// Awaiter protocol: receives the rest of `out`.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
            slow_ = exact_slow(r_.frames_, r_, out_, done_, this->deadline_ns_);
            return slow_.start(h);
        }
        /// Awaiter protocol: `out.size()`, or the error.
        Result<std::size_t> await_resume() {
            if (!slow_.valid()) return out_.size();
            return slow_.take();
        }

    private:
        BufReader& r_;
        std::span<char> out_;
        std::size_t done_ = 0;
        galay::detail::CachedTask<Result<std::size_t>> slow_;
    };

    /// One receive into the free space (see Fill).
    Fill fill() { return Fill(*this); }
    /// The bytes up to and including `delim` (see ReadUntil).
    ReadUntil read_until(std::string_view delim) noexcept { return ReadUntil(*this, delim, false); }
    /// A line without its "\n" or "\r\n" (consumed) -> Result<string_view>.
    ReadUntil read_line() noexcept { return ReadUntil(*this, "\n", true); }
    /// At least `n` bytes buffered, not consumed (see Peek).
    Peek peek(std::size_t n) noexcept { return Peek(*this, n); }
    /// Fill `out` completely (see ReadExact).
    ReadExact read_exact(std::span<char> out) noexcept { return ReadExact(*this, out); }

private:
    /// Consume the first `n` live bytes and return them (without the line ending for lines).
    std::string_view take(std::size_t n, bool strip_line) noexcept {
        std::string_view v = buf_.live().substr(0, n);
        buf_.consume(n);
        if (strip_line) {
            v.remove_suffix(1);
            if (!v.empty() && v.back() == '\r') v.remove_suffix(1);
        }
        return v;
    }
    /// The error for EOF: nothing of the item yet (`end_of_stream`) or part of it.
    static std::unexpected<std::error_code> eof_error(bool partial) noexcept {
        return fail(partial ? errc::unexpected_eof : errc::end_of_stream);
    }

    static galay::detail::CachedTask<Result<std::string_view>>
    until_slow(galay::detail::FrameCache&, BufReader& r, std::string_view delim, bool line,
               std::int64_t deadline_ns) {
        // Only bytes not searched before are searched again: a peer sending one byte at a time
        // costs O(n), not O(n^2).
        std::size_t from = r.buf_.size() >= delim.size() ? r.buf_.size() - delim.size() + 1 : 0;
        for (;;) {
            Result<std::size_t> n =
                co_await detail::with_deadline(r.stream_->recv(r.buf_.room()), deadline_ns);
            if (!n) co_return std::unexpected(n.error());
            if (*n == 0) co_return eof_error(r.buf_.size() > 0);
            r.buf_.commit(*n);
            std::size_t at = r.buf_.find(delim, from);
            if (at != std::string_view::npos) co_return r.take(at + delim.size(), line);
            if (r.buf_.full()) co_return fail(errc::limit_exceeded);
            from = r.buf_.size() >= delim.size() ? r.buf_.size() - delim.size() + 1 : 0;
        }
    }

    static galay::detail::CachedTask<Result<std::string_view>> peek_slow(galay::detail::FrameCache&,
                                                                         BufReader& r,
                                                                         std::size_t want,
                                                                         std::int64_t deadline_ns) {
        while (r.buf_.size() < want) {
            Result<std::size_t> n =
                co_await detail::with_deadline(r.stream_->recv(r.buf_.room()), deadline_ns);
            if (!n) co_return std::unexpected(n.error());
            if (*n == 0) co_return eof_error(r.buf_.size() > 0);
            r.buf_.commit(*n);
        }
        co_return r.buf_.live().substr(0, want);
    }

    static galay::detail::CachedTask<Result<std::size_t>>
    exact_slow(galay::detail::FrameCache&, BufReader& r, std::span<char> out, std::size_t done,
               std::int64_t deadline_ns) {
        while (done < out.size()) {
            const std::size_t rest = out.size() - done;
            if (rest >= r.capacity()) {
                // Large: straight into the caller's memory (the buffer is empty here).
                Result<std::size_t> n =
                    co_await detail::with_deadline(r.stream_->recv(out.subspan(done)), deadline_ns);
                if (!n) co_return std::unexpected(n.error());
                if (*n == 0) co_return eof_error(done > 0);
                done += *n;
                continue;
            }
            Result<std::size_t> n =
                co_await detail::with_deadline(r.stream_->recv(r.buf_.room()), deadline_ns);
            if (!n) co_return std::unexpected(n.error());
            if (*n == 0) co_return eof_error(done > 0);
            r.buf_.commit(*n);
            const std::size_t k = std::min(r.buf_.size(), rest);
            std::memcpy(out.data() + done, r.buf_.live().data(), k);
            r.buf_.consume(k);
            done += k;
        }
        co_return out.size();
    }

    S* stream_;
    galay::detail::ByteWindow buf_;
    galay::detail::FrameCache frames_;
};

} // namespace galay::io
