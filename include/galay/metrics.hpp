// galay/metrics.hpp: what a running galay is doing, per worker and per Runtime, readable from any
// thread at any time; the stall detector's report; task hooks; the Prometheus text format.
//
//     galay::RuntimeOptions o;
//     o.scheduler.stall_threshold = std::chrono::milliseconds(10); // report long turns
//     galay::Runtime rt(o);
//     galay::metrics::RuntimeMetrics m = galay::metrics::snapshot(rt); // from any thread
//     std::cout << "tasks finished: " << m.total().tasks_finished << '\n';
//     std::cout << galay::metrics::prometheus_text(rt);                 // what GET /metrics serves
//
// Counters are kept by each scheduler for itself (relaxed, no lock, no allocation; each has one
// writer, the scheduler's own thread) and a snapshot reads them without stopping anything, so the
// figures of one snapshot may be a turn apart from each other. Gauges (ready-queue depth, timers
// armed, pooled buffers in use) are sampled once per loop turn. Built with the CMake option
// GALAY_METRICS=OFF the counters stay 0.
#pragma once

#include "galay/op_kind.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

namespace galay {

class Scheduler;
class Runtime;

// (the namespace is documented in galay/galay.hpp)
namespace metrics {

/// A loop turn or a single resume of a task that ran longer than
/// `SchedulerOptions::stall_threshold`.
struct StallReport {
    std::chrono::nanoseconds duration{0}; ///< how long the turn or the resume ran
    bool whole_turn = false;              ///< a whole turn (several resumes), not one resume
    bool located = false;                 ///< `spawned_at` names the task that ran
    std::source_location spawned_at;      ///< where the task was spawned, when `located`
    int worker = -1;                      ///< the Runtime worker, or -1
    /// The task's async backtrace where it suspended after the stall, leaf first ("f() <- g()
    /// <- h()", galay/task_dump.hpp); empty when the task finished in that resume or is unknown.
    std::string backtrace;
};

/// What a task hook is told: which task (an identity, stable while the task lives) and where it
/// was spawned.
struct TaskEvent {
    const void* task = nullptr;      ///< the task's identity
    std::source_location spawned_at; ///< where `spawn` was called
};

/// Callbacks on the life of spawned tasks, for tracing. Each is called on the task's scheduler
/// thread and may be null. `on_suspend` and `on_resume` cover suspensions on I/O operations and
/// sleeps (where the task is known from the operation's cancel scope); other waits (channels,
/// joins) show as one long run between two of those events.
struct TaskHooks {
    void* context = nullptr; ///< passed to every callback
    /// `spawn` placed the task on this scheduler (before it first runs).
    void (*on_spawn)(void* context, const TaskEvent&) = nullptr;
    /// The task is about to run for the first time.
    void (*on_first_resume)(void* context, const TaskEvent&) = nullptr;
    /// The task suspended on an I/O operation or a sleep.
    void (*on_suspend)(void* context, const TaskEvent&) = nullptr;
    /// The task is about to run again after such a suspension.
    void (*on_resume)(void* context, const TaskEvent&) = nullptr;
    /// The task finished (or was destroyed at shutdown).
    void (*on_exit)(void* context, const TaskEvent&) = nullptr;
};

/// The name of an operation kind as used in metric labels ("recv", "read_at", ...).
const char* op_kind_name(OpKind kind) noexcept;

/// Buckets of the completions-per-turn histogram (WorkerMetrics::completions_per_turn): 0, 1,
/// 2-3, 4-7, ..., 128-255, 256 and more.
inline constexpr std::size_t turn_buckets = 10;
/// Buckets of the loop-turn-length histogram (WorkerMetrics::turn_lengths): under 1 us, 1-2 us,
/// 2-4 us, ..., 8.192-16.384 ms, 16.384 ms and longer.
inline constexpr std::size_t turn_length_buckets = 16;

/// Counters for one kind of operation.
struct OpMetrics {
    std::uint64_t started = 0;   ///< handed to the driver
    std::uint64_t completed = 0; ///< completed (including failures)
    std::uint64_t failed = 0;    ///< completed with an error
    std::uint64_t bytes = 0;     ///< bytes moved by the successful ones (transfers only)
    /// Started and not completed.
    std::uint64_t in_flight() const noexcept { return started - completed; }
};

/// One scheduler's figures at one moment.
struct WorkerMetrics {
    int worker = -1;                  ///< index in its Runtime, or -1
    std::string backend;              ///< "io_uring" or "epoll"
    std::uint64_t tasks_spawned = 0;  ///< tasks adopted by this scheduler
    std::uint64_t tasks_finished = 0; ///< tasks finished (or destroyed at shutdown)
    std::uint64_t tasks_alive = 0;    ///< spawned here and not finished (including posted ones)
    std::uint64_t loop_turns = 0;     ///< polls of the driver
    std::uint64_t busy_ns = 0;        ///< time in the loop outside blocking waits
    std::uint64_t parked_ns = 0;      ///< time in blocking waits in the kernel
    std::uint64_t ready_depth = 0;    ///< gauge: coroutines ready at the start of the last turn
    std::uint64_t timers_armed = 0;   ///< gauge: timers armed at the start of the last turn
    std::uint64_t remote_wakeups = 0; ///< times work posted by other threads was picked up
    std::uint64_t remote_items = 0;   ///< coroutines and calls posted by other threads
    std::uint64_t pooled_buffers_in_use = 0; ///< gauge: pool buffers not free
    std::uint64_t enobufs = 0;               ///< pooled receives that found no free buffer
    std::uint64_t stalls = 0;                ///< turns or resumes over the stall threshold
    /// `SchedulerOptions::idle_spin`: spins that ended with work to do (a completion, a post
    /// from another thread, a due timer), so the thread did not sleep.
    std::uint64_t idle_spins_found_work = 0;
    /// Spins that found nothing and ended in a sleep: their time was spent for nothing.
    std::uint64_t idle_spins_slept = 0;
    std::uint64_t idle_spin_ns = 0; ///< time spent spinning (part of `busy_ns`)
    /// Connections `galay::serve` accepted on this worker and refused at once, over
    /// `ServeOptions::max_connections`.
    std::uint64_t connections_refused = 0;
    /// Per operation kind, indexed by `OpKind`.
    std::array<OpMetrics, op_kind_count> ops{};
    /// Completions per turn: bucket 0 counts turns with none, bucket b turns with 2^(b-1) to
    /// 2^b - 1, the last one turns with 256 or more.
    std::array<std::uint64_t, turn_buckets> completions_per_turn{};
    std::uint64_t completions_sum = 0; ///< completions over all turns
    /// Loop turns by length: bucket 0 counts turns under 1 us, bucket b turns of 2^(b-1) to
    /// 2^b us, the last one turns of 16.384 ms and longer. A turn runs from the end of one poll
    /// of the driver to the start of the next wait in the kernel (or the end of the next poll
    /// that does not wait): the time the loop could not answer I/O. Recorded in builds with task
    /// dumps (the default; the CMake option GALAY_TASK_DUMP=OFF leaves it empty).
    std::array<std::uint64_t, turn_length_buckets> turn_lengths{};
    std::uint64_t turn_length_sum_ns = 0; ///< the turns' lengths added up
    /// The longest turn since the previous snapshot of this worker (any reader's: a scrape of
    /// /metrics starts a new period too). Summed by `operator+=` as the largest of the two.
    std::uint64_t longest_turn_ns = 0;

