// galay/sync/channel.hpp: a bounded multi-producer, multi-consumer channel between tasks on one or
// several threads.
//
//     galay::Channel<Request> ch(1024);            // room for 1024 values, allocated once
//     // producers (any tasks, any threads):
//     auto sent = co_await ch.send(std::move(req)); // full: waits; closed: fails
//     if (!sent) log(sent.error().code.message());  // and sent.error().value is the request back
//     auto made = co_await ch.emplace(7);           // a Request{7} built in place: no temporary
//     if (!made) log(made.error().code.message());
//     // consumers:
//     for (;;) {
//         auto req = co_await ch.recv();             // Result<Request>; empty: waits
//         if (!req) break;                           // errc::closed once closed and empty
//         handle(std::move(*req));
//     }
//     // shutdown:
//     ch.close();
//
// - `send` waits while the channel is full, `recv` while it is empty; both are cancellable and
//   take `.timeout(d)` / `.deadline(t)`. Values come out in the order they went in; waiting
//   senders and receivers are served in FIFO order and a new send or receive does not overtake
//   tasks already waiting.
// - `close()` wakes every waiting task: senders fail with `errc::closed` (their values handed
//   back in the error), receivers get the values still buffered, then `errc::closed`.
// - No value is lost or duplicated: a value is in the buffer, in exactly one receiver's hands,
//   or still with its sender. A receive that is cancelled or times out takes nothing (a value
//   already handed to it wins the race and is returned); a send that fails returns its value.
//
// Speed: the buffer is a lock-free ring of cells allocated once (bounded MPMC, one atomic
// sequence number per cell); while nobody waits, `send` and `recv` are a few atomic operations
// and touch no lock, no scheduler and no heap. Waiting tasks sit on lists under a spin lock. A
// side that finishes an operation looks (one load) whether the other side has waiters and, if
// so, takes the lock and serves them: the value goes straight to a waiting receiver, or a
// waiting sender's value into the freed cell. A waiter on another thread is woken through its
// scheduler's `post()`, one on the same thread with `schedule()`.
// The channel must outlive every wait on it (keep it in a shared_ptr or an outer frame).
#pragma once

#include "galay/detail/mpmc_ring.hpp"
#include "galay/detail/recv_many.hpp"
#include "galay/sync/waiter.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace galay {

/// A send that did not happen: why, and the value, handed back.
template <class T>
struct SendError {
    std::error_code code; ///< errc::closed, std::errc::timed_out or operation_canceled
    /// The value that was not sent, handed back to the sender.
    T value;
};

/// A bounded multi-producer, multi-consumer channel of `T` between tasks (see the top of this
/// header).
template <class T>
class Channel {
public:
    /// What `co_await send(v)` gives: nothing, or why it failed with the value back.
    using SendResult = std::expected<void, SendError<T>>;

    /// The awaitable of `send()`: waits while the channel is full. Takes `.timeout(d)` /
    /// `.deadline(t)`.
    class [[nodiscard]] SendAwaiter : public Waiter<SendAwaiter> {
    public:
        /// A send of `v` into `ch` (made by `Channel::send`).
        SendAwaiter(Channel& ch, T&& v) noexcept(std::is_nothrow_move_constructible_v<T>)
            : ch_(&ch)
            , value_(std::move(v)) {}
        /// A send of a `T` made here from `args` (made by `Channel::emplace`): braces for an
        /// aggregate, parentheses otherwise.
        template <class... A>
        SendAwaiter(Channel& ch, std::in_place_t, A&&... args)
            : ch_(&ch)
            , value_(make_value(std::forward<A>(args)...)) {}
        /// Only before it is awaited.
        SendAwaiter(SendAwaiter&&) = default;
        ~SendAwaiter() { this->withdraw_if_destroyed_waiting(); } // withdrawn() runs while whole

