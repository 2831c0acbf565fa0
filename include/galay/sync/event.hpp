// galay/sync/event.hpp: tasks waiting for something to happen, signalled from any thread.
//
//     galay::Event ready;
//     auto ok = co_await ready.wait().timeout(5s); // a task waits (5 s at most)...
//     ready.set();                         // ...until another task, or a plain thread, sets it
//
// Two shapes in one type:
// - a latch: `set()` releases every waiter and every later `wait()` until `reset()`;
// - a notifier: `notify_one()` releases the first waiter, or, when nobody waits, lets the next
//   `wait()` through once (the notification is kept, never lost); `notify_all()` releases every
//   task waiting now and nobody later.
// Waiters are released in FIFO order. A wait is cancellable and takes `.timeout(d)` /
// `.deadline(t)`; one that is withdrawn leaves the queue. A `notify_one()` that reached a waiter
// racing its deadline is kept by that waiter (it returns success), so it is never lost either.
#pragma once

#include "galay/sync/waiter.hpp"

namespace galay {

/// A latch and a notifier in one, for tasks waiting for something to happen (see the top of this
/// header).
class Event {
public:
    /// The awaitable of `wait()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] WaitAwaiter : public Waiter<WaitAwaiter> {
    public:
        /// A wait on `e` (made by `Event::wait`).
        explicit WaitAwaiter(Event& e) noexcept
            : event_(&e) {}
        /// Waiter protocol: pass at once (false) or queue this waiter (true).
        bool enqueue();
        /// Waiter protocol: the value of `co_await`.
        Result<void> result() const noexcept { return wait_status(); }
        /// Task dumps: this event.
        void describe(detail::WaitDesc& d) const noexcept override {
            WaiterBase::describe(d);
            d.what = "event";
            d.object = event_;
            d.object_name = event_->name_;
        }

    private:
        Event* event_;
    };

    /// An event, set or not.
    explicit Event(bool set = false) noexcept
        : set_(set) {}
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    /// A name that task dumps show with the tasks waiting on this event (a string that outlives
    /// it: a literal). Before tasks wait on it.
    void set_name(const char* name) noexcept { name_ = name; }
    /// The name given by set_name (null: none).
    const char* name() const noexcept { return name_; }

    /// Wait until the event is set or notified. `Result<void>`.
    [[nodiscard]] WaitAwaiter wait() noexcept { return WaitAwaiter(*this); }

    /// Set the event: wake every waiter; later waits pass at once until `reset()`.
    void set() noexcept;
    /// Clear it (a pending `notify_one` permit is kept).
    void reset() noexcept;
    /// True while the event is set.
    bool is_set() const noexcept;

    /// Wake the first waiter; with nobody waiting, the next `wait()` passes once.
    void notify_one() noexcept;
    /// Wake every task waiting now; later waits still wait.
    void notify_all() noexcept;
    /// Tasks waiting now.
    std::size_t waiting() const noexcept;

private:
    mutable SpinLock lock_;
    bool set_;
    bool permit_ = false;        // a notify_one that found nobody waiting
    const char* name_ = nullptr; // set_name (read only by task dumps)
    WaitList<WaitAwaiter> waiters_{lock_};
};

} // namespace galay
