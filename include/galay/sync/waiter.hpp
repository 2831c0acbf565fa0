// galay/sync/waiter.hpp: write your own awaitable that another task completes, from any thread,
// with `.timeout(d)`, `.deadline(t)` and cancellation working as they do for every I/O operation.
// Every galay sync primitive (Mutex, Semaphore, Event, oneshot, Channel, TaskGroup) is built on it.
//
//     // One int handed from any thread to a waiting task: a oneshot written by hand.
//     class IntSlot {
//     public:
//         struct [[nodiscard]] Take : galay::Waiter<Take> { // what `co_await slot.take()` is
//             explicit Take(IntSlot& s) noexcept : slot(&s) {}
//             bool enqueue() {                   // false: finished at once; true: wait
//                 std::lock_guard g(slot->lock_);
//                 if (slot->value_) {
//                     got = std::exchange(slot->value_, std::nullopt);
//                     return false;
//                 }
//                 slot->takers_.push_back(*this);
//                 return true;
//             }
//             galay::Result<int> result() {     // what co_await returns
//                 if (auto s = wait_status(); !s) return std::unexpected(s.error());
//                 return *got;
//             }
//             IntSlot* slot;
//             std::optional<int> got;
//         };
//         Take take() noexcept { return Take(*this); }
//         void put(int v) {                      // any thread, with or without a scheduler
//             Take* t;
//             {
//                 std::lock_guard g(lock_);
//                 t = takers_.pop_front();       // the waiter is ours now: give it the value
//                 if (t != nullptr) t->got = v; else value_ = v;
//             }
//             if (t != nullptr) t->wake();       // resumes it on its own scheduler
//         }
//     private:
//         galay::SpinLock lock_;                 // guards value_ and takers_
//         std::optional<int> value_;
//         galay::WaitList<Take> takers_{lock_};
//     };
//
//     galay::Result<int> r = co_await slot.take().timeout(1s); // timed_out, operation_canceled
//
// The protocol, which makes a wake-up racing a cancellation or a deadline safe:
// - `enqueue()` runs when the task awaits. With the lock held it either finishes at once
//   (returns false) or puts the waiter on a `WaitList` guarded by that lock (returns true).
// - The completing side, with the lock held, takes the waiter off the list (`pop_front`,
//   `take_all`), gives it its result, releases the lock and calls `wake()` (exactly once).
// - A cancellation or a deadline takes the same lock and removes the waiter only if it is still
//   on the list. So exactly one of the two wins: a waiter popped by the completing side always
//   resumes with its result (it is never lost, e.g. a value handed to it, or a mutex passed to
//   it), and a withdrawn waiter leaves no trace in the list (`withdrawn()` runs then, with the lock
//   held, for primitives where that frees something for the next waiter).
// - `wake()` resumes the task on the scheduler it waits on: `schedule()` on the same thread,
//   `post()` from another thread. Nothing is allocated per wait: the waiter lives in the awaiting
//   coroutine's frame.
#pragma once

#include "galay/detail/cancel.hpp"
#include "galay/detail/in_place.hpp"
#include "galay/detail/intrusive_list.hpp"
#include "galay/detail/wait_desc.hpp"
#include "galay/error.hpp"
#include "galay/runtime.hpp"
#include "galay/time/timeout.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <mutex>
#include <thread>

namespace galay {

/// A test-and-test-and-set spin lock for the short critical sections of a wait list: spins with a
/// pause instruction, then yields the CPU, so a holder that was preempted is not spun against for
/// a whole time slice. BasicLockable (works with std::lock_guard).
class SpinLock {
public:
    /// Take the lock, spinning and then yielding while another thread holds it.
    void lock() noexcept {
        while (locked_.exchange(true, std::memory_order_acquire)) {
            unsigned spins = 0;
            while (locked_.load(std::memory_order_relaxed)) {
                if (++spins < kSpinsBeforeYield) {
                    pause();
                } else {
                    std::this_thread::yield();
                    spins = 0;
                }
            }
        }
    }
    /// Take the lock if it is free; never waits.
    bool try_lock() noexcept {
        return !locked_.load(std::memory_order_relaxed) &&
               !locked_.exchange(true, std::memory_order_acquire);
    }
    /// Release the lock.
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

private:
    static constexpr unsigned kSpinsBeforeYield = 64;
    static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }
    std::atomic<bool> locked_{false};
};

class WaiterBase;
template <class W>
class WaitList;
template <class W>
class WakeList;

namespace detail {

struct WaiterLinks {
    static WaiterBase*& next(WaiterBase& w) noexcept;
    static WaiterBase*& prev(WaiterBase& w) noexcept;
};
using WaiterChain = IntrusiveList<WaiterBase, WaiterLinks>;

/// The untyped part of a WaitList.
class WaitListBase {
public:
    explicit WaitListBase(SpinLock& lock) noexcept
        : lock_(&lock) {}
    WaitListBase(const WaitListBase&) = delete;
    WaitListBase& operator=(const WaitListBase&) = delete;