        /// Waiter protocol: send at once (false) or queue this sender (true).
        bool enqueue() {
            switch (ch_->send_now(value_)) {
            case Done::ok:
                return false;
            case Done::closed:
                closed_ = true;
                return false;
            case Done::no:
                break;
            }
            return ch_->send_or_queue(*this);
        }
        /// Task dumps: this channel, full.
        void describe(detail::WaitDesc& d) const noexcept override {
            WaiterBase::describe(d);
            d.what = "channel send";
            d.object = ch_;
            d.object_name = ch_->name_;
        }
        /// Waiter protocol: the value of `co_await`.
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
        template <class... A>
        static T make_value(A&&... args) {
            if constexpr (std::is_aggregate_v<T>)
                return T{std::forward<A>(args)...};
            else
                return T(std::forward<A>(args)...);
        }
        void withdrawn(WakeList<WaiterBase>&) noexcept override {
            ch_->waiting_senders_.fetch_sub(1, std::memory_order_relaxed);
        }
        Channel* ch_;
        T value_;
        bool closed_ = false;
    };

    /// The awaitable of `recv()`: waits while the channel is empty. Takes `.timeout(d)` /
    /// `.deadline(t)`.
    class [[nodiscard]] RecvAwaiter : public Waiter<RecvAwaiter> {
    public:
        /// A receive from `ch` (made by `Channel::recv`).
        explicit RecvAwaiter(Channel& ch) noexcept
            : ch_(&ch) {}
        /// Only before it is awaited.
        RecvAwaiter(RecvAwaiter&&) = default;
        ~RecvAwaiter() { this->withdraw_if_destroyed_waiting(); }

        /// Waiter protocol: receive at once (false) or queue this receiver (true).
        bool enqueue() {
            if (ch_->recv_now(value_) == Done::ok) return false;
            return ch_->recv_or_queue(*this);
        }
        /// Task dumps: this channel, empty.
        void describe(detail::WaitDesc& d) const noexcept override {
            WaiterBase::describe(d);
            d.what = "channel recv";
            d.object = ch_;
            d.object_name = ch_->name_;
        }
        /// Waiter protocol: the value of `co_await`.
        Result<T> result() {
            if (auto s = this->wait_status(); !s) return std::unexpected(s.error());
            if (!value_) return fail(errc::closed);
            return Result<T>(std::move(*value_));
        }

    private:
        friend class Channel;
        void withdrawn(WakeList<WaiterBase>&) noexcept override {
            ch_->waiting_receivers_.fetch_sub(1, std::memory_order_relaxed);
        }
        Channel* ch_;
        std::optional<T> value_; // the received value (empty at the end: closed)
    };

    /// The awaitable of `recv_many()`: waits for one value like `recv()`, then takes what else is
    /// buffered without waiting. Takes `.timeout(d)` / `.deadline(t)`; gives
    /// `Result<std::size_t>`, how many values were appended.
    using RecvManyAwaiter = detail::RecvManyAwaiter<Channel, T>;

    /// A channel that buffers up to `capacity` (>= 1) values; the buffer is allocated here, once.
    explicit Channel(std::size_t capacity)
        : ring_(checked_capacity(capacity)) {}
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;
    /// A name that task dumps show with the tasks waiting on this channel (a string that outlives
    /// it: a literal). Before tasks wait on it.
    void set_name(const char* name) noexcept { name_ = name; }
    /// The name given by set_name (null: none).
    const char* name() const noexcept { return name_; }
    /// Destroys the values still buffered. No task may be waiting on it.
    ~Channel() {
        std::optional<T> v;
        while (pop(v))
            v.reset();
    }

