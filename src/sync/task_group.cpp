#include "galay/sync/task_group.hpp"

#include <cstdio>
#include <cstdlib>

namespace galay {
namespace {

/// A tiny coroutine that `TaskGroup::cancel()` posts to a member's scheduler when it runs on
/// another thread: cancel scopes are single-threaded, so the request must be made there.
struct TriggerPromise;
struct Trigger {
    std::coroutine_handle<TriggerPromise> h;
};

struct TriggerPromise {
    TaskGroup::Member* target = nullptr; // nulled by the member when it finishes first
    Scheduler* sched = nullptr;
    std::coroutine_handle<TriggerPromise> next; // cancel()'s chain of triggers to post

    Trigger get_return_object() noexcept {
        return {std::coroutine_handle<TriggerPromise>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; } // frees itself when run
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }
};

/// Gives the coroutine its own promise.
struct ThisPromise {
    TriggerPromise* p = nullptr;
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<TriggerPromise> h) noexcept {
        p = &h.promise();
        return false;
    }
    TriggerPromise& await_resume() const noexcept { return *p; }
};

} // namespace
} // namespace galay

template <class... Args>
struct std::coroutine_traits<galay::Trigger, Args...> {
    using promise_type = galay::TriggerPromise;
};

namespace galay {

/// One running task of a group, in the frame of the coroutine that runs it.
struct TaskGroup::Member {
    explicit Member(TaskGroup& g)
        : group(&g)
        , sched(Scheduler::current()) {
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
    Scheduler* sched;
    detail::CancelScope scope; // the task's operations link here
    Member* prev = nullptr;    // in the group's member list (guarded by its lock)
    Member* next = nullptr;
    Member* cancel_next = nullptr;                 // cancel()'s chain of members on its own thread
    std::coroutine_handle<TriggerPromise> trigger; // posted here by a cancel() on another thread
    bool finished = false;
};

TaskGroup::Member*& TaskGroup::MemberLinks::next(Member& m) noexcept {
    return m.next;
}
TaskGroup::Member*& TaskGroup::MemberLinks::prev(Member& m) noexcept {
    return m.prev;
}

namespace {
Trigger run_trigger() {
    TriggerPromise& p = co_await ThisPromise{};
    if (TaskGroup::Member* m = p.target) {
        m->trigger = {};
        m->scope.request();
    }
}
} // namespace

Task<void> TaskGroup::Member::run(TaskGroup* g, Task<void> task) {
    Member self(*g);
    if (task.valid()) task.handle().promise().scope = &self.scope;
    std::exception_ptr error;
    try {
        co_await std::move(task);
    } catch (...) {
        error = std::current_exception();
    }
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
        if (m.trigger) m.trigger.promise().target = nullptr; // still queued on this thread
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
    Scheduler* here = Scheduler::current();
    Member* local = nullptr;
    std::coroutine_handle<TriggerPromise> remote;
    {
        std::lock_guard l(lock_);
        if (cancelled_) return;
        cancelled_ = true;
        for (Member* m = members_.front(); m != nullptr; m = decltype(members_)::next(*m)) {
            if (m->sched == here) {
                m->cancel_next = local;
                local = m;
                continue;
            }
            auto t = run_trigger().h;
            t.promise().target = m;
            t.promise().sched = m->sched;
            t.promise().next = remote;
            remote = t;
            m->trigger = t;
        }
    }
    // Members on this thread cannot finish while this runs (request() resumes nothing).
    for (Member* m = local; m != nullptr;) {
        Member* next = m->cancel_next;
        m->scope.request();
        m = next;
    }
    while (remote) {
        auto t = remote;
        remote = t.promise().next; // read before posting: once posted, it may run and end
        Scheduler* s = t.promise().sched;
        s->post(t);
    }
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