    bool empty() const noexcept { return waiters_.empty(); }
    /// Number of queued waiters (walks the list).
    std::size_t size() const noexcept { return waiters_.count(); }

protected:
    void push(WaiterBase& w);
    WaiterBase* first() const noexcept { return waiters_.front(); }
    WaiterBase* pop() noexcept;
    void pop_all(WaiterChain& out) noexcept;

private:
    friend class galay::WaiterBase;
    SpinLock* lock_;
    WaiterChain waiters_;
};

} // namespace detail

/// What every waiting awaitable is: a node of a WaitList, linked into its task's cancellation
/// scope while it waits, with an optional deadline on its scheduler's timer heap. Derive from
/// `Waiter<Derived>` (below) rather than from this.
class WaiterBase : public detail::Cancellable {
public:
    WaiterBase(const WaiterBase&) = delete;
    WaiterBase& operator=(const WaiterBase&) = delete;

    /// Resume the waiting task on its own scheduler (from any thread). Call it exactly once for a
    /// waiter you took off its list with `pop_front`/`take_all`, after releasing the list's lock.
    void wake() noexcept;

    /// The CancelScope asks the wait to stop (when_any loser, CancelSource, timeout()).
    void cancel() noexcept final;
    /// Task dumps: the wait list and the deadline (a primitive's waiter adds what it is).
    void describe(detail::WaitDesc& d) const noexcept override {
        d.what = "wait";
        d.object = list_;
        d.deadline_ns = timer_.deadline_ns;
    }

protected:
    WaiterBase() noexcept = default;
    /// Only before the awaitable is awaited: carries the deadline over.
    WaiterBase(WaiterBase&& o) noexcept { timer_.deadline_ns = o.timer_.deadline_ns; }
    /// A frame destroyed while its task waits (a scheduler shutting down) leaves the list.
    ~WaiterBase();

    /// How the wait ended: {} (finished at once, or woken by the completing side), or
    /// `std::errc::operation_canceled` / `std::errc::timed_out` (withdrawn: nothing was given
    /// to this waiter).
    Result<void> wait_status() const noexcept {
        if (outcome_ == Outcome::cancelled) return fail(ECANCELED);
        if (outcome_ == Outcome::timed_out) return fail(ETIMEDOUT);
        return {};
    }

    /// Called with the list's lock held when this waiter leaves its list without being woken
    /// (cancelled, timed out). Waiters it makes ready go into `wake_after`, woken once the lock
    /// is released. E.g. a semaphore's head waiter asking for 5 permits may be blocking one that
    /// asks for 1.
    virtual void withdrawn(WakeList<WaiterBase>& wake_after) noexcept;

    /// Leave the list if still on it (the lock is taken here). Returns whether it did; false when
    /// a wake-up is already on its way.
    bool withdraw() noexcept;
    /// For the destructor of a derived waiter whose `withdrawn()` must run when its frame is
    /// destroyed while it waits (the base destructor can only withdraw it without the override).
    void withdraw_if_destroyed_waiting() noexcept {
        // A frame destroyed while queued was not woken (nobody resumes a destroyed frame), so
        // only the waiting thread has written state_ since: no lock needed to read it here.
        if (state_ == State::queued) withdraw();
    }

    /// Arm a deadline (steady clock, ns; 0: none) for the next wait: `.timeout()`/`.deadline()` use
    /// it.
    void set_deadline_ns(std::int64_t ns) noexcept { timer_.deadline_ns = ns; }
    /// The rest of await_suspend once `enqueue()` queued the waiter: deadline and cancel scope.
    void suspended(detail::CancelScope* scope);
    /// From await_suspend: the task's scope is already cancelled, so the wait ends at once.
    void set_cancelled_at_once() noexcept { outcome_ = Outcome::cancelled; }
    /// From await_suspend: the coroutine that `wake()` resumes.
    void set_handle(std::coroutine_handle<> h) noexcept { handle_ = h; }
    /// The awaiting task's cancel scope (set before `enqueue()`; e.g. a Mutex notes its holder).
    detail::CancelScope* wait_scope() const noexcept { return wait_scope_; }
    /// From await_suspend: see wait_scope().
    void set_wait_scope(detail::CancelScope* scope) noexcept { wait_scope_ = scope; }
    /// Start of await_resume: stop the deadline, leave the cancel scope.
    void resumed() noexcept {
        if (timer_.armed()) disarm_deadline();
        detail::CancelScope::unlink(*this);
    }

private:
    friend class detail::WaitListBase;
    friend struct detail::WaiterLinks;
    enum class State : std::uint8_t { idle, queued, woken, aborted };
    enum class Outcome : std::uint8_t { ok, cancelled, timed_out };

    void abort(Outcome why) noexcept;
    static void on_deadline(detail::TimerNode* n);
    void disarm_deadline() noexcept; // (out of line: the timer heap is not user API)