    /// Send `value`, waiting while the channel is full. Gives `std::expected<void,
    /// SendError<T>>`: the error carries the value back.
    [[nodiscard]] SendAwaiter send(T value) noexcept(std::is_nothrow_move_constructible_v<T>) {
        return SendAwaiter(*this, std::move(value));
    }
    /// Send a `T` built from `args` inside the awaitable, as `send` does otherwise. Unlike
    /// `co_await ch.send(Msg{a, b})`, `co_await ch.emplace(a, b)` leaves no aggregate temporary
    /// alive across the suspension, which g++ 12 destroys twice (README "Compilers").
    template <class... A>
    [[nodiscard]] SendAwaiter emplace(A&&... args) {
        return SendAwaiter(*this, std::in_place, std::forward<A>(args)...);
    }

    /// Receive the next value, waiting while the channel is empty. `Result<T>`: `errc::closed`
    /// once the channel is closed and drained.
    [[nodiscard]] RecvAwaiter recv() noexcept { return RecvAwaiter(*this); }

    /// Receive up to `max` values into `out` (appended): waits for the first like `recv()`, then
    /// takes the ones already buffered without waiting. `Result<std::size_t>`: how many.
    [[nodiscard]] RecvManyAwaiter recv_many(std::vector<T>& out, std::size_t max) noexcept {
        return RecvManyAwaiter(*this, out, max);
    }

    /// Send without waiting: fails with `std::errc::resource_unavailable_try_again` when full
    /// (or when senders are waiting), `errc::closed` when closed; the value handed back.
    SendResult try_send(T value) {
        switch (send_now(value)) {
        case Done::ok:
            return {};
        case Done::closed:
            return std::unexpected(SendError<T>{make_error_code(errc::closed), std::move(value)});
        case Done::no:
            break;
        }
        return std::unexpected(SendError<T>{errno_code(EAGAIN), std::move(value)});
    }
    /// Receive without waiting: `std::errc::resource_unavailable_try_again` when empty (or when
    /// receivers are waiting), `errc::closed` when closed and drained.
    Result<T> try_recv() {
        std::optional<T> v;
        if (recv_now(v) == Done::ok) return Result<T>(std::move(*v));
        if (drained_for_good()) {
            if (pop(v)) { // a send that finished since
                served_one_value();
                return Result<T>(std::move(*v));
            }
            return fail(errc::closed);
        }
        return fail(EAGAIN);
    }

    /// Close: later sends fail, waiting senders fail with their values handed back, receivers
    /// drain what is buffered and then get `errc::closed`. Idempotent; any thread.
    void close() noexcept {
        WakeList<SendAwaiter> senders; // woken after the lock below is released
        WakeList<RecvAwaiter> receivers;
        std::lock_guard g(lock_);
        if (state_.fetch_or(kClosed, std::memory_order_seq_cst) & kClosed) return;
        senders = senders_.take_all();
        waiting_senders_.store(0, std::memory_order_relaxed);
        senders.for_each([](SendAwaiter& s) { s.closed_ = true; });
        // Waiting receivers get what is buffered, then "closed" once no send is in flight (else
        // the last send in flight serves them).
        serve_locked(senders, receivers);
    }

    /// True once `close()` has been called.
    bool is_closed() const noexcept { return state_.load(std::memory_order_acquire) & kClosed; }
    /// Values buffered now (a snapshot while other threads send and receive).
    std::size_t size() const noexcept {
        const std::size_t h = ring_.ordinal(head_.load(std::memory_order_acquire));
        const std::size_t t = ring_.ordinal(tail_.load(std::memory_order_acquire));
        return t > h ? std::min(t - h, ring_.capacity()) : 0;
    }
    /// The most values it buffers.
    std::size_t capacity() const noexcept { return ring_.capacity(); }
    /// Tasks waiting to send (the channel is full) / to receive (it is empty) now.
    std::size_t waiting_senders() const noexcept {
        return waiting_senders_.load(std::memory_order_acquire);
    }
    /// Tasks waiting to receive (the channel is empty) now.
    std::size_t waiting_receivers() const noexcept {
        return waiting_receivers_.load(std::memory_order_acquire);
    }

private:
    friend RecvManyAwaiter;
    // Values already buffered, without waiting (after recv_many's first value).
    std::size_t take_buffered(std::vector<T>& out, std::size_t max) {
        std::size_t n = 0;
        for (; n < max; ++n) {
            Result<T> more = try_recv();
            if (!more) break;
            out.push_back(std::move(*more));
        }
        return n;
    }
    enum class Done { ok, no, closed };

