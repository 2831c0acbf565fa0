// galay/sync/unbounded_channel.hpp: a multi-producer, multi-consumer channel without a bound:
// sending never waits, receiving waits while it is empty.
//
//     galay::UnboundedChannel<std::string> log_lines;
//     // producers (any tasks or plain threads):
//     auto sent = log_lines.send("started");         // never waits; fails only once closed
//     if (!sent) std::cerr << sent.error().code.message() << '\n'; // the value is handed back
//     // a consumer (any task):
//     std::vector<std::string> batch;
//     for (;;) {
//         auto n = co_await log_lines.recv_many(batch, 64).timeout(1s); // Result<std::size_t>
//         if (!n && n.error() == std::errc::timed_out) continue;
//         if (!n) break;                              // errc::closed once closed and drained
//         write_all(batch);
//         batch.clear();
//     }
//     // shutdown:
//     log_lines.close();
//
// - `recv` has the contract of `Channel::recv`: values in the order they were sent, waiting
//   receivers served in FIFO order, cancellable, `.timeout(d)` / `.deadline(t)`; one that is
//   cancelled or times out takes nothing (a value already handed to it wins and is returned).
// - `close()` wakes the waiting receivers: they drain what is buffered, then get `errc::closed`;
//   a `send` after it fails with the value handed back.
// - `send` is a plain call, not an awaitable: it cannot wait, so there is nothing to time out or
//   cancel, and no temporary lives across a suspension (see README "Compilers").
//
// Memory: values sit in blocks of a few KiB, linked in a queue; a block emptied by the receivers
// goes on a free list and is reused by later sends, so once the queue has reached its usual depth
// sending and receiving allocate nothing. The blocks are kept up to the deepest the queue has
// been (`capacity()` says how many values they hold) and freed with the channel. A value sent
// while a receiver waits goes straight into that receiver and never touches the queue. Sends and
// receives take one spin lock for a few instructions. Use the bounded `Channel` where producers
// can outrun consumers for long: nothing here slows them down.
// The channel must outlive every wait on it.
#pragma once

#include "galay/detail/recv_many.hpp"
#include "galay/detail/segmented_queue.hpp"
#include "galay/sync/channel.hpp"
#include "galay/sync/waiter.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

namespace galay {

/// A multi-producer, multi-consumer channel of `T` without a bound (see the top of this header).
template <class T>
class UnboundedChannel {
public:
    /// What `send(v)` gives: nothing, or `errc::closed` with the value back.
    using SendResult = std::expected<void, SendError<T>>;

    /// The awaitable of `recv()`: waits while the channel is empty. Takes `.timeout(d)` /
    /// `.deadline(t)`.
    class [[nodiscard]] RecvAwaiter : public Waiter<RecvAwaiter> {
    public:
        /// A receive from `ch` (made by `UnboundedChannel::recv`).
        explicit RecvAwaiter(UnboundedChannel& ch) noexcept
            : ch_(&ch) {}
        /// Only before it is awaited.
        RecvAwaiter(RecvAwaiter&&) = default;

        /// Waiter protocol: take a buffered value (false), see it closed (false), or queue (true).
        bool enqueue() {
            std::lock_guard g(ch_->lock_);
            if (ch_->queue_.pop(value_) || ch_->closed_) return false;
            ch_->receivers_.push_back(*this);
            return true;
        }
        /// Waiter protocol: the value, or closed / timed_out / operation_canceled.
        Result<T> result() {
            if (auto s = this->wait_status(); !s) return std::unexpected(s.error());
            if (!value_) return fail(errc::closed);
            return Result<T>(std::move(*value_));
        }

    private:
        friend class UnboundedChannel;
        UnboundedChannel* ch_;
        std::optional<T> value_; // the received value (empty at the end: closed)
    };

