// galay/sync/oneshot.hpp: one value (or one exception) from one task to another, on any threads.
//
//     auto [tx, rx] = galay::oneshot<int>();
//     galay::spawn(worker(std::move(tx)));         // worker: tx.send(42) (or tx.set_exception)
//     galay::Result<int> v = co_await rx.recv().timeout(1s);
//
// `co_await rx` (or `rx.recv()`, which takes `.timeout(d)` / `.deadline(t)`) gives the value, or
// rethrows the exception the sender set, or fails with `galay::errc::closed` when the sender was
// destroyed without sending (or the value was already received). A wait that is cancelled or
// times out takes nothing: the value stays for a later `recv()`. `send` fails with
// `errc::closed` once the receiver is gone. The pair shares one small allocation (made here, not
// per wait).
#pragma once

#include "galay/sync/waiter.hpp"

#include <cassert>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>

namespace galay {

template <class T>
class OneshotSender;
template <class T>
class OneshotReceiver;

namespace detail {

/// What a oneshot carries: nothing yet (or nothing left), a value, or an exception.
template <class T>
using OneshotSlot = std::variant<std::monostate, T, std::exception_ptr>;

template <class T>
Result<T> take_oneshot_slot(OneshotSlot<T>& slot) {
    if (slot.index() == 2) std::rethrow_exception(std::get<2>(slot));
    if (slot.index() == 0) return fail(errc::closed);
    return Result<T>(std::move(std::get<1>(slot)));
}

} // namespace detail

/// The receiving end of a oneshot: one value (or exception) from its OneshotSender. Move-only.
template <class T>
class OneshotReceiver {
    static_assert(!std::is_void_v<T> && !std::is_reference_v<T>,
                  "oneshot<T>: T must be an object type (use std::monostate for a signal)");

public:
    /// The awaitable of `recv()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] RecvAwaiter : public Waiter<RecvAwaiter> {
    public:
        /// A receive on `r` (made by `recv()` or `co_await r`).
        explicit RecvAwaiter(OneshotReceiver& r) noexcept
            : rx_(&r) {}
        /// Waiter protocol: take the value at once (false) or queue this waiter (true).
        bool enqueue() {
            auto* st = rx_->state_.get();
            if (st == nullptr) return false; // a moved-from receiver: closed
            std::lock_guard g(st->lock);
            if (st->value.index() != 0 || st->sender_done) {
                got_ = std::exchange(st->value, std::monostate{});
                return false;
            }
            st->waiters.push_back(*this);
            return true;
        }
        /// Waiter protocol: the value of `co_await`; rethrows the sender's exception.
        Result<T> result() {
            if (auto s = this->wait_status(); !s) return std::unexpected(s.error());
            return detail::take_oneshot_slot(got_);
        }

    private:
        friend class OneshotSender<T>;
        OneshotReceiver* rx_;
        detail::OneshotSlot<T> got_; // handed over by the sender, or taken in enqueue()
    };

    OneshotReceiver() noexcept = default;
    /// Takes over the channel of `o`; a moved-from receiver's waits fail with `errc::closed`.
    OneshotReceiver(OneshotReceiver&&) noexcept = default;
    /// Drops its own channel, then takes over the one of `o`.
    OneshotReceiver& operator=(OneshotReceiver&& o) noexcept {
        if (this != &o) {
            drop();
            state_ = std::move(o.state_);
        }
        return *this;
    }
    ~OneshotReceiver() { drop(); }

    /// Wait for the value. `Result<T>`; rethrows the sender's exception.
    [[nodiscard]] RecvAwaiter recv() noexcept { return RecvAwaiter(*this); }
    /// `co_await rx` is `co_await rx.recv()`.
    [[nodiscard]] RecvAwaiter operator co_await() noexcept { return RecvAwaiter(*this); }