    static std::size_t checked_capacity(std::size_t capacity) {
        if (capacity == 0) throw std::invalid_argument("galay::Channel: capacity must be >= 1");
        if (capacity > (std::size_t{1} << 40))
            throw std::invalid_argument("galay::Channel: capacity too large");
        return capacity;
    }

    /// The ring's positions live here, next to what the same side also writes (tail_ with state_,
    /// head_ with recv_sync_): see detail::MpmcRing.
    bool push(T& v) { return ring_.push(tail_, v); }
    bool pop(std::optional<T>& out) { return ring_.pop(head_, out); }

    // --- sending -----------------------------------------------------------------------------
    /// The fast path: push unless closed, full, or senders are already waiting (FIFO).
    Done send_now(T& v) {
        // Counted in flight in the same atomic step that looks at the closed bit: a receiver that
        // sees the channel closed and nothing in flight knows the ring holds all there will be.
        Done d = Done::no;
        if (state_.fetch_add(kOneSender, std::memory_order_seq_cst) & kClosed)
            d = Done::closed;
        else if (waiting_senders_.load(std::memory_order_relaxed) == 0 && push(v))
            d = Done::ok;
        // A receiver about to wait counts itself in waiting_receivers_ and then makes an RMW on
        // state_ before it looks at the ring. Both RMWs are on state_, so one comes first: if
        // ours, the receiver sees our value; if its, we see its count below. (And after a
        // failed send too: the last send in flight after close() lets waiting receivers see
        // "closed".)
        state_.fetch_sub(kOneSender, std::memory_order_seq_cst);
        if (waiting_receivers_.load(std::memory_order_seq_cst) != 0) serve();
        return d;
    }
    /// The slow path, from SendAwaiter::enqueue: push under the lock, or queue. True: queued.
    bool send_or_queue(SendAwaiter& s) {
        WakeList<SendAwaiter> ws; // woken after the lock below is released
        WakeList<RecvAwaiter> wr;
        std::lock_guard g(lock_);
        if (state_.load(std::memory_order_relaxed) & kClosed) {
            s.closed_ = true;
            return false;
        }
        waiting_senders_.fetch_add(1, std::memory_order_seq_cst); // before the re-check
        recv_sync_.fetch_add(0, std::memory_order_seq_cst);       // see served_one_value()
        if (!senders_.empty() || !push(s.value_)) {
            senders_.push_back(s);
            return true;
        }
        waiting_senders_.fetch_sub(1, std::memory_order_relaxed);
        serve_locked(ws, wr); // receivers waiting for the value just pushed
        return false;
    }

    // --- receiving ---------------------------------------------------------------------------
    /// The fast path: pop unless empty or receivers are already waiting (FIFO).
    Done recv_now(std::optional<T>& out) {
        if (waiting_receivers_.load(std::memory_order_relaxed) != 0 || !pop(out)) return Done::no;
        served_one_value();
        return Done::ok;
    }
    /// A cell was freed: serve senders waiting for one. A sender about to wait counts itself in
    /// waiting_senders_ and then makes an RMW on recv_sync_ before it looks at the ring: one of
    /// the two RMWs comes first, so it sees the free cell or we see its count.
    void served_one_value() {
        recv_sync_.fetch_add(1, std::memory_order_seq_cst);
        if (waiting_senders_.load(std::memory_order_seq_cst) != 0) serve();
    }
    /// The slow path, from RecvAwaiter::enqueue: pop under the lock, or queue. True: queued.
    bool recv_or_queue(RecvAwaiter& r) {
        WakeList<SendAwaiter> ws; // woken after the lock below is released
        WakeList<RecvAwaiter> wr;
        std::lock_guard g(lock_);
        waiting_receivers_.fetch_add(1, std::memory_order_seq_cst); // before the re-check
        state_.fetch_add(0, std::memory_order_seq_cst);             // see send_now()
        if (receivers_.empty() && pop(r.value_)) {
            waiting_receivers_.fetch_sub(1, std::memory_order_relaxed);
            serve_locked(ws, wr); // senders waiting for the cell just freed
            return false;
        }
        if (receivers_.empty() && drained_for_good()) {
            waiting_receivers_.fetch_sub(1, std::memory_order_relaxed);
            return false; // value_ stays empty: closed
        }
        receivers_.push_back(r);
        return true;
    }

