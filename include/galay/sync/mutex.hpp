// galay/sync/mutex.hpp: an async mutex for tasks on one or several threads.
//
//     galay::Mutex m;
//     galay::Task<void> add(int& counter) {
//         auto guard = co_await m.lock();          // Result<Mutex::Guard>
//         if (!guard) co_return;                   // cancelled, or .timeout(d) passed
//         ++counter;                               // unlocked when the guard goes away
//     }
//
// Waiting tasks are served in FIFO order, and `unlock()` hands the mutex straight to the first of
// them (it stays locked in between), so no task starves and none can barge in. A lock wait is
// cancellable and takes `.timeout(d)` / `.deadline(t)` like an I/O operation; a wait that is
// withdrawn leaves the queue, and a hand-off that wins the race against the deadline or the
// cancellation is kept (the task gets the guard). The waiting task sleeps on its scheduler; it is
// resumed there, from whichever thread unlocks. The mutex must outlive every wait on it.
#pragma once

#include "galay/sync/waiter.hpp"

#include <cstdint>
#include <utility>

namespace galay {

/// An async mutex for tasks on one or several threads, FIFO and hand-off (see the top of this
/// header).
class Mutex {
public:
    /// Owns the mutex; unlocks it when destroyed (or at `unlock()`). Move-only.
    class [[nodiscard]] Guard {
    public:
        Guard() noexcept = default;
        /// Adopts `m`, already locked by the caller.
        explicit Guard(Mutex& m) noexcept
            : mutex_(&m) {}
        /// Takes the ownership of `o`, which owns nothing after.
        Guard(Guard&& o) noexcept
            : mutex_(std::exchange(o.mutex_, nullptr)) {}
        /// Unlocks what it owns, then takes the ownership of `o`.
        Guard& operator=(Guard&& o) noexcept {
            if (this != &o) {
                unlock();
                mutex_ = std::exchange(o.mutex_, nullptr);
            }
            return *this;
        }
        ~Guard() { unlock(); }

        /// True while it owns the mutex.
        bool owns_lock() const noexcept { return mutex_ != nullptr; }
        /// `owns_lock()`.
        explicit operator bool() const noexcept { return owns_lock(); }
        /// Unlock now (nothing if it owns nothing).
        void unlock() noexcept {
            if (mutex_ != nullptr) std::exchange(mutex_, nullptr)->unlock();
        }
        /// Keep the mutex locked and forget it: the caller calls `Mutex::unlock()` later.
        Mutex* release() noexcept { return std::exchange(mutex_, nullptr); }

    private:
        Mutex* mutex_ = nullptr;
    };

    /// The awaitable of `lock()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] LockAwaiter : public Waiter<LockAwaiter> {
    public:
        /// A lock of `m` (made by `Mutex::lock`).
        explicit LockAwaiter(Mutex& m) noexcept
            : mutex_(&m) {}
        /// Waiter protocol: lock at once (false) or queue this waiter (true).
        bool enqueue();
        /// Task dumps: this mutex, its name and the task that holds it.
        void describe(detail::WaitDesc& d) const noexcept override;
        /// Waiter protocol: the value of `co_await`.
        Result<Guard> result() {
            if (auto s = wait_status(); !s) return std::unexpected(s.error());
            return Guard(*mutex_);
        }

    private:
        friend class Mutex;
        Mutex* mutex_;
        std::uint64_t task_ = 0; // the waiting task's id: the holder once it is handed the mutex
    };

    Mutex() = default;
    /// A mutex with a name that task dumps show (a string that outlives the mutex: a literal).
    explicit Mutex(const char* name) noexcept
        : name_(name) {}
    Mutex(const Mutex&) = delete;
    Mutex& operator=(const Mutex&) = delete;

    /// Lock, waiting in FIFO order. `co_await m.lock()` gives `Result<Guard>`.
    [[nodiscard]] LockAwaiter lock() noexcept { return LockAwaiter(*this); }
    /// Lock if that needs no wait (free and nobody queued); an empty guard otherwise.
    [[nodiscard]] Guard try_lock() noexcept;
    /// Unlock: hand the mutex to the first waiting task, or free it. From any thread.
    void unlock() noexcept;
    /// True while a task owns the mutex.
    bool is_locked() const noexcept;
    /// Tasks waiting for it now.
    std::size_t waiting() const noexcept;

private:
    mutable SpinLock lock_;
    bool locked_ = false;
    WaitList<LockAwaiter> waiters_{lock_};
    std::uint64_t holder_ = 0; // the holding task's id (0: unknown, e.g. try_lock, or none)
    const char* name_ = nullptr;
};

} // namespace galay