    /// The awaitable of `recv_many()`: waits for one value like `recv()`, then takes what else is
    /// buffered without waiting. Takes `.timeout(d)` / `.deadline(t)`; gives
    /// `Result<std::size_t>`, how many values were appended.
    using RecvManyAwaiter = detail::RecvManyAwaiter<UnboundedChannel, T>;

    /// An empty channel; the first block is allocated by the first send that has to buffer.
    UnboundedChannel() = default;
    UnboundedChannel(const UnboundedChannel&) = delete;
    UnboundedChannel& operator=(const UnboundedChannel&) = delete;
    /// Destroys the values still buffered. No task may be waiting on it.
    ~UnboundedChannel() = default;

    /// Send `value` (any thread, with or without a scheduler; never waits): into a waiting
    /// receiver, else into the queue. Fails only once closed: `errc::closed`, the value back.
    [[nodiscard]] SendResult send(T value) {
        RecvAwaiter* r;
        {
            std::lock_guard g(lock_);
            if (closed_)
                return std::unexpected(
                    SendError<T>{make_error_code(errc::closed), std::move(value)});
            r = receivers_.pop_front();
            if (r == nullptr) {
                queue_.push(std::move(value));
                return {};
            }
            r->value_.emplace(std::move(value));
        }
        r->wake();
        return {};
    }

    /// Receive the next value, waiting while the channel is empty. `Result<T>`: `errc::closed`
    /// once the channel is closed and drained.
    [[nodiscard]] RecvAwaiter recv() noexcept { return RecvAwaiter(*this); }

    /// Receive up to `max` values into `out` (appended): waits for the first like `recv()`, then
    /// takes the ones already buffered without waiting. `Result<std::size_t>`: how many.
    [[nodiscard]] RecvManyAwaiter recv_many(std::vector<T>& out, std::size_t max) noexcept {
        return RecvManyAwaiter(*this, out, max);
    }

    /// Receive without waiting: `std::errc::resource_unavailable_try_again` when empty,
    /// `errc::closed` when closed and drained.
    Result<T> try_recv() {
        std::optional<T> v;
        std::lock_guard g(lock_);
        if (queue_.pop(v)) return Result<T>(std::move(*v));
        return closed_ ? fail(errc::closed) : fail(EAGAIN);
    }

    /// Close: later sends fail with their values handed back, waiting receivers get
    /// `errc::closed` (nothing is buffered while receivers wait). Idempotent; any thread.
    void close() noexcept {
        WakeList<RecvAwaiter> receivers; // woken after the lock below is released
        std::lock_guard g(lock_);
        closed_ = true;
        receivers = receivers_.take_all();
    }

    /// True once `close()` has been called.
    bool is_closed() const noexcept {
        std::lock_guard g(lock_);
        return closed_;
    }
    /// Values buffered now (a snapshot while other threads send and receive).
    std::size_t size() const noexcept {
        std::lock_guard g(lock_);
        return queue_.size();
    }
    /// Values the blocks allocated so far hold: grows to the deepest the queue has been, then
    /// stays (sending and receiving reuse the blocks).
    std::size_t capacity() const noexcept {
        std::lock_guard g(lock_);
        return queue_.capacity();
    }
    /// Tasks waiting to receive now (the channel is empty).
    std::size_t waiting_receivers() const noexcept {
        std::lock_guard g(lock_);
        return receivers_.size();
    }

private:
    friend RecvManyAwaiter;
    std::size_t take_buffered(std::vector<T>& out, std::size_t max) {
        std::optional<T> v;
        std::size_t n = 0;
        std::lock_guard g(lock_);
        for (; n < max && queue_.pop(v); ++n)
            out.push_back(std::move(*v));
        return n;
    }

    mutable SpinLock lock_; // guards everything below
    detail::SegmentedQueue<T> queue_;
    WaitList<RecvAwaiter> receivers_{lock_}; // wait while empty; then queue_ is empty
    bool closed_ = false;
};

} // namespace galay