    /// Closed, and no send in flight: the ring holds all there will ever be. (A send counts
    /// itself in flight as it looks at the closed bit; pushes under the lock stop at close().)
    bool drained_for_good() const noexcept {
        return state_.load(std::memory_order_seq_cst) == kClosed;
    }

    // --- serving waiters ---------------------------------------------------------------------
    void serve() {
        WakeList<SendAwaiter> ws; // woken after the lock below is released
        WakeList<RecvAwaiter> wr;
        std::lock_guard g(lock_);
        serve_locked(ws, wr);
    }
    /// With lock_ held: move waiting senders' values into free cells and buffered values to
    /// waiting receivers, in order, while either can go on. Once the channel is closed for good
    /// the receivers left get "closed".
    void serve_locked(WakeList<SendAwaiter>& ws, WakeList<RecvAwaiter>& wr) {
        for (bool progress = true; progress;) {
            progress = false;
            for (SendAwaiter* s = senders_.front(); s != nullptr && push(s->value_);
                 s = senders_.front()) {
                ws.push_back(*senders_.pop_front());
                waiting_senders_.fetch_sub(1, std::memory_order_relaxed);
                progress = true;
            }
            for (RecvAwaiter* r = receivers_.front(); r != nullptr && pop(r->value_);
                 r = receivers_.front()) {
                wr.push_back(*receivers_.pop_front());
                waiting_receivers_.fetch_sub(1, std::memory_order_relaxed);
                progress = true;
            }
        }
        if (!receivers_.empty() && drained_for_good()) {
            while (RecvAwaiter* r = receivers_.pop_front()) {
                pop(r->value_); // a value that landed meanwhile; else closed
                wr.push_back(*r);
                waiting_receivers_.fetch_sub(1, std::memory_order_relaxed);
            }
        }
    }

    detail::MpmcRing<T> ring_;   // the cells (allocated once); the positions are tail_ and head_
    const char* name_ = nullptr; // set_name (read only by task dumps)
    // Senders write tail_ and state_, receivers head_; the waiting counts are read on every
    // operation and written only when tasks start or stop waiting; the lock and the lists are
    // touched only then. Each group on its own cache line.
    static constexpr std::uint64_t kClosed = 1, kOneSender = 2;
    alignas(64) std::atomic<std::size_t> tail_{0};
    std::atomic<std::uint64_t> state_{0}; // kClosed | sends in flight * kOneSender
    alignas(64) std::atomic<std::size_t> head_{0};
    std::atomic<std::uint64_t> recv_sync_{0}; // an RMW per receive: see served_one_value()
    alignas(64) std::atomic<std::uint32_t> waiting_senders_{0}; // == senders_ size (under lock_)
    std::atomic<std::uint32_t> waiting_receivers_{0};           // == receivers_ size (under lock_)
    alignas(64) mutable SpinLock lock_;                         // guards the lists and closing
    WaitList<SendAwaiter> senders_{lock_};                      // wait while full
    WaitList<RecvAwaiter> receivers_{lock_};                    // wait while empty
};

} // namespace galay
