// galay/sync/semaphore.hpp: a counting semaphore for tasks on one or several threads.
//
//     galay::Semaphore slots(8);                   // at most 8 requests in flight
//     galay::Task<void> request() {
//         auto got = co_await slots.acquire().timeout(1s);
//         if (!got) co_return;                      // busy, or cancelled
//         ... ;
//         slots.release();
//     }
//
// `acquire(n)` waits until n permits are free; waiters are served in FIFO order (a large request
// at the head is not overtaken by small ones behind it, so it cannot starve). Waits are
// cancellable and take `.timeout(d)` / `.deadline(t)`; a withdrawn wait holds no permit and leaves
// the queue (and the waiters it was holding back are served). `release(n)` works from any thread.
#pragma once

#include "galay/sync/waiter.hpp"

#include <cstddef>

namespace galay {

/// A counting semaphore for tasks on one or several threads, FIFO (see the top of this header).
class Semaphore {
public:
    /// The awaitable of `acquire(n)`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] AcquireAwaiter : public Waiter<AcquireAwaiter> {
    public:
        /// An acquisition of `n` permits of `s` (made by `Semaphore::acquire`).
        AcquireAwaiter(Semaphore& s, std::size_t n) noexcept
            : sem_(&s)
            , need_(n) {}
        /// Only before it is awaited.
        AcquireAwaiter(AcquireAwaiter&&) noexcept = default;
        ~AcquireAwaiter() { withdraw_if_destroyed_waiting(); } // withdrawn() runs while whole
        /// Waiter protocol: take the permits at once (false) or queue this waiter (true).
        bool enqueue();
        /// Waiter protocol: the value of `co_await`.
        Result<void> result() const noexcept { return wait_status(); }

    private:
        friend class Semaphore;
        void withdrawn(WakeList<WaiterBase>& wake_after) noexcept override;
        Semaphore* sem_;
        std::size_t need_;
    };

    /// A semaphore with `permits` free permits.
    explicit Semaphore(std::size_t permits) noexcept
        : permits_(permits) {}
    Semaphore(const Semaphore&) = delete;
    Semaphore& operator=(const Semaphore&) = delete;

    /// Take `n` permits, waiting (FIFO) until they are free. `Result<void>`.
    [[nodiscard]] AcquireAwaiter acquire(std::size_t n = 1) noexcept {
        return AcquireAwaiter(*this, n);
    }
    /// Take `n` permits if they are free and nobody waits; returns whether it did.
    [[nodiscard]] bool try_acquire(std::size_t n = 1) noexcept;
    /// Give back `n` permits (any thread); wakes the waiters they satisfy.
    void release(std::size_t n = 1) noexcept;
    /// Free permits now.
    std::size_t available() const noexcept;
    /// Tasks waiting for permits now.
    std::size_t waiting() const noexcept;

private:
    // With lock_ held: serve the waiters at the head that the free permits satisfy.
    void grant(WakeList<WaiterBase>& woken) noexcept;

    mutable SpinLock lock_;
    std::size_t permits_;
    WaitList<AcquireAwaiter> waiters_{lock_};
};

} // namespace galay
