// galay/sync/latch.hpp: a count-down latch and a reusable barrier for tasks on any workers.
//
//     galay::Latch done(3);                        // three parts to wait for
//     for (unsigned i = 0; i < 3; ++i)
//         rt.spawn_on(i % rt.size(), part(i, done)); // each calls done.count_down() when finished
//     auto all = co_await done.wait().timeout(5s);  // Result<void>: timed_out, operation_canceled
//
//     galay::Barrier step(2);                       // two tasks meet at every step
//     auto met = co_await step.arrive_and_wait();   // Result<void>, once both have arrived
//
// `Latch`: `count_down(n)` from any thread (a task, a worker, a plain thread) lowers the count;
// when it reaches zero every waiter is released and later waits pass at once. It never goes up
// again. `wait()` is cancellable and takes `.timeout(d)` / `.deadline(t)`.
//
// `Barrier`: `arrive_and_wait()` counts the task in and waits until `count` tasks have arrived;
// the last one to arrive releases the others and the barrier starts over for the next phase.
// A wait that is cancelled or times out has still arrived (its arrival cannot be taken back,
// as with std::barrier); `arrive_and_drop()` arrives and leaves for good, lowering the count of
// the phases after. Both are cross-worker safe like every galay sync primitive (a spin lock and
// a wait list, galay/sync/waiter.hpp); nothing is allocated per wait.
#pragma once

#include "galay/sync/waiter.hpp"

#include <cstddef>
#include <cstdint>

namespace galay {

/// A count-down latch for tasks (see the top of this header).
class Latch {
public:
    /// The awaitable of `wait()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] WaitAwaiter : public Waiter<WaitAwaiter> {
    public:
        /// A wait on `l` (made by `Latch::wait`).
        explicit WaitAwaiter(Latch& l) noexcept
            : latch_(&l) {}
        /// Waiter protocol: pass at once at zero (false) or queue this waiter (true).
        bool enqueue();
        /// Waiter protocol: the value of `co_await`.
        Result<void> result() const noexcept { return wait_status(); }

    private:
        Latch* latch_;
    };

    /// A latch that opens after `count` count-downs (at once for 0).
    explicit Latch(std::size_t count) noexcept
        : count_(count) {}
    Latch(const Latch&) = delete;
    Latch& operator=(const Latch&) = delete;

    /// Lower the count by `n` (at most to zero); at zero, release every waiter. Any thread.
    void count_down(std::size_t n = 1) noexcept;
    /// True once the count is zero.
    bool try_wait() const noexcept;
    /// The count now.
    std::size_t count() const noexcept;
    /// Wait until the count is zero. `Result<void>`.
    [[nodiscard]] WaitAwaiter wait() noexcept { return WaitAwaiter(*this); }
    /// `count_down(n)`, then `wait()`.
    [[nodiscard]] WaitAwaiter arrive_and_wait(std::size_t n = 1) noexcept {
        count_down(n);
        return wait();
    }

private:
    mutable SpinLock lock_;
    std::size_t count_;
    WaitList<WaitAwaiter> waiters_{lock_};
};

/// A reusable barrier for a fixed number of tasks (see the top of this header).
class Barrier {
public:
    /// The awaitable of `arrive_and_wait()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] ArriveAwaiter : public Waiter<ArriveAwaiter> {
    public:
        /// An arrival at `b` (made by `Barrier::arrive_and_wait`).
        explicit ArriveAwaiter(Barrier& b) noexcept
            : barrier_(&b) {}
        /// Waiter protocol: arrive; the last one passes at once (false), the others wait (true).
        bool enqueue();
        /// Waiter protocol: the value of `co_await`.
        Result<void> result() const noexcept { return wait_status(); }

    private:
        Barrier* barrier_;
    };

    /// A barrier for `count` tasks per phase (at least 1).
    explicit Barrier(std::size_t count) noexcept
        : count_(count > 0 ? count : 1)
        , left_(count_) {}
    Barrier(const Barrier&) = delete;
    Barrier& operator=(const Barrier&) = delete;

    /// Arrive and wait for the others of this phase. `Result<void>`.
    [[nodiscard]] ArriveAwaiter arrive_and_wait() noexcept { return ArriveAwaiter(*this); }
    /// Arrive without waiting, and take no part in later phases (any thread).
    void arrive_and_drop() noexcept;
    /// Phases completed so far.
    std::uint64_t phase() const noexcept;

private:
    // With lock_ held: one arrival; the last one of the phase opens it (its waiters into `woken`).
    bool arrive(WakeList<ArriveAwaiter>& woken) noexcept;

    mutable SpinLock lock_;
    std::size_t count_; // tasks per phase
    std::size_t left_;  // still to arrive in this phase
    std::uint64_t phase_ = 0;
    WaitList<ArriveAwaiter> waiters_{lock_};
};

} // namespace galay
