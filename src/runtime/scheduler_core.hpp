// What a Scheduler is behind its public face (galay/scheduler.hpp): its driver, its ready queue
// and run loop, its timers, the tasks spawned on it, the queue other threads post to, its
// counters and observers. Only src/ sees this type: the installed headers name it once, as the
// pointer a Scheduler holds, so that none of this is API and a field added here (a task dump's
// bookkeeping, say) recompiles the library alone. The hot paths reach it without a call through
// the inline functions of SchedulerAccess (scheduler_access.hpp).
#pragma once

#include "galay/scheduler.hpp"
#include "runtime/timer_heap.hpp"
#include "runtime/worker_counters.hpp"

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace galay::detail {

class Driver;
class RemoteQueue;
struct Observer;
struct SpawnLinks { // a scheduler's list of its spawned tasks (detail/intrusive_list.hpp)
    static SpawnBase*& next(SpawnBase& t) noexcept { return t.next; }
    static SpawnBase*& prev(SpawnBase& t) noexcept { return t.prev; }
};

class SchedulerCore {
public:
    static constexpr std::size_t kFairCheckEvery = 8;    // handlers between clock reads
    static constexpr std::int64_t kFairFlushNs = 50'000; // longest a reply waits in a batch
    /// While tasks keep waking tasks of this scheduler, the driver is polled (a system call)
    /// after at most this many resumes, not after every batch.
    static constexpr std::size_t kPollEvery = 64;

    SchedulerCore(Scheduler& self, const SchedulerOptions& options);
    ~SchedulerCore();
    /// What ~Scheduler does while the Scheduler is still whole: teardown() (unless a Runtime
    /// worker did it on its thread), the posts in flight waited for and dropped, the driver
    /// destroyed.
    void shut_down() noexcept;
    SchedulerCore(const SchedulerCore&) = delete;
    SchedulerCore& operator=(const SchedulerCore&) = delete;

    /// Make `s` this thread's current scheduler; returns the previous one.
    static Scheduler* exchange_current(Scheduler* s) noexcept;

    void schedule(std::coroutine_handle<> h) { ready_.push_back(h); }
    void schedule_after_poll(std::coroutine_handle<> h) {
        ready_.push_back(h);
        resumed_since_poll_ = kPollEvery;
    }
    /// Run `call` on this scheduler's thread (see detail::RemoteCall). Safe from any thread.
    void post(RemoteCall& call);
    void post(std::coroutine_handle<> h);

    /// Run until `remaining` is 0 or, when deadline_ns >= 0, the steady clock reaches it.
    void run_until_done(const std::size_t& remaining, std::int64_t deadline_ns = -1);
    void start_spawned(SpawnBase& t);
    void adopt(SpawnBase& t);
    void leave(SpawnBase& t) noexcept;
    /// Cancel every task; tasks started from now on are cancelled at once.
    void cancel_all() noexcept;
    /// On this scheduler's thread: cancel and finish every kernel op, destroy every task left.
    void teardown() noexcept;
    /// Drop what is queued from other threads (coroutines are not resumed; calls are told).
    void drop_remote() noexcept;

    // --- the run loop (scheduler.cpp) ---
    void run_ready();
    void run_ready_fairly();
    /// Fire the due timers; `now`: the real clock read just before, if the caller has one.
    void fire_timers(std::int64_t now = -1);
    void drain_remote();
    void enqueue_remote(std::uintptr_t item);

    // --- observability (observe.cpp) ---
    /// The paused clock: move virtual time to the next deadline when the scheduler is idle.
    /// Returns true when it did (timers are then due).
    bool advance_paused_clock(std::int64_t deadline_ns);
    void observe_options(const SchedulerOptions& options);
    void run_ready_observed();
    /// Poll the driver; returns the real clock read after the poll (-1: none was read), for
    /// fire_timers to share.
    std::int64_t poll_counted(std::int64_t timeout_ns);
    /// SchedulerOptions::idle_spin: poll without waiting until work comes, the spin's time is up,
    /// a timer is due or `deadline_ns` passes. True when the loop has something to do (no wait).
    bool spin_for_work(std::int64_t deadline_ns);
    void publish_gauges() noexcept;
    /// A loop turn ends at `now` (a poll of the driver that did not wait): its length to the
    /// histogram, and `now` as the start of the next (task dumps read it too).
    void turn_over_at(std::int64_t now) noexcept {
        if constexpr (GALAY_TASK_DUMP) {
            counters_.turn_took(now - coarse_ns_.load(std::memory_order_relaxed));
            coarse_ns_.store(now, std::memory_order_relaxed);
        }
    }

    Scheduler& self_; // the public face this is the state of
    std::unique_ptr<Driver> driver_;
    std::unique_ptr<RemoteQueue> remote_;
    std::vector<std::coroutine_handle<>> ready_;
    std::vector<std::coroutine_handle<>> running_;
    TimerHeap timers_;
    IntrusiveList<SpawnBase, SpawnLinks> tasks_; // started, not finished
    std::size_t linked_ = 0;                     // how many
    std::atomic<std::size_t> live_{0};           // placed here and not finished (any thread reads)
    const void* wake_group_ = nullptr;           // the Runtime this is a worker of
    bool stopping_ = false;                      // cancel_all() ran: new tasks start cancelled
    bool torn_down_ = false;
    bool in_loop_ = false; // inside run_until_done: the driver is polled soon (MSG_RING wakes)
    unsigned inline_completions_ = 0;
    std::size_t resumed_since_poll_ = 0; // coroutines resumed since the driver was last polled
    std::uint64_t polls_ = 0;            // times the loop polled the driver (tests)
    bool fair_completions_ = false;      // SchedulerOptions::fair_completions: flush long batches
    bool spin_armed_ = false;            // a turn ran coroutines since the last spin
    std::int64_t idle_spin_ns_ = 0;      // SchedulerOptions::idle_spin

    // --- observability ---
    WorkerCounters counters_;
    std::unique_ptr<Observer> observer_; // stall detector and hooks; null: neither
    bool paused_ = false;                // SchedulerOptions::paused_clock
    std::int64_t virtual_ns_ = 0;        // the paused clock's time
    std::size_t bounded_in_flight_ = 0;  // paused clock: ops that finish on their own
    std::int64_t mark_ns_ = 0;           // busy/parked accounting: end of the last wait
    int worker_ = -1;                    // its index in a Runtime (reports, labels)
    // The steady clock at the last poll of the driver: when a leaf began to wait (task dumps),
    // and how long a worker that does not answer a dump has gone without a loop turn.
    std::atomic<std::int64_t> coarse_ns_{0};
    // Task dumps in progress here take their snapshot a chunk per loop turn; each keeps where it
    // is in tasks_, moved on by leave() when that task goes (task_dump.cpp).
    std::vector<SpawnBase**> dump_cursors_;
    void dump_cursor_leaving(SpawnBase& t) noexcept;
    // The leaf operation a resumed coroutine suspended on: the coroutine and its cancel scope
    // (start_op and sleep record them), so that hooks and stalls can name the task.
    std::coroutine_handle<> suspended_h_;
    CancelScope* suspended_scope_ = nullptr;
};

/// The scheduler of a spawn that is refused (runtime shut down): none. Completes the task's state.
void refuse_spawn(SpawnBase& t) noexcept;

} // namespace galay::detail
