// galay/sync/watch.hpp: the latest value of something, and a wake-up when it changes.
//
//     galay::Watch<int> config(1);                 // the initial value
//     galay::Watch<int>::Receiver rx = config.subscribe();
//     config.send(2);                              // any thread; never waits
//     auto changed = co_await rx.changed().timeout(5s); // Result<void>: a value it has not seen
//     int now = rx.borrow();                       // the latest value; marks it seen
//
// Only the latest value is kept: a receiver that is slow skips the values in between (it never
// sees a stale one after a newer one). `changed()` passes at once when a value was sent since the
// receiver last called `borrow()` (or since it subscribed), else waits for the next `send`; it is
// cancellable, takes `.timeout(d)` / `.deadline(t)` and fails with `errc::closed` after `close()`
// once the receiver has seen the last value. Senders and receivers may be on any threads; the
// Watch must outlive its receivers. `borrow()` copies the value under the lock.
#pragma once

#include "galay/sync/waiter.hpp"

#include <cstdint>
#include <utility>

namespace galay {

/// A single latest value with change notification (see the top of this header).
template <class T>
class Watch {
public:
    class Receiver;

    /// The awaitable of `Receiver::changed()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] ChangedAwaiter : public Waiter<ChangedAwaiter> {
    public:
        /// A wait for `r` (made by `Receiver::changed`).
        explicit ChangedAwaiter(Receiver& r) noexcept
            : rx_(&r) {}
        /// Only before it is awaited.
        ChangedAwaiter(ChangedAwaiter&& o) noexcept
            : Waiter<ChangedAwaiter>(std::move(o))
            , rx_(o.rx_) {}
        /// Waiter protocol: pass at once on an unseen value or a close (false), or queue.
        bool enqueue() {
            Watch& w = *rx_->watch_;
            std::lock_guard g(w.lock_);
            if (w.version_ != rx_->seen_) return false;
            if (w.closed_) {
                closed_ = true;
                return false;
            }
            w.waiters_.push_back(*this);
            return true;
        }
        /// Waiter protocol: {} when there is a value it has not borrowed yet.
        Result<void> result() const noexcept {
            if (auto s = this->wait_status(); !s) return s;
            if (closed_) return fail(errc::closed);
            return {};
        }

    private:
        friend class Watch;
        Receiver* rx_;
        bool closed_ = false;
    };

    /// One observer of the value. Move-only.
    class Receiver {
    public:
        /// Takes over the position of `o` (only while no recv/changed of `o` is in flight).
        Receiver(Receiver&& o) noexcept
            : watch_(o.watch_)
            , seen_(o.seen_) {}
        Receiver& operator=(Receiver&&) = delete;
        Receiver(const Receiver&) = delete;
        ~Receiver() = default;

        /// Wait until a value this receiver has not borrowed is there (`Result<void>`).
        ChangedAwaiter changed() noexcept { return ChangedAwaiter(*this); }
        /// The latest value (a copy); it counts as seen from now on.
        T borrow() {
            std::lock_guard g(watch_->lock_);
            seen_ = watch_->version_;
            return watch_->value_;
        }
        /// True when a value was sent since the last borrow().
        bool has_changed() const noexcept {
            std::lock_guard g(watch_->lock_);
            return watch_->version_ != seen_;
        }

    private:
        friend class Watch;
        Receiver(Watch& w, std::uint64_t seen) noexcept
            : watch_(&w)
            , seen_(seen) {}
        Watch* watch_;
        std::uint64_t seen_; // the version last borrowed (watch_ lock)
    };

    /// A watch holding `initial`.
    explicit Watch(T initial = T{})
        : value_(std::move(initial)) {}
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

    /// A receiver that has seen the current value.
    Receiver subscribe() {
        std::lock_guard g(lock_);
        return Receiver(*this, version_);
    }
    /// Replace the value and wake every receiver waiting in changed() (from any thread). Fails
    /// with `errc::closed` after close().
    Result<void> send(T v) {
        WakeList<ChangedAwaiter> woken; // woken after the lock below is released
        std::lock_guard g(lock_);
        if (closed_) return fail(errc::closed);
        value_ = std::move(v);
        ++version_;
        woken = waiters_.take_all();
        return {};
    }
    /// The latest value (a copy), without a receiver.
    T get() const {
        std::lock_guard g(lock_);
        return value_;
    }
    /// No more values: waiting and later changed() fail with `errc::closed` once seen.
    void close() noexcept {
        WakeList<ChangedAwaiter> woken;
        std::lock_guard g(lock_);
        closed_ = true;
        woken = waiters_.take_all();
        woken.for_each([](ChangedAwaiter& w) { w.closed_ = true; });
    }

private:
    mutable SpinLock lock_;
    T value_;
    std::uint64_t version_ = 0;
    bool closed_ = false;
    WaitList<ChangedAwaiter> waiters_{lock_};
};

} // namespace galay
