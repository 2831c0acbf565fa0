// galay/sync/task_group.hpp: spawn tasks into a scope, await them all, cancel them all.
//
//     galay::TaskGroup connections;
//     for (;;) {                                          // a server
//         auto conn = co_await listener.accept();
//         if (!conn) break;
//         connections.spawn(serve(std::move(*conn)));
//     }
//     // shutdown: give the connections 5 s to finish, then cancel what is left and wait for it
//     auto done = co_await connections.wait().timeout(5s);
//     if (!done) {
//         connections.cancel();
//         (void)co_await connections.wait();
//     }
//
// - `spawn(task)` starts the task detached on the current thread's scheduler (it runs
//   alongside the spawner, like `galay::spawn`) and counts it in the group. Tasks may be spawned
//   into one group from several threads; each runs on the thread that spawned it.
// - `wait()` (from any task, on any thread) resumes when no task of the group is running. It
//   takes `.timeout(d)` / `.deadline(t)` and is cancellable (`Result<void>`). If a task threw, the
//   first such exception is rethrown by the `wait()` that sees the group empty (later ones go to
//   the unhandled-exception handler).
// - `cancel()` (from any thread) cancels every task of the group the way `when_any` cancels a
//   loser: whatever each task waits on (I/O, sleep, a lock, a channel) fails with
//   `operation_canceled`, and later operations of those tasks fail at once. A group stays
//   cancelled: tasks spawned into it afterwards start cancelled.
// - The group must outlive its tasks: destroying it with tasks running ends the program with a
//   message. The schedulers its tasks run on must outlive the `wait()` that drains it.
#pragma once

#include "galay/sync/waiter.hpp"
#include "galay/task.hpp"

#include <cstddef>
#include <exception>

namespace galay {

/// Tasks started together, waited for and cancelled together (see the top of this header).
class TaskGroup {
public:
    /// The awaitable of `wait()`. Takes `.timeout(d)` / `.deadline(t)`.
    class [[nodiscard]] WaitAwaiter : public Waiter<WaitAwaiter> {
    public:
        /// A wait for `g` (made by `TaskGroup::wait`).
        explicit WaitAwaiter(TaskGroup& g) noexcept
            : group_(&g) {}
        /// Waiter protocol: pass at once when no task runs (false) or queue this waiter (true).
        bool enqueue();
        /// Rethrows the first exception of a task of the group, once.
        Result<void> result();

    private:
        TaskGroup* group_;
    };

    TaskGroup() = default;
    TaskGroup(const TaskGroup&) = delete;
    TaskGroup& operator=(const TaskGroup&) = delete;
    ~TaskGroup();

    /// Start `task` on the current scheduler as a member of the group.
    void spawn(Task<void> task);
    /// Wait until no task of the group is running. `Result<void>`.
    [[nodiscard]] WaitAwaiter wait() noexcept { return WaitAwaiter(*this); }
    /// Cancel every task of the group, now and later. Any thread.
    void cancel() noexcept;
    /// True once `cancel()` has been called.
    bool cancelled() const noexcept;
    /// Tasks of the group still running.
    std::size_t size() const noexcept;

    struct Member; // one per running task, in that task's frame

private:
    friend struct Member;
    void finish(Member& m, std::exception_ptr error) noexcept;

    mutable SpinLock lock_;
    std::size_t running_ = 0;
    bool cancelled_ = false;
    std::exception_ptr error_; // the first exception of a task, for wait() to rethrow
    struct MemberLinks {
        static Member*& next(Member& m) noexcept;
        static Member*& prev(Member& m) noexcept;
    };
    detail::IntrusiveList<Member, MemberLinks> members_; // started and not finished
    WaitList<WaitAwaiter> waiters_{lock_};
};

} // namespace galay
