// galay/sync/broadcast.hpp: one sender, many receivers; every receiver sees every message.
//
//     galay::Broadcast<int> bus(256);              // the last 256 messages are kept
//     galay::Broadcast<int>::Receiver rx = bus.subscribe(); // sees what is sent from now on
//     bus.send(42);                                // any thread; never waits
//     auto m = co_await rx.recv().timeout(1s);     // Result<int>
//     if (!m && m.error() == galay::errc::lagged)
//         report(rx.missed());                     // fell behind: that many were dropped for it
//     bus.close();                                 // receivers drain what is kept, then `closed`
//
// A bounded ring of the last `capacity` messages, allocated once. `send` never waits: it
// overwrites the oldest message. A receiver that falls more than `capacity` behind loses the
// overwritten ones: its next `recv` fails with `errc::lagged` (`missed()` says how many), and the
// one after that gives the oldest message still kept, so it continues where it can. Each receiver
// gets its own copy of every message (`T` is copied once per receiver, under the lock: make it
// cheap to copy, e.g. a `std::shared_ptr<const Payload>`); a receive copies up to 32 kept
// messages at once, which the next receives hand out without the lock (a copied message is the
// receiver's: it is not lost when the ring overwrites it). `recv` waits only when the receiver has
// seen everything; it is cancellable and takes `.timeout(d)` / `.deadline(t)`. Senders and
// receivers may live on any threads. The Broadcast must outlive its receivers.
#pragma once

#include "galay/sync/waiter.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace galay {

/// A fan-out channel: every receiver sees every message (see the top of this header).
template <class T>
class Broadcast {
public:
    class Receiver;

    /// The awaitable of `Receiver::recv()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] RecvAwaiter : public Waiter<RecvAwaiter> {
    public:
        /// A receive for `r` (made by `Receiver::recv`).
        explicit RecvAwaiter(Receiver& r) noexcept
            : rx_(&r) {}
        /// Only before it is awaited.
        RecvAwaiter(RecvAwaiter&& o) noexcept
            : Waiter<RecvAwaiter>(std::move(o))
            , rx_(o.rx_) {}
        /// Waiter protocol: take a kept message at once (false), or queue (true).
        bool enqueue() {
            if (rx_->take_ahead(got_)) return false; // no lock
            Broadcast& b = *rx_->bus_;
            std::lock_guard g(b.lock_);
            if (b.take_locked(*rx_, got_, err_)) return false;
            b.waiters_.push_back(*this);
            return true;
        }
        /// Waiter protocol: the message, or lagged / closed / timed_out / operation_canceled.
        Result<T> result() {
            if (auto s = this->wait_status(); !s) return std::unexpected(s.error());
            if (got_) return std::move(*got_);
            return std::unexpected(err_);
        }

