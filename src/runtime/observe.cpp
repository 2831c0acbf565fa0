// What a Scheduler does for its observers: counters sampled per turn, the stall detector, the
// task hooks (Observer in observe.hpp) and the paused clock. The plain run loop (scheduler.cpp)
// reaches the stall detector and the hooks only through one test of `observer_`.
#include "runtime/observe.hpp"

#include "driver/driver.hpp"
#include "galay/blocking.hpp"
#include "runtime/scheduler_access.hpp"
#include "runtime/task_snapshot.hpp"

#include <cstdio>

namespace galay::detail {

namespace {

metrics::TaskEvent event_of(const SpawnBase& t) noexcept {
    return {&t, t.where};
}

std::int64_t real_now_ns() noexcept {
    return Scheduler::real_now_ns();
}

} // namespace

void SchedulerCore::observe_options(const SchedulerOptions& o) {
    coarse_ns_.store(real_now_ns(), std::memory_order_relaxed);
    paused_ = o.paused_clock;
    if (paused_) {
        virtual_ns_ = real_now_ns();
        g_paused_clocks.fetch_add(1, std::memory_order_relaxed);
    }
    const std::int64_t stall =
        std::chrono::duration_cast<std::chrono::nanoseconds>(o.stall_threshold).count();
    if (stall <= 0 && o.hooks == nullptr) return;
    observer_ = std::make_unique<Observer>();
    observer_->stall_ns = stall > 0 ? stall : 0;
    observer_->on_stall = o.on_stall;
    observer_->hooks = o.hooks;
}

std::int64_t paused_now_ns() noexcept {
    Scheduler* s = Scheduler::current();
    if (s != nullptr && SchedulerAccess::core(*s).paused_)
        return SchedulerAccess::core(*s).virtual_ns_;
    return real_now_ns();
}

void SchedulerCore::publish_gauges() noexcept {
    counters_.ready_depth.set(ready_.size());
    counters_.timers_armed.set(timers_.size());
    counters_.pool_in_use.set(driver_->pool_buffers_in_use());
}

std::int64_t SchedulerCore::poll_counted(std::int64_t timeout_ns) {
    std::int64_t now = -1;
    if constexpr (!GALAY_METRICS) {
        driver_->poll(timeout_ns);
        if constexpr (GALAY_TASK_DUMP) {
            now = real_now_ns();
            coarse_ns_.store(now, std::memory_order_relaxed);
        }
        return now;
    }
    publish_gauges();
    // A turn's length is read from the clock this reads anyway for the task dumps' wait times,
    // and the due timers from the same read.
    if (timeout_ns == 0) {
        driver_->poll(0);
        if constexpr (GALAY_TASK_DUMP) {
            now = real_now_ns();
            turn_over_at(now);
        }
    } else {
        const std::int64_t t0 = real_now_ns();
        if constexpr (GALAY_TASK_DUMP)
            counters_.turn_took(t0 - coarse_ns_.load(std::memory_order_relaxed));
        driver_->poll(timeout_ns);
        const std::int64_t t1 = real_now_ns();
        counters_.busy_ns.add(static_cast<std::uint64_t>(t0 - mark_ns_));
        counters_.parked_ns.add(static_cast<std::uint64_t>(t1 - t0));
        mark_ns_ = t1;
        coarse_ns_.store(t1, std::memory_order_relaxed);
        now = t1;
    }
    counters_.turn_ended();
    return now;
}

void SchedulerCore::run_ready_observed() {
    Observer& o = *observer_;
    const metrics::TaskHooks* hooks = o.hooks;
    const bool timed = o.stall_ns > 0;
    const std::int64_t turn_start = timed ? real_now_ns() : 0;
    bool reported = false;
    for (std::coroutine_handle<> h : running_) {
        inline_completions_ = 0;
        o.running = nullptr;
        if (!o.suspended.empty()) {
            auto it = o.suspended.find(h.address());
            if (it != o.suspended.end()) {
                o.running = it->second;
                o.suspended.erase(it);
                if (hooks->on_resume != nullptr)
                    hooks->on_resume(hooks->context, event_of(*o.running));
            }
        }
        suspended_h_ = {};
        suspended_scope_ = nullptr;
        o.finished = nullptr;
        const std::int64_t t0 = timed ? real_now_ns() : 0;
        h.resume();
        // Which task ran: known before the resume, from its first resume, or from the leaf
        // operation it suspended on.
        SpawnBase* task = o.running;
        if (task == nullptr && suspended_scope_ != nullptr)
            task = static_cast<SpawnBase*>(suspended_scope_->task());
        if (suspended_h_ && task != nullptr && hooks != nullptr) {
            if (hooks->on_suspend != nullptr) hooks->on_suspend(hooks->context, event_of(*task));
            o.suspended[suspended_h_.address()] = task;
        }
        if (timed) {
            const std::int64_t ns = real_now_ns() - t0;
            if (ns >= o.stall_ns) {
                reported = true;
                // A task that finished in this resume is gone: report where it was spawned.
                Observer::report(*this, ns, task != nullptr ? task : o.finished, false);
            }
        }
    }
    running_.clear();
    o.running = nullptr;
    if (timed && !reported) {
        const std::int64_t ns = real_now_ns() - turn_start;
        if (ns >= o.stall_ns) Observer::report(*this, ns, nullptr, true);
    }
}

void paused_clock_hold(int delta) noexcept {
    Observer::hold(delta);
}

void Observer::hold(int delta) noexcept {
    Scheduler* s = Scheduler::current();
    if (s == nullptr) return;
    SchedulerCore& c = SchedulerAccess::core(*s);
    if (c.paused_)
        c.bounded_in_flight_ =
            static_cast<std::size_t>(static_cast<std::ptrdiff_t>(c.bounded_in_flight_) + delta);
}

void task_first_resume(SpawnBase& t) noexcept {
    Observer::first_resume(t);
}

void Observer::first_resume(SpawnBase& t) noexcept {
    if (t.sched == nullptr) return;
    SchedulerCore& s = SchedulerAccess::core(*t.sched);
    if (s.observer_ == nullptr) return;
    Observer& o = *s.observer_;
    o.running = &t;
    if (o.hooks != nullptr && o.hooks->on_first_resume != nullptr)
        o.hooks->on_first_resume(o.hooks->context, event_of(t));
}

void Observer::spawned(SchedulerCore& s, SpawnBase& t) noexcept {
    t.observed = true;
    const metrics::TaskHooks* h = s.observer_->hooks;
    if (h != nullptr && h->on_spawn != nullptr) h->on_spawn(h->context, event_of(t));
}

void Observer::exited(SchedulerCore& s, SpawnBase& t) noexcept {
    Observer& o = *s.observer_;
    if (o.running == &t) o.running = nullptr;
    o.finished = &t; // (only its address is compared and its location read, before the frame goes)
    o.finished_where = t.where;
    if (o.hooks != nullptr && o.hooks->on_exit != nullptr)
        o.hooks->on_exit(o.hooks->context, event_of(t));
}

void Observer::report(SchedulerCore& s, std::int64_t ns, const SpawnBase* task, bool whole_turn) {
    Observer& o = *s.observer_;
    s.counters_.stalls.add();
    metrics::StallReport r;
    r.duration = std::chrono::nanoseconds(ns);
    r.whole_turn = whole_turn;
    r.worker = s.worker_;
    if (task != nullptr) {
        r.located = true;
        r.spawned_at = task == o.finished ? o.finished_where : task->where;
        if (task != o.finished) r.backtrace = backtrace_text(task);
    }
    if (o.on_stall) {
        o.on_stall(r);
        return;
    }
    const std::int64_t now = Scheduler::real_now_ns();
    if (o.last_line_ns != 0 && now - o.last_line_ns < 1'000'000'000) return;
    o.last_line_ns = now;
    if (r.located)
        std::fprintf(stderr,
                     "galay: worker %d: a task spawned at %s:%u (%s) ran %.1f ms without "
                     "yielding%s%s\n",
                     r.worker, r.spawned_at.file_name(), static_cast<unsigned>(r.spawned_at.line()),
                     r.spawned_at.function_name(), static_cast<double>(ns) / 1e6,
                     r.backtrace.empty() ? "" : "; now in ", r.backtrace.c_str());
    else
        std::fprintf(stderr, "galay: worker %d: a loop turn took %.1f ms (%s)\n", r.worker,
                     static_cast<double>(ns) / 1e6,
                     whole_turn ? "many short resumes" : "a task outside spawn");
}

void Observer::clear(SchedulerCore& s) noexcept {
    if (s.observer_ == nullptr) return;
    s.observer_->suspended.clear();
    s.observer_->running = nullptr;
    s.observer_->finished = nullptr;
}

} // namespace galay::detail
