// galay/sync/channel.hpp: a bounded multi-producer, multi-consumer channel between tasks on one or
// several threads.
//
//     galay::Channel<Request> ch(1024);            // room for 1024 values, allocated once
//     // producers (any tasks, any threads):
//     if (auto r = co_await ch.send(std::move(req)); !r) // full: waits; closed: fails
//         log(r.error().code.message());           // and r.error().value is the request back
//     // consumers:
//     while (auto req = co_await ch.recv())        // Result<Request>; empty: waits
//         handle(std::move(*req));                 // ends with errc::closed once closed and empty
//     // shutdown:
//     ch.close();
//
// - `send` waits while the channel is full, `recv` while it is empty; both are cancellable and
//   take `.timeout(d)` / `.deadline(t)`. Waiting senders and receivers are served in FIFO order.
// - `close()` wakes every waiting task: senders fail with `errc::closed` (their values handed
//   back in the error), receivers get the values still buffered, then `errc::closed`.
// - No value is lost or duplicated: a value is in the buffer, in exactly one receiver's hands,
//   or still with its sender. A receive that is cancelled or times out takes nothing (a value on
//   its way to it wins the race and is returned); a send that fails returns its value.
// - When nobody waits, `send` and `recv` take a short spin lock and touch nothing else (no
//   scheduler, no allocation). A waiter on another thread is woken through its scheduler's
//   `post()`, one on the same thread with `schedule()`.
// The channel must outlive every wait on it (keep it in a shared_ptr or an outer frame).
#pragma once

#include "galay/sync/waiter.hpp"

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>

namespace galay {

/// A send that did not happen: why, and the value, handed back.
template <class T>
struct SendError {
    std::error_code code; ///< errc::closed, std::errc::timed_out or operation_canceled
    T value;
};

template <class T>
class Channel {
public:
    using SendResult = std::expected<void, SendError<T>>;

    class [[nodiscard]] SendAwaiter : public Waiter<SendAwaiter> {
    public:
        SendAwaiter(Channel& ch, T&& v) noexcept(std::is_nothrow_move_constructible_v<T>)
            : ch_(&ch)
            , value_(std::move(v)) {}
        SendAwaiter(SendAwaiter&&) = default;

        bool enqueue() {
            Channel& ch = *ch_;
            RecvAwaiter* r;
            {
                std::lock_guard g(ch.lock_);
                if (ch.closed_) {
                    closed_ = true;
                    return false;
                }
                r = ch.receivers_.pop_front(); // receivers wait only while the buffer is empty
                if (r == nullptr) {
                    if (ch.count_ == ch.capacity_) {
                        ch.senders_.push_back(*this);
                        return true;
                    }
                    ch.push_locked(std::move(value_));
                    return false;
                }
                r->value_.emplace(std::move(value_));
            }
            r->wake();
            return false;
        }
        SendResult result() {
            if (auto s = this->wait_status(); !s)
                return std::unexpected(SendError<T>{s.error(), std::move(value_)});
            if (closed_)
                return std::unexpected(
                    SendError<T>{make_error_code(errc::closed), std::move(value_)});
            return {};
        }

    private:
        friend class Channel;
        Channel* ch_;
        T value_;
        bool closed_ = false;
    };

    class [[nodiscard]] RecvAwaiter : public Waiter<RecvAwaiter> {
    public:
        explicit RecvAwaiter(Channel& ch) noexcept
            : ch_(&ch) {}
        RecvAwaiter(RecvAwaiter&&) = default;

        bool enqueue() {
            Channel& ch = *ch_;
            SendAwaiter* s;
            {
                std::lock_guard g(ch.lock_);
                if (ch.count_ == 0) {
                    if (ch.closed_) return false; // value_ stays empty: closed
                    ch.receivers_.push_back(*this);
                    return true;
                }
                value_.emplace(ch.pop_locked());
                // A sender waits only while the buffer is full: its value takes the freed slot.
                s = ch.senders_.pop_front();
                if (s == nullptr) return false;
                ch.push_locked(std::move(s->value_));
            }
            s->wake();
            return false;
        }
        Result<T> result() {
            if (auto s = this->wait_status(); !s) return std::unexpected(s.error());
            if (!value_) return fail(errc::closed);
            return Result<T>(std::move(*value_));
        }

    private:
        friend class Channel;
        Channel* ch_;
        std::optional<T> value_; // the received value (from the buffer or straight from a sender)
    };