    WaiterBase* prev_ = nullptr; // links in the wait list (guarded by its lock)
    WaiterBase* next_ = nullptr;
    detail::WaitListBase* list_ = nullptr; // set when queued, by the waiting thread
    Scheduler* sched_ = nullptr;           // the scheduler the task waits on
    detail::CancelScope* wait_scope_ = nullptr;
    std::coroutine_handle<> handle_;
    detail::TimerNode timer_; // deadline_ns == 0: none
    State state_ = State::idle;
    Outcome outcome_ = Outcome::ok;
};

/// CRTP base of a waiting awaitable. `Derived` provides:
///   bool enqueue();  // lock; finish at once (false) or push *this on a WaitList (true)
///   R result();      // the value of `co_await`; start from wait_status()
/// and gets `.timeout(d)`, `.deadline(t)`, cancellation and the awaitable interface.
template <class Derived>
class Waiter : public WaiterBase, public detail::AwaitedInPlace<Derived> {
public:
    /// Give up after `d`: the wait ends with `std::errc::timed_out` unless it was woken first.
    /// An empty `d` (`galay::no_timeout`) arms nothing.
    Derived&& timeout(Timeout d) && {
        if (d) set_deadline_ns(Scheduler::now_ns() + std::max<std::int64_t>(d.value().count(), 1));
        return static_cast<Derived&&>(*this);
    }
    /// Same, with an absolute steady-clock deadline.
    Derived&& deadline(std::chrono::steady_clock::time_point t) && {
        set_deadline_ns(std::max<std::int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count(), 1));
        return static_cast<Derived&&>(*this);
    }

    /// Awaiter protocol, called by `co_await`: never ready, await_suspend decides.
    bool await_ready() const noexcept { return false; }
    /// Awaiter protocol: fails at once in a cancelled task, else `enqueue()`, then arms the
    /// deadline and joins the task's cancel scope.
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        detail::CancelScope* scope = detail::scope_of(h);
        // A cancelled task's later waits fail at once, as its I/O operations do.
        if (scope != nullptr && scope->requested()) {
            set_cancelled_at_once();
            return false;
        }
        set_handle(h);
        set_wait_scope(scope);
        if (!static_cast<Derived*>(this)->enqueue()) return false; // no scheduler touched
        suspended(scope);
        return true;
    }
    /// Awaiter protocol: leaves the deadline and the cancel scope, returns `result()`.
    decltype(auto) await_resume() {
        resumed();
        return static_cast<Derived*>(this)->result();
    }

protected:
    Waiter() noexcept = default;
    /// Only before the awaitable is awaited (as an operation's return value).
    Waiter(Waiter&&) noexcept = default;
    ~Waiter() = default;
};

/// A FIFO of waiters of type `W`, guarded by the lock named at construction (which also guards
/// whatever they wait for). Every member is called with that lock held.
template <class W>
class WaitList : public detail::WaitListBase {
public:
    /// A list guarded by `lock`, which must outlive it.
    explicit WaitList(SpinLock& lock) noexcept
        : WaitListBase(lock) {}

    /// From `enqueue()`: the awaiting task queues itself (it must run on a scheduler).
    void push_back(W& w) { push(w); }
    /// The first waiter, still on the list, or null.
    W* front() const noexcept { return static_cast<W*>(first()); }
    /// Take the first waiter off the list, or null. It is yours: give it its result, release the
    /// lock, then `wake()` it. A cancellation or deadline can no longer withdraw it.
    W* pop_front() noexcept { return static_cast<W*>(pop()); }
    /// Take every waiter off the list, to wake them all once the lock is released.
    WakeList<W> take_all() noexcept {
        WakeList<W> out;
        pop_all(out.chain_);
        return out;
    }
};

/// Waiters taken off their list, woken together once the lock is released (by `wake_all()`, or
/// by the destructor: declare it before the lock guard and it runs after the unlock).
template <class W>
class WakeList {
public:
    WakeList() noexcept = default;
    /// Takes over the waiters of `o`.
    WakeList(WakeList&&) noexcept = default;
    /// Wakes its own waiters first, then takes over those of `o`.
    WakeList& operator=(WakeList&& o) noexcept {
        wake_all();
        chain_ = std::move(o.chain_);
        return *this;
    }
    ~WakeList() { wake_all(); }

    /// True when there is nobody to wake.
    bool empty() const noexcept { return chain_.empty(); }
    /// Add a waiter taken off its list with pop_front().
    void push_back(W& w) noexcept { chain_.push_back(w); }
    /// The waiters, in order, to give them their results before waking them.
    template <class F>
    void for_each(F&& f) {
        for (WaiterBase* w = chain_.front(); w != nullptr; w = detail::WaiterChain::next(*w))
            f(*static_cast<W*>(w));
    }
    /// Wake every waiter (the list's lock must not be held).
    void wake_all() noexcept {
        while (WaiterBase* w = chain_.pop_front())
            w->wake();
    }

private:
    friend class WaitList<W>;
    detail::WaiterChain chain_;
};

inline WaiterBase*& detail::WaiterLinks::next(WaiterBase& w) noexcept {
    return w.next_;
}
inline WaiterBase*& detail::WaiterLinks::prev(WaiterBase& w) noexcept {
    return w.prev_;
}

} // namespace galay
