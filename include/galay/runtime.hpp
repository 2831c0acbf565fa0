// galay/runtime.hpp: schedulers (one per thread), the multi-threaded Runtime, spawn.
//
//     #include <galay/galay.hpp>
//     galay::Task<int> answer() { co_return 42; }
//     int main() {
//         galay::Runtime rt;                             // one worker (thread + driver) per core
//         int v = rt.block_on(answer());                 // runs on a worker; value or exception
//         auto h = rt.spawn(answer());                   // least-loaded worker, from any thread
//         int w = h.join();                              // (JoinHandle: co_await it in a task)
//     }
//
// A `Scheduler` runs the coroutines of one thread; it owns one driver (io_uring or epoll) and a
// timer heap. `Backend::automatic` uses io_uring when the kernel allows it and epoll otherwise,
// printing one line when it falls back; `GALAY_BACKEND=epoll|io_uring|auto` overrides it.
// `galay::block_on(task)` runs one on the calling thread.
//
// A `Runtime` is N workers, each a thread with its own Scheduler: thread per core, shared nothing.
//
// Threading rules:
//   - A task runs on the worker it was spawned on, from start to end (no work stealing: its
//     frame, its sockets and its pending kernel operations belong to that worker's driver).
//     `galay::spawn(t)` starts `t` on the current worker; `spawn_on(i, t)` on worker i;
//     `rt.spawn(t)` on the least-loaded worker (fewest unfinished tasks; ties go round-robin).
//   - What may cross threads: a `Task` not yet started (it runs where it is spawned), a
//     `JoinHandle` (await, join or abort it anywhere), a socket or file before its first
//     operation (an accepted connection handed to another worker, as `serve`'s dispatch mode
//     does), and plain values. What may not: an awaitable being awaited, a socket that has
//     been used (on io_uring its worker's ring may hold an armed multishot receive for it), a
//     `PooledBuffer` (give it back on its worker), an `fs::FixedBuffer` (registered with one
//     worker's ring). Closing a socket or file is safe on any thread.
//   - `Runtime::spawn`, `spawn_on`, `Scheduler::post`, `JoinHandle::abort` are safe from any
//     thread, including threads that are not workers. `JoinHandle::join()` blocks and is for
//     threads that run no scheduler.
//   - Blocking calls do not belong in a task: `co_await galay::spawn_blocking(fn)` runs `fn` on
//     the blocking pool (galay/blocking.hpp) and resumes the task on its worker.
//   - Shutdown (`rt.shutdown()` or the destructor): every task is cancelled (its pending
//     operation completes with `operation_canceled`, later ones fail at once), the workers run
//     until their tasks have finished or `shutdown_grace` has passed, then every kernel operation
//     is cancelled and finished, the frames of the tasks still alive are destroyed (their handles
//     throw `operation_canceled`), and the threads are joined. Blocking functions already
//     running on the pool are waited for.
#pragma once

