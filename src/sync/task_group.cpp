#include "galay/sync/task_group.hpp"

#include "galay/sync/event.hpp"

#include <cstdio>
#include <cstdlib>

namespace galay {

/// One running task of a group, in the frame of the coroutine that runs it.
struct TaskGroup::Member {
    explicit Member(TaskGroup& g)
        : group(&g) {
        bool cancel_now;
        {
            std::lock_guard l(g.lock_);
            g.members_.push_back(*this);
            cancel_now = g.cancelled_;
        }
        if (cancel_now) scope.request();
    }
    Member(const Member&) = delete;
    ~Member() {
        if (!finished) group->finish(*this, nullptr); // frame destroyed before the task ended
    }

    static Task<void> run(TaskGroup* g, Task<void> task);

    TaskGroup* group;
    detail::CancelScope scope; // the task's operations link here
    // Set by cancel() (any thread) or when the task ends. A cancel scope is single-threaded, so
    // a listener on the member's own thread waits for it and makes the request there. While the
    // listener waits the member cannot finish, so a cancel() that finds it waiting wakes a live
    // task on a live scheduler.
    Event stop;
    bool task_done = false; // the member's thread only
    Member* prev = nullptr; // in the group's member list (guarded by its lock)
    Member* next = nullptr;
    bool finished = false;
};

TaskGroup::Member*& TaskGroup::MemberLinks::next(Member& m) noexcept {
    return m.next;
}
TaskGroup::Member*& TaskGroup::MemberLinks::prev(Member& m) noexcept {
    return m.prev;
}

Task<void> TaskGroup::Member::run(TaskGroup* g, Task<void> task) {
    Member self(*g);
    if (task.valid()) task.handle().promise().scope = &self.scope;
    std::exception_ptr error;
    auto body = [&]() -> Task<void> {
        try {
            co_await std::move(task);
        } catch (...) {
            error = std::current_exception();
        }
        self.task_done = true;
        self.stop.set();
    };
    auto listen = [&]() -> Task<void> {
        (void)co_await self.stop.wait();
        if (!self.task_done) self.scope.request();
    };
    co_await when_all(body(), listen());
    g->finish(self, std::move(error));
}

TaskGroup::~TaskGroup() {
    std::size_t running;
    {
        std::lock_guard l(lock_);
        running = running_;
    }
    if (running != 0) {
        std::fprintf(stderr,
                     "galay: TaskGroup destroyed with %zu task(s) running (co_await "
                     "group.wait() before it goes away)\n",
                     running);
        std::abort();
    }
    if (error_) report_unhandled_exception(error_);
}

void TaskGroup::spawn(Task<void> task) {
    Scheduler& s = current_scheduler();
    Task<void> member = Member::run(this, std::move(task));
    {
        std::lock_guard l(lock_);
        ++running_; // counted now, so a wait() right after this sees it
    }
    try {
        s.spawn(std::move(member));
    } catch (...) {
        // Never started: nothing of it ran, so it only has to be uncounted.
        WakeList<WaitAwaiter> woken;
        std::lock_guard l(lock_);
        if (--running_ == 0) woken = waiters_.take_all();
        throw;
    }
}

void TaskGroup::finish(Member& m, std::exception_ptr error) noexcept {
    WakeList<WaitAwaiter> woken; // woken after the lock below is released
    std::exception_ptr extra;
    {
        std::lock_guard l(lock_);
        m.finished = true;
        members_.remove(m);
        if (error) {
            if (!error_)
                error_ = std::move(error);
            else
                extra = std::move(error);
        }
        if (--running_ == 0) woken = waiters_.take_all();
    }
    if (extra) report_unhandled_exception(extra);
}

void TaskGroup::cancel() noexcept {
    std::lock_guard l(lock_);
    if (cancelled_) return;
    cancelled_ = true;
    // Under the group lock: a member cannot finish meanwhile (finish() takes it), so each one is
    // alive while its listener is woken. (Event::set wakes after its own lock is released.)
    for (Member* m = members_.front(); m != nullptr; m = decltype(members_)::next(*m))
        m->stop.set();
}

bool TaskGroup::cancelled() const noexcept {
    std::lock_guard l(lock_);
    return cancelled_;
}

std::size_t TaskGroup::size() const noexcept {
    std::lock_guard l(lock_);
    return running_;
}

bool TaskGroup::WaitAwaiter::enqueue() {
    std::lock_guard l(group_->lock_);
    if (group_->running_ == 0) return false;
    group_->waiters_.push_back(*this);
    return true;
}

Result<void> TaskGroup::WaitAwaiter::result() {
    if (auto s = wait_status(); !s) return s;
    std::exception_ptr e;
    {
        std::lock_guard l(group_->lock_);
        e = std::exchange(group_->error_, nullptr);
    }
    if (e) std::rethrow_exception(e);
    return {};
}

} // namespace galay