    /// A channel that buffers up to `capacity` (>= 1) values; the buffer is allocated here, once.
    explicit Channel(std::size_t capacity)
        : capacity_(capacity) {
        if (capacity == 0) throw std::invalid_argument("galay::Channel: capacity must be >= 1");
        slots_ = std::allocator<T>().allocate(capacity);
    }
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;
    /// Destroys the values still buffered. No task may be waiting on it.
    ~Channel() {
        while (count_ != 0)
            pop_locked();
        std::allocator<T>().deallocate(slots_, capacity_);
    }

    /// Send `value`, waiting while the channel is full. Gives `std::expected<void,
    /// SendError<T>>`: the error carries the value back.
    [[nodiscard]] SendAwaiter send(T value) noexcept(std::is_nothrow_move_constructible_v<T>) {
        return SendAwaiter(*this, std::move(value));
    }
    /// Receive the next value, waiting while the channel is empty. `Result<T>`: `errc::closed`
    /// once the channel is closed and drained.
    [[nodiscard]] RecvAwaiter recv() noexcept { return RecvAwaiter(*this); }

    /// Send without waiting: fails with `std::errc::resource_unavailable_try_again` when full,
    /// `errc::closed` when closed (the value handed back either way).
    SendResult try_send(T value) {
        RecvAwaiter* r;
        {
            std::lock_guard g(lock_);
            if (closed_)
                return std::unexpected(
                    SendError<T>{make_error_code(errc::closed), std::move(value)});
            r = receivers_.pop_front();
            if (r == nullptr) {
                if (count_ == capacity_)
                    return std::unexpected(SendError<T>{errno_code(EAGAIN), std::move(value)});
                push_locked(std::move(value));
                return {};
            }
            r->value_.emplace(std::move(value));
        }
        r->wake();
        return {};
    }
    /// Receive without waiting: `std::errc::resource_unavailable_try_again` when empty,
    /// `errc::closed` when closed and drained.
    Result<T> try_recv() {
        SendAwaiter* s;
        std::optional<T> v;
        {
            std::lock_guard g(lock_);
            if (count_ == 0) return closed_ ? fail(errc::closed) : fail(EAGAIN);
            v.emplace(pop_locked());
            s = senders_.pop_front();
            if (s != nullptr) push_locked(std::move(s->value_));
        }
        if (s != nullptr) s->wake();
        return Result<T>(std::move(*v));
    }

    /// Close: later sends fail, waiting senders fail with their values handed back, receivers
    /// drain what is buffered and then get `errc::closed`. Idempotent; any thread.
    void close() noexcept {
        WakeList<SendAwaiter> senders; // woken after the lock below is released
        WakeList<RecvAwaiter> receivers;
        std::lock_guard g(lock_);
        if (closed_) return;
        closed_ = true;
        senders = senders_.take_all();
        senders.for_each([](SendAwaiter& s) { s.closed_ = true; });
        receivers = receivers_.take_all(); // they wait only on an empty buffer: closed for all
    }

    bool is_closed() const noexcept {
        std::lock_guard g(lock_);
        return closed_;
    }
    /// Values buffered now.
    std::size_t size() const noexcept {
        std::lock_guard g(lock_);
        return count_;
    }
    std::size_t capacity() const noexcept { return capacity_; }
    /// Tasks waiting to send (the channel is full) / to receive (it is empty) now.
    std::size_t waiting_senders() const noexcept {
        std::lock_guard g(lock_);
        return senders_.size();
    }
    std::size_t waiting_receivers() const noexcept {
        std::lock_guard g(lock_);
        return receivers_.size();
    }

private:
    void push_locked(T&& v) {
        std::size_t tail = head_ + count_;
        if (tail >= capacity_) tail -= capacity_;
        std::construct_at(slots_ + tail, std::move(v));
        ++count_;
    }
    T pop_locked() {
        T* p = slots_ + head_;
        T v(std::move(*p));
        std::destroy_at(p);
        if (++head_ == capacity_) head_ = 0;
        --count_;
        return v;
    }

    mutable SpinLock lock_;
    T* slots_ = nullptr; // ring buffer of capacity_ slots; [head_, head_ + count_) are live
    std::size_t capacity_;
    std::size_t head_ = 0;
    std::size_t count_ = 0;
    bool closed_ = false;
    WaitList<SendAwaiter> senders_{lock_};   // wait while full
    WaitList<RecvAwaiter> receivers_{lock_}; // wait while empty
};

} // namespace galay