    /// The figures of one kind.
    const OpMetrics& op(OpKind kind) const noexcept { return ops[static_cast<std::size_t>(kind)]; }
    /// Adds `o`'s counters and gauges to these.
    WorkerMetrics& operator+=(const WorkerMetrics& o) noexcept;
};

/// A Runtime's figures: its workers and the process-wide blocking pool.
struct RuntimeMetrics {
    std::vector<WorkerMetrics> workers; ///< one per worker, in order
    std::uint64_t blocking_threads = 0; ///< threads of the blocking pool
    std::uint64_t blocking_queued = 0;  ///< jobs waiting for a blocking-pool thread
    std::uint64_t blocking_started = 0; ///< jobs the pool has started
    /// Every worker added up (worker -1).
    WorkerMetrics total() const;
};

/// A snapshot of `s`'s counters. Any thread.
WorkerMetrics snapshot(const Scheduler& s);
/// A snapshot of every worker of `rt` and of the blocking pool. Any thread.
RuntimeMetrics snapshot(const Runtime& rt);

/// `m` in the Prometheus text exposition format (version 0.0.4): every name starts with
/// `galay_`, per-worker series carry a `worker` label, times are in seconds.
std::string prometheus_text(const RuntimeMetrics& m);
/// `prometheus_text(snapshot(rt))`.
std::string prometheus_text(const Runtime& rt);

} // namespace metrics
} // namespace galay
