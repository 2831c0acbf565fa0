// The stall detector, the task hooks and the paused clock of a Scheduler (observe.cpp): what
// scheduler.cpp calls only when SchedulerOptions asked for one of them.
#pragma once

#include "runtime/scheduler_core.hpp"

#include <coroutine>
#include <functional>
#include <unordered_map>

namespace galay::detail {

/// A scheduler's stall detector and hooks (SchedulerCore::observer_, null when neither is set).
struct Observer {
    std::int64_t stall_ns = 0; // 0: no stall detection
    std::function<void(const metrics::StallReport&)> on_stall;
    const metrics::TaskHooks* hooks = nullptr;
    std::int64_t last_line_ns = 0; // the default report's rate limit
    // The task running now, when known: set before a resume (from `suspended`) or by the task's
    // first resume.
    SpawnBase* running = nullptr;
    // Coroutines suspended on a leaf operation -> their task (hooks only): names the task of the
    // next resume. Entries go when the coroutine is resumed, or at teardown.
    std::unordered_map<void*, SpawnBase*> suspended;
    // Where the last task to finish was spawned (a stall in a resume that ended the task).
    std::source_location finished_where;
    SpawnBase* finished = nullptr;

    static void first_resume(SpawnBase& t) noexcept;
    static void hold(int delta) noexcept; // (paused_clock_hold)
    static void spawned(SchedulerCore& s, SpawnBase& t) noexcept;
    static void exited(SchedulerCore& s, SpawnBase& t) noexcept;
    static void report(SchedulerCore& s, std::int64_t ns, const SpawnBase* task, bool whole_turn);
    static void clear(SchedulerCore& s) noexcept;
};

inline void observe_spawn(SchedulerCore& s, SpawnBase& t) noexcept {
    Observer::spawned(s, t);
}
inline void observe_exit(SchedulerCore& s, SpawnBase& t) noexcept {
    Observer::exited(s, t);
}

} // namespace galay::detail