    private:
        friend class Broadcast;
        Receiver* rx_;
        std::optional<T> got_;
        std::error_code err_;
    };

    /// One subscriber's position in the stream. Move-only; unsubscribes when destroyed.
    class Receiver {
    public:
        /// Takes over the position of `o` (only while no recv/changed of `o` is in flight).
        Receiver(Receiver&& o) noexcept
            : bus_(std::exchange(o.bus_, nullptr))
            , next_(o.next_)
            , missed_(o.missed_)
            , ahead_(std::move(o.ahead_))
            , ahead_pos_(o.ahead_pos_) {}
        Receiver& operator=(Receiver&&) = delete;
        Receiver(const Receiver&) = delete;
        ~Receiver() {
            if (bus_ != nullptr) {
                std::lock_guard g(bus_->lock_);
                --bus_->receivers_;
            }
        }

        /// The next message: waits when this receiver has seen everything. `Result<T>`:
        /// `errc::lagged` when messages were overwritten before it read them (see missed()),
        /// `errc::closed` once the broadcast is closed and everything kept was read.
        RecvAwaiter recv() noexcept { return RecvAwaiter(*this); }
        /// The next message if one is there; never waits (`errc::would_block` otherwise).
        Result<T> try_recv() {
            std::optional<T> got;
            std::error_code err;
            if (take_ahead(got)) return std::move(*got);
            std::lock_guard g(bus_->lock_);
            if (bus_->take_locked(*this, got, err)) {
                if (got) return std::move(*got);
                return std::unexpected(err);
            }
            return fail(EWOULDBLOCK);
        }
        /// How many messages the last `errc::lagged` result skipped.
        std::uint64_t missed() const noexcept { return missed_; }

    private:
        friend class Broadcast;
        Receiver(Broadcast& b, std::uint64_t next)
            : bus_(&b)
            , next_(next) {
            ahead_.reserve(kAhead);
        }
        /// The next message copied ahead, if any (only the receiving task touches ahead_).
        bool take_ahead(std::optional<T>& got) {
            if (ahead_pos_ == ahead_.size()) return false;
            got.emplace(std::move(ahead_[ahead_pos_++]));
            if (ahead_pos_ == ahead_.size()) {
                ahead_.clear();
                ahead_pos_ = 0;
            }
            return true;
        }
        Broadcast* bus_;
        std::uint64_t next_;       // sequence number of the next message to copy (bus_ lock)
        std::uint64_t missed_ = 0; // (bus_ lock)
        // Messages copied under the lock together with the one asked for, handed out by the next
        // receives without the lock: one lock round trip per batch, not per message.
        std::vector<T> ahead_;
        std::size_t ahead_pos_ = 0;
    };

    /// A broadcast keeping the last `capacity` (at least 1) messages.
    explicit Broadcast(std::size_t capacity)
        : ring_(capacity == 0 ? 1 : capacity) {}
    Broadcast(const Broadcast&) = delete;
    Broadcast& operator=(const Broadcast&) = delete;

    /// A receiver that sees every message sent after this call.
    Receiver subscribe() {
        std::lock_guard g(lock_);
        ++receivers_;
        return Receiver(*this, sent_);
    }

    /// Send `v` to every receiver (from any thread; never waits). Returns how many receivers
    /// there are, or `errc::closed` after close().
    Result<std::size_t> send(T v) {
        WakeList<RecvAwaiter> woken; // woken after the lock below is released
        std::lock_guard g(lock_);
        if (closed_) return fail(errc::closed);
        ring_[sent_ % ring_.size()] = std::move(v);
        ++sent_;
        woken = waiters_.take_all();
        // Every waiter had read everything, so the message just sent is its next one.
        woken.for_each([&](RecvAwaiter& w) {
            w.got_.emplace(*ring_[(sent_ - 1) % ring_.size()]);
            w.rx_->next_ = sent_;
        });
        return receivers_;
    }

    /// No more messages: receivers read what is kept, then get `errc::closed`.
    void close() noexcept {
        WakeList<RecvAwaiter> woken;
        std::lock_guard g(lock_);
        closed_ = true;
        woken = waiters_.take_all();
        woken.for_each([](RecvAwaiter& w) { w.err_ = make_error_code(errc::closed); });
    }

    /// Receivers alive now.
    std::size_t receivers() const noexcept {
        std::lock_guard g(lock_);
        return receivers_;
    }
    /// How many messages are kept.
    std::size_t capacity() const noexcept { return ring_.size(); }

private:
    // With the lock held: a message or an error for `r` (true), or nothing yet (false).
    bool take_locked(Receiver& r, std::optional<T>& got, std::error_code& err) {
        const std::uint64_t oldest = sent_ > ring_.size() ? sent_ - ring_.size() : 0;
        if (r.next_ < oldest) {
            r.missed_ = oldest - r.next_;
            r.next_ = oldest;
            err = make_error_code(errc::lagged);
            return true;
        }
        if (r.next_ < sent_) {
            got.emplace(*ring_[r.next_ % ring_.size()]);
            ++r.next_;
            // The receiver's batch is empty here (it is read first): copy what else is kept.
            for (; r.next_ < sent_ && r.ahead_.size() < kAhead; ++r.next_)
                r.ahead_.push_back(*ring_[r.next_ % ring_.size()]);
            return true;
        }
        if (closed_) {
            err = make_error_code(errc::closed);
            return true;
        }
        return false;
    }

    static constexpr std::size_t kAhead = 32; // messages a receive copies at most in one go
    mutable SpinLock lock_;
    std::vector<std::optional<T>> ring_;
    std::uint64_t sent_ = 0; // messages sent so far
    std::size_t receivers_ = 0;
    bool closed_ = false;
    WaitList<RecvAwaiter> waiters_{lock_};
};

} // namespace galay