#include "galay/backend.hpp"
#include "galay/detail/intrusive_list.hpp"
#include "galay/detail/io_op.hpp"
#include "galay/detail/timer_heap.hpp"
#include "galay/detail/worker_counters.hpp"
#include "galay/error.hpp"
#include "galay/join_handle.hpp"
#include "galay/metrics.hpp"
#include "galay/task.hpp"

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace galay {

/// How a Scheduler is set up: its backend, ring and buffer pool, and how it takes completions.
struct SchedulerOptions {
    /// io_uring, epoll, or automatic (io_uring where the kernel allows it, see resolve_backend).
    Backend backend = Backend::automatic;
    unsigned ring_entries = 1024; ///< io_uring submission queue size
    unsigned pool_buffers = 4096; ///< buffers lent by `recv_pooled` (a power of two)
    /// Bytes per pooled buffer. Large, so that one receive takes whatever the socket holds (a
    /// 16 KiB message, or 16 pipelined small ones) and one send echoes it. The pool is address
    /// space only until used: a buffer costs the pages a receive actually wrote.
    unsigned pool_buffer_size = 64 * 1024;
    /// io_uring: put the fds of sockets and files that transfer data into the ring's registered-
    /// file table (saves a reference-count round trip on the file per request). Slots are
    /// cleared when galay closes or releases an fd; an fd closed with close(2) directly while
    /// registered stays open until the scheduler is destroyed, so close through galay.
    bool register_files = true;
    /// io_uring: one multishot accept per listener serves every `accept()` (Linux >= 5.19,
    /// probed at run time; older kernels get one accept request per call, as does `false`).
    bool multishot_accept = true;
    /// io_uring workers of one Runtime wake each other with IORING_OP_MSG_RING (one SQE that
    /// rides with the sender's next io_uring_enter) instead of an eventfd write, where the
    /// kernel has it (>= 5.18). Off: eventfd, as from any other thread (to measure the
    /// difference: tools/bench_wake).
    bool msg_ring_wake = true;
    /// Every ready completion in the same loop turn, instead of bounded batches. Off (the
    /// default), a turn takes what one pass through the kernel gives: on io_uring, since Linux
    /// 6.13, ~20 completions (a ring set up with DEFER_TASKRUN, ours where the kernel has it);
    /// on epoll, 64 ready fds. On, each turn goes back to the kernel while it keeps returning
    /// full batches, and a long batch of handlers hands its queued sends to the kernel every
    /// ~50 us instead of at the end of the batch. Batches of hundreds cost CPU: each connection's
    /// memory is touched once when its completion is taken and again when its handler runs, and
    /// in between a long batch has evicted it. So on, a busy HTTP server and a request/response
    /// echo take more CPU per request, for no lower p99 (docs/benchmarks/experiments.md).
    bool fair_completions = false;
    /// Latency for CPU: when the loop runs out of work after a turn that did some, it polls the
    /// kernel without waiting (and watches for posts from other threads) for up to this long,
    /// never past the next timer, before it sleeps in the kernel. A reply that arrives within
    /// the spin is taken without the thread being put to sleep and woken again, which on a
    /// virtual machine is most of a loopback round trip. A spin that finds nothing ends in the
    /// sleep, so an idle scheduler spins at most once per wake-up. 0 (the default): never spin.
    /// Negative: the Scheduler constructor throws. Off on the paused clock. Whether it pays:
    /// `metrics::WorkerMetrics::idle_spins_found_work` against `idle_spins_slept`
    /// (docs/guide/runtime.md).
    std::chrono::microseconds idle_spin{0};

    // --- observability (galay/metrics.hpp, docs/guide/operating.md) ---------------------------
    /// Report a loop turn, or a single resume of a task, that takes longer than this through
    /// `on_stall` (0: the detector is off and costs one branch per turn).
    std::chrono::nanoseconds stall_threshold{0};
    /// Called on the scheduler's thread for each stall; empty: one line on stderr, at most one
    /// a second per scheduler.
    std::function<void(const metrics::StallReport&)> on_stall{};
    /// Callbacks on task events, for tracing (null: none, one predictable branch per event).
    /// The pointed-to hooks must outlive the scheduler.
    const metrics::TaskHooks* hooks = nullptr;
    /// Tests: timers read a virtual clock that stands still and jumps to the next deadline
    /// when nothing is ready to run, no completion is waiting in the kernel and no operation
    /// that always finishes on its own (file I/O, connect, close) is in flight. A 30 s
    /// `.timeout()` then fires as soon as the scheduler is otherwise idle. Time as read through
    /// `Scheduler::now_ns()` on this scheduler's thread.
    bool paused_clock = false;
};

namespace detail {
class Driver; // the backend (src/driver/driver.hpp); not part of the installed interface
class RemoteQueue;
struct Observer;
struct SchedulerAccess;
struct SpawnLinks { // a scheduler's list of its spawned tasks (detail/intrusive_list.hpp)
    static SpawnBase*& next(SpawnBase& t) noexcept { return t.next; }
    static SpawnBase*& prev(SpawnBase& t) noexcept { return t.prev; }
};
} // namespace detail

class Runtime;

/// The event loop of one thread: runs its tasks and drives the kernel through its backend's driver.
class Scheduler {
public:
    /// Creates the driver. Throws `galay::Error` when the requested backend cannot run.
    explicit Scheduler(SchedulerOptions options = {});
    /// Cancels and finishes every kernel operation, destroys the tasks still alive (their
    /// handles throw `operation_canceled`).
    ~Scheduler();
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    /// The scheduler running on this thread (inside block_on, or a Runtime worker), or null.
    static Scheduler* current() noexcept;

    /// The backend this scheduler's driver runs (never `Backend::automatic`).
    Backend backend() const noexcept;
    /// Its name: "io_uring" or "epoll".
    const char* backend_name() const noexcept;

    /// Run `task` on this thread until it finishes; spawned tasks run alongside it.
    template <class T>
    T block_on(Task<T> task);

    /// Start `task` on this scheduler. From its own thread it is queued at once; from any other
    /// thread it is posted (and starts when this scheduler runs). Dropping the handle detaches
    /// the task; an exception escaping a detached task is reported.
    template <class T>
    JoinHandle<T> spawn(Task<T> task, std::source_location where = std::source_location::current());

    /// Spawned tasks that have not finished (including ones posted from other threads and not
    /// started yet). What `Runtime::spawn` balances on.
    std::size_t detached_count() const noexcept { return live_.load(std::memory_order_relaxed); }

    /// Resume `h` from this thread's run loop (this thread only).
    void schedule(std::coroutine_handle<> h) { ready_.push_back(h); }
    /// As schedule(), and the driver is polled before `h` runs again (what yield_now does).
    void schedule_after_poll(std::coroutine_handle<> h) {
        ready_.push_back(h);
        resumed_since_poll_ = kPollEvery;
    }
    /// Resume `h` on this scheduler's thread. Safe from any thread. A sleeping scheduler is
    /// woken (eventfd; IORING_OP_MSG_RING between io_uring workers of one Runtime).
    void post(std::coroutine_handle<> h);

    /// The steady clock in nanoseconds: what deadlines (`.deadline()`, timer nodes) are measured
    /// in. On the thread of a scheduler with `SchedulerOptions::paused_clock`, its virtual time.
    static std::int64_t now_ns() noexcept {
        if (detail::g_paused_clocks.load(std::memory_order_relaxed) != 0) return paused_now_ns();
        return real_now_ns();
    }
    /// The steady clock in nanoseconds, paused clock or not.
    static std::int64_t real_now_ns() noexcept {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }

    /// This scheduler's counters (galay/metrics.hpp reads them; any thread).
    const detail::WorkerCounters& counters() const noexcept { return counters_; }

private:
    static constexpr std::size_t kFairCheckEvery = 8;    // handlers between clock reads
    static constexpr std::int64_t kFairFlushNs = 50'000; // longest a reply waits in a batch
    /// While tasks keep waking tasks of this scheduler, the driver is polled (a system call)
    /// after at most this many resumes, not after every batch.
    static constexpr std::size_t kPollEvery = 64;
    friend class Runtime;
    // What only drivers and the library's own awaitables use (the driver, the timer heap,
    // completing an op, the inline-completion budget): src/runtime/scheduler_access.hpp.
    friend struct detail::SchedulerAccess;
    friend struct detail::SpawnBase;
    friend struct detail::Observer;

    /// Make `s` this thread's current scheduler; returns the previous one.
    static Scheduler* exchange_current(Scheduler* s) noexcept;
    /// Run `call` on this scheduler's thread (see detail::RemoteCall). Safe from any thread.
    void post(detail::RemoteCall& call);

    /// Run until `remaining` is 0 or, when deadline_ns >= 0, the steady clock reaches it.
    void run_until_done(const std::size_t& remaining, std::int64_t deadline_ns = -1);
    void run_ready();
    void run_ready_fairly();
    void fire_timers();
    void drain_remote();
    void enqueue_remote(std::uintptr_t item);
    void start_spawned(detail::SpawnBase& t);
    void adopt(detail::SpawnBase& t);
    void leave(detail::SpawnBase& t) noexcept;
    /// Cancel every task; tasks started from now on are cancelled at once.
    void cancel_all() noexcept;
    /// On this scheduler's thread: cancel and finish every kernel op, destroy every task left.
    void teardown() noexcept;
    /// Drop what is queued from other threads (coroutines are not resumed; calls are told).
    void drop_remote() noexcept;

    // --- observability (src/runtime/observe.cpp) ---
    static std::int64_t paused_now_ns() noexcept;
    /// The paused clock: move virtual time to the next deadline when the scheduler is idle.
    /// Returns true when it did (timers are then due).
    bool advance_paused_clock(std::int64_t deadline_ns);
    void observe_options(const SchedulerOptions& options);
    void run_ready_observed();
    void poll_counted(std::int64_t timeout_ns);
    /// SchedulerOptions::idle_spin: poll without waiting until work comes, the spin's time is up,
    /// a timer is due or `deadline_ns` passes. True when the loop has something to do (no wait).
    bool spin_for_work(std::int64_t deadline_ns);
    void publish_gauges() noexcept;

    std::unique_ptr<detail::Driver> driver_;
    std::unique_ptr<detail::RemoteQueue> remote_;
    std::vector<std::coroutine_handle<>> ready_;
    std::vector<std::coroutine_handle<>> running_;
    detail::TimerHeap timers_;
    detail::IntrusiveList<detail::SpawnBase, detail::SpawnLinks> tasks_; // started, not finished
    std::size_t linked_ = 0;                                             // how many
    std::atomic<std::size_t> live_{0}; // placed here and not finished (any thread reads)
    const void* wake_group_ = nullptr; // the Runtime this is a worker of
    bool stopping_ = false;            // cancel_all() ran: new tasks start cancelled
    bool torn_down_ = false;
    bool in_loop_ = false; // inside run_until_done: the driver is polled soon (MSG_RING wakes)
    unsigned inline_completions_ = 0;
    std::size_t resumed_since_poll_ = 0; // coroutines resumed since the driver was last polled
    std::uint64_t polls_ = 0;            // times the loop polled the driver (tests)
    bool fair_completions_ = false;      // SchedulerOptions::fair_completions: flush long batches
    bool spin_armed_ = false;            // a turn ran coroutines since the last spin
    std::int64_t idle_spin_ns_ = 0;      // SchedulerOptions::idle_spin

    // --- observability ---
    detail::WorkerCounters counters_;
    std::unique_ptr<detail::Observer> observer_; // stall detector and hooks; null: neither
    bool paused_ = false;                        // SchedulerOptions::paused_clock
    std::int64_t virtual_ns_ = 0;                // the paused clock's time
    std::size_t bounded_in_flight_ = 0;          // paused clock: ops that finish on their own
    std::int64_t mark_ns_ = 0;                   // busy/parked accounting: end of the last wait
    int worker_ = -1;                            // its index in a Runtime (reports, labels)
    // The leaf operation a resumed coroutine suspended on: the coroutine and its cancel scope
    // (start_op and sleep record them), so that hooks and stalls can name the task.
    std::coroutine_handle<> suspended_h_;
    detail::CancelScope* suspended_scope_ = nullptr;
};

/// The current thread's scheduler; terminates with a clear message when there is none.
Scheduler& current_scheduler();

/// Start `task` on the current scheduler (the current worker, in a Runtime).
template <class T>
JoinHandle<T> spawn(Task<T> task, std::source_location where = std::source_location::current()) {
    return current_scheduler().spawn(std::move(task), where);
}

/// Create a scheduler with `options`, run `task` to completion on this thread, return its result.
template <class T>
T block_on(Task<T> task, SchedulerOptions options = {}) {
    Scheduler s(options);
    return s.block_on(std::move(task));
}

/// Go to the back of the ready queue, letting other tasks of this scheduler run, and the
/// driver be polled (I/O completions, timers) before this task goes on.
struct [[nodiscard]] YieldAwaiter {
    /// Awaiter protocol, called by `co_await`: never ready.
    bool await_ready() const noexcept { return false; }
    /// Awaiter protocol: queues the task behind the tasks ready now and the next poll of the
    /// driver.
    void await_suspend(std::coroutine_handle<> h) const {
        current_scheduler().schedule_after_poll(h);
    }
    /// Awaiter protocol: nothing to return.
    void await_resume() const noexcept {}
};
/// Let the other ready tasks and the driver run before this task goes on: `co_await
/// galay::yield_now();`.
[[nodiscard]] inline YieldAwaiter yield_now() noexcept {
    return {};
}

// ---------------------------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------------------------

/// How a Runtime is set up: its workers, their schedulers, pinning and shutdown.
struct RuntimeOptions {
    /// Worker threads (one Scheduler each). 0: std::thread::hardware_concurrency().
    unsigned workers = 0;
    /// Backend, ring and pool sizes, for every worker.
    SchedulerOptions scheduler{};
    /// Pin worker i to the i-th CPU this process may run on (modulo their number).
    bool pin_workers = false;
    /// How long shutdown lets cancelled tasks finish on their own before their frames are
    /// destroyed.
    std::chrono::milliseconds shutdown_grace{1000};
};

/// N workers, each a thread with its own Scheduler (see the threading rules at the top).
class Runtime {
public:
    /// Starts the workers. Throws `galay::Error` when a worker's scheduler cannot be created.
    explicit Runtime(RuntimeOptions options = {});
    /// shutdown().
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    /// The runtime whose worker this thread is, or null.
    static Runtime* current() noexcept;

    /// The number of workers.
    unsigned size() const noexcept { return static_cast<unsigned>(workers_.size()); }
    /// The backend its workers run on (never automatic).
    Backend backend() const noexcept;
    /// "io_uring" or "epoll".
    const char* backend_name() const noexcept;
    /// Worker i's scheduler (e.g. to `post` to it).
    Scheduler& scheduler(unsigned worker) const;

    /// Run `task` on a worker and wait for it on this thread: returns its value or rethrows its
    /// exception. For threads that are not workers (from a task, co_await a spawn instead).
    template <class T>
    T block_on(Task<T> task) {
        return spawn(std::move(task)).join();
    }
    /// Start `task` on the worker with the fewest unfinished tasks (ties: round-robin). Counting
    /// tasks rather than rotating keeps long-lived tasks (connections) spread when short ones come
    /// and go. From any thread. After shutdown the handle throws `operation_canceled`.
    template <class T>
    JoinHandle<T> spawn(Task<T> task,
                        std::source_location where = std::source_location::current()) {
        return spawn_on(least_loaded(), std::move(task), where);
    }
    /// Start `task` on worker `worker` (< size()). From any thread.
    template <class T>
    JoinHandle<T> spawn_on(unsigned worker, Task<T> task,
                           std::source_location where = std::source_location::current());

    /// The worker `spawn` would pick now.
    unsigned least_loaded() const noexcept;

    /// Stop: cancel every task, let them finish (up to `shutdown_grace`), destroy what is left,
    /// join the threads. Idempotent; from a thread that is not a worker.
    void shutdown() noexcept;

private:
    struct Worker;
    bool enter() noexcept;
    void leave() noexcept;
    void worker_main(unsigned index);

    RuntimeOptions options_;
    std::vector<std::unique_ptr<Worker>> workers_;
    mutable std::atomic<unsigned> next_{0};
    std::atomic<int> entered_{0};
    std::atomic<bool> closed_{false};
    bool joined_ = false;
};

/// The index of this thread's worker in its Runtime, or -1 on a thread that is not a worker.
int this_worker() noexcept;

/// Start `task` on worker `worker` of the current thread's Runtime (a worker thread only).
template <class T>
JoinHandle<T> spawn_on(unsigned worker, Task<T> task,
                       std::source_location where = std::source_location::current());

namespace detail {
/// Terminate with `what` on stderr (misuse that cannot be reported otherwise).
[[noreturn]] void fatal(const char* what) noexcept;
/// The scheduler of a spawn that is refused (runtime shut down): none. Completes the task's state.
void refuse_spawn(SpawnBase& t) noexcept;
} // namespace detail

template <class T>
JoinHandle<T> Scheduler::spawn(Task<T> task, std::source_location where) {
    detail::SpawnPromise<T>& p = detail::make_spawned(std::move(task));
    p.where = where;
    start_spawned(p);
    return JoinHandle<T>(p);
}

template <class T>
JoinHandle<T> Runtime::spawn_on(unsigned worker, Task<T> task, std::source_location where) {
    if (worker >= size()) throw std::out_of_range("galay: spawn_on: no such worker");
    detail::SpawnPromise<T>& p = detail::make_spawned(std::move(task));
    p.where = where;
    if (!enter()) {
        detail::refuse_spawn(p);
        return JoinHandle<T>(p);
    }
    scheduler(worker).start_spawned(p);
    leave();
    return JoinHandle<T>(p);
}

template <class T>
JoinHandle<T> spawn_on(unsigned worker, Task<T> task, std::source_location where) {
    Runtime* rt = Runtime::current();
    if (rt == nullptr)
        detail::fatal("galay: spawn_on() outside a Runtime worker (use rt.spawn_on)");
    return rt->spawn_on(worker, std::move(task), where);
}

template <class T>
T Scheduler::block_on(Task<T> task) {
    Scheduler* saved = exchange_current(this);
    detail::Slot<T> slot;
    detail::JoinState join;
    join.remaining = 1;
    join.parent = std::noop_coroutine();
    detail::JoinChild root = detail::run_child(std::move(task), slot);
    root.h.promise().join = &join;
    schedule(root.h);
    run_until_done(join.remaining);
    exchange_current(saved);
    if constexpr (std::is_void_v<T>)
        slot.take();
    else
        return slot.take();
}

} // namespace galay