    /// The value if it has arrived: `std::errc::resource_unavailable_try_again` while it has not,
    /// `errc::closed` when it never will (or was taken).
    Result<T> try_recv() {
        if (!state_) return fail(errc::closed);
        detail::OneshotSlot<T> got;
        {
            std::lock_guard g(state_->lock);
            if (state_->value.index() == 0 && !state_->sender_done) return fail(EAGAIN);
            got = std::exchange(state_->value, std::monostate{});
        }
        return detail::take_oneshot_slot(got);
    }

private:
    template <class U>
    friend std::pair<OneshotSender<U>, OneshotReceiver<U>> oneshot();
    friend class OneshotSender<T>;

    struct State {
        SpinLock lock;
        detail::OneshotSlot<T> value; // sent and not yet received
        bool sender_done = false;     // sent, or the sender is gone: nothing more will come
        bool receiver_gone = false;
        WaitList<RecvAwaiter> waiters{lock};
    };

    explicit OneshotReceiver(std::shared_ptr<State> s) noexcept
        : state_(std::move(s)) {}
    void drop() noexcept {
        if (!state_) return;
        {
            std::lock_guard g(state_->lock);
            state_->receiver_gone = true;
        }
        state_.reset();
    }

    std::shared_ptr<State> state_;
};

/// The sending end of a oneshot: sends one value, or one exception, to its OneshotReceiver.
/// Move-only.
template <class T>
class OneshotSender {
public:
    OneshotSender() noexcept = default;
    /// Takes over the channel of `o`.
    OneshotSender(OneshotSender&&) noexcept = default;
    /// Closes its own channel (its receiver gets `errc::closed`), then takes over the one of `o`.
    OneshotSender& operator=(OneshotSender&& o) noexcept {
        if (this != &o) {
            finish(detail::OneshotSlot<T>{});
            state_ = std::move(o.state_);
        }
        return *this;
    }
    /// Destroyed without sending: the receiver gets `errc::closed`.
    ~OneshotSender() { finish(detail::OneshotSlot<T>{}); }

    /// Hand the value over (from any thread). The sender is spent afterwards. Fails with
    /// `errc::closed` when the receiver is gone or this sender already sent.
    Result<void> send(T value) {
        return finish(detail::OneshotSlot<T>(std::in_place_index<1>, std::move(value)));
    }
    /// Make the receiver's `co_await` rethrow `e`. Same rules as `send`.
    Result<void> set_exception(std::exception_ptr e) {
        assert(e != nullptr);
        return finish(detail::OneshotSlot<T>(std::in_place_index<2>, std::move(e)));
    }
    /// False once sent, or when the receiver is gone.
    bool can_send() const noexcept {
        if (!state_) return false;
        std::lock_guard g(state_->lock);
        return !state_->receiver_gone;
    }

private:
    using State = typename OneshotReceiver<T>::State;
    using RecvAwaiter = typename OneshotReceiver<T>::RecvAwaiter;
    template <class U>
    friend std::pair<OneshotSender<U>, OneshotReceiver<U>> oneshot();

    explicit OneshotSender(std::shared_ptr<State> s) noexcept
        : state_(std::move(s)) {}

    /// Deliver `slot` (empty: "closed") to the first waiting receive or leave it in the state;
    /// the other waits (several awaits of one receiver) end with `errc::closed`.
    Result<void> finish(detail::OneshotSlot<T> slot) {
        if (!state_) return fail(errc::closed);
        std::shared_ptr<State> st = std::move(state_);
        RecvAwaiter* first;
        WakeList<RecvAwaiter> rest;
        bool delivered;
        {
            std::lock_guard g(st->lock);
            st->sender_done = true;
            delivered = !st->receiver_gone;
            first = st->waiters.pop_front();
            if (first != nullptr)
                first->got_ = std::move(slot);
            else if (delivered)
                st->value = std::move(slot);
            rest = st->waiters.take_all();
        }
        if (first != nullptr) first->wake();
        rest.wake_all();
        if (!delivered) return fail(errc::closed);
        return {};
    }

    std::shared_ptr<State> state_;
};

/// A connected sender/receiver pair.
template <class T>
std::pair<OneshotSender<T>, OneshotReceiver<T>> oneshot() {
    auto st = std::make_shared<typename OneshotReceiver<T>::State>();
    return {OneshotSender<T>(st), OneshotReceiver<T>(st)};
}

} // namespace galay
