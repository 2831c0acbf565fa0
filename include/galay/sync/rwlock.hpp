// galay/sync/rwlock.hpp: an async reader-writer lock for tasks on one or several threads.
//
//     galay::RwLock table_lock;
//     galay::Task<int> lookup() {
//         auto shared = co_await table_lock.read();   // Result<RwLock::Guard>: many readers
//         if (!shared) co_return -1;                  // cancelled, or .timeout(d) passed
//         co_return 1;
//     }
//     galay::Task<void> update() {
//         auto only = co_await table_lock.write().timeout(1s); // one writer, no readers
//         if (!only) co_return;
//     }
//
// Many readers or one writer. Waiting tasks are served in FIFO order: a writer that waits holds
// back the readers that come after it (no writer starves), and when the lock frees, the first
// waiter gets it, with every reader queued directly behind a reader. Hand-off, as in `Mutex`: a
// task that is woken already owns the lock. A wait is cancellable and takes `.timeout(d)` /
// `.deadline(t)`; a withdrawn writer at the head lets the readers behind it in. Any thread may
// unlock; the lock must outlive every wait on it.
#pragma once

#include "galay/sync/waiter.hpp"

#include <cstddef>
#include <utility>

namespace galay {

/// Many readers or one writer, FIFO and hand-off (see the top of this header).
class RwLock {
public:
    /// Owns a read or a write lock; unlocks it when destroyed. Move-only.
    class [[nodiscard]] Guard {
    public:
        Guard() noexcept = default;
        /// Adopts a lock of `l` already taken by the caller (`write`: exclusive).
        Guard(RwLock& l, bool write) noexcept
            : lock_(&l)
            , write_(write) {}
        /// Takes the ownership of `o`, which owns nothing after.
        Guard(Guard&& o) noexcept
            : lock_(std::exchange(o.lock_, nullptr))
            , write_(o.write_) {}
        /// Unlocks what it owns, then takes the ownership of `o`.
        Guard& operator=(Guard&& o) noexcept {
            if (this != &o) {
                unlock();
                lock_ = std::exchange(o.lock_, nullptr);
                write_ = o.write_;
            }
            return *this;
        }
        ~Guard() { unlock(); }
        /// True while it owns a lock.
        explicit operator bool() const noexcept { return lock_ != nullptr; }
        /// True for a write (exclusive) lock.
        bool is_write() const noexcept { return write_; }
        /// Unlock now (nothing if it owns nothing).
        void unlock() noexcept {
            if (lock_ == nullptr) return;
            RwLock* l = std::exchange(lock_, nullptr);
            if (write_)
                l->unlock_write();
            else
                l->unlock_read();
        }

    private:
        RwLock* lock_ = nullptr;
        bool write_ = false;
    };

    /// The awaitable of `read()` and `write()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] LockAwaiter : public Waiter<LockAwaiter> {
    public:
        /// A read (`write` false) or write lock of `l` (made by `RwLock::read`/`write`).
        LockAwaiter(RwLock& l, bool write) noexcept
            : lock_(&l)
            , write_(write) {}
        /// Only before it is awaited.
        LockAwaiter(LockAwaiter&& o) noexcept
            : Waiter<LockAwaiter>(std::move(o))
            , lock_(o.lock_)
            , write_(o.write_) {}
        ~LockAwaiter() { this->withdraw_if_destroyed_waiting(); }
        /// Waiter protocol: lock at once (false) or queue this waiter (true).
        bool enqueue();
        /// Waiter protocol: the value of `co_await`.
        Result<Guard> result() {
            if (auto s = wait_status(); !s) return std::unexpected(s.error());
            return Guard(*lock_, write_);
        }

    private:
        friend class RwLock;
        void withdrawn(WakeList<WaiterBase>& wake_after) noexcept override;
        RwLock* lock_;
        bool write_;
    };

    RwLock() = default;
    RwLock(const RwLock&) = delete;
    RwLock& operator=(const RwLock&) = delete;

    /// A shared lock, waiting in FIFO order: `Result<Guard>`.
    [[nodiscard]] LockAwaiter read() noexcept { return LockAwaiter(*this, false); }
    /// The exclusive lock, waiting in FIFO order: `Result<Guard>`.
    [[nodiscard]] LockAwaiter write() noexcept { return LockAwaiter(*this, true); }
    /// A shared lock if that needs no wait; an empty guard otherwise.
    [[nodiscard]] Guard try_read() noexcept;
    /// The exclusive lock if that needs no wait; an empty guard otherwise.
    [[nodiscard]] Guard try_write() noexcept;

    /// Readers holding it now.
    std::size_t readers() const noexcept;
    /// True while a writer holds it.
    bool is_write_locked() const noexcept;
    /// Tasks waiting for it now.
    std::size_t waiting() const noexcept;

private:
    void unlock_read() noexcept;
    void unlock_write() noexcept;
    template <class List>
    void grant_locked(List& out) noexcept;

    mutable SpinLock lock_;
    std::size_t readers_ = 0;
    bool writer_ = false;
    WaitList<LockAwaiter> waiters_{lock_};
};

} // namespace galay
