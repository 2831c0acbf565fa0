// galay/scheduler.hpp: the event loop of one thread, and running tasks on it.
//
//     galay::Task<int> answer() { co_return 42; }
//     galay::Task<int> twice() {
//         auto h = galay::spawn(answer());            // on this scheduler, alongside the caller
//         int a = co_await answer();
//         int b = co_await h;
//         co_await galay::yield_now();                // let the others (and the driver) run
//         co_return a + b;
//     }
//     int run() {
//         galay::Scheduler s({.backend = galay::Backend::automatic});
//         return s.block_on(twice());                 // this thread, until twice() is done
//     }
//
// A `Scheduler` runs the coroutines of one thread; it owns one driver (io_uring or epoll,
// galay/backend.hpp) and a timer heap. `galay::block_on(task)` makes one for the calling thread
// and runs `task` on it. A `Runtime` (galay/runtime.hpp) is N threads with a Scheduler each; the
// threading rules are at the top of that header.
//
// What a Scheduler is inside (its driver, ready queue, timers, the tasks spawned on it, the queue
// other threads post to, its counters) is not in this header: the library keeps it in a type of
// its own (src/runtime/scheduler_core.hpp) behind the one pointer below. The members here are
// what a program and an awaitable written outside galay call (docs/guide/awaitables.md).
#pragma once

#include "galay/backend.hpp"
#include "galay/join_handle.hpp"
#include "galay/metrics.hpp"
#include "galay/task.hpp"

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>

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
    /// file table (saves a reference-count round trip on the file per request; a file goes in
    /// on its second transfer, a socket on its fourth, so short-lived ones skip it). Slots are
    /// cleared when galay closes or releases an fd; an fd closed with close(2) directly while
    /// registered stays open until the scheduler is destroyed, so close through galay.
    bool register_files = true;
    /// io_uring: one multishot accept per listener serves every `accept()` (Linux >= 5.19,
    /// probed at run time; older kernels get one accept request per call, as does `false`).
    bool multishot_accept = true;
    /// io_uring workers of one Runtime wake each other with IORING_OP_MSG_RING (one SQE that
    /// rides with the sender's next io_uring_enter) instead of an eventfd write, where the
    /// kernel has it (>= 5.18). Off: eventfd, as from any other thread (to measure the
    /// difference: bench/programs/bench_wake).
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

class Runtime;

namespace detail {
class SchedulerCore;    // what a Scheduler is (src/runtime/scheduler_core.hpp)
struct SchedulerAccess; // how the library reaches it (src/runtime/scheduler_access.hpp)
/// Schedulers with a paused clock alive in the process: while 0, `Scheduler::now_ns()` reads the
/// steady clock without looking further.
inline std::atomic<int> g_paused_clocks{0};
/// The paused clock of this thread's scheduler (the steady clock when it has none).
std::int64_t paused_now_ns() noexcept;
} // namespace detail

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
    /// started yet). What `Runtime::spawn` balances on. Any thread.
    std::size_t detached_count() const noexcept;

    /// Resume `h` from this thread's run loop (this thread only).
    void schedule(std::coroutine_handle<> h);
    /// As schedule(), and the driver is polled before `h` runs again (what yield_now does).
    void schedule_after_poll(std::coroutine_handle<> h);
    /// Resume `h` on this scheduler's thread. Safe from any thread. A sleeping scheduler is
    /// woken (eventfd; IORING_OP_MSG_RING between io_uring workers of one Runtime).
    void post(std::coroutine_handle<> h);

    /// The steady clock in nanoseconds: what deadlines (`.deadline()`, timer nodes) are measured
    /// in. On the thread of a scheduler with `SchedulerOptions::paused_clock`, its virtual time.
    static std::int64_t now_ns() noexcept {
        if (detail::g_paused_clocks.load(std::memory_order_relaxed) != 0)
            return detail::paused_now_ns();
        return real_now_ns();
    }
    /// The steady clock in nanoseconds, paused clock or not.
    static std::int64_t real_now_ns() noexcept {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }

private:
    friend struct detail::SchedulerAccess;
    /// spawn's second half: place the spawned task here (from any thread).
    void start(detail::SpawnBase& t);
    /// block_on's second half: make this the thread's scheduler and run until `root` is done.
    void run_root(detail::JoinChild root);

    std::unique_ptr<detail::SchedulerCore> core_;
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

template <class T>
JoinHandle<T> Scheduler::spawn(Task<T> task, std::source_location where) {
    detail::SpawnPromise<T>& p = detail::make_spawned(std::move(task));
    p.where = where;
    start(p);
    return JoinHandle<T>(p);
}

template <class T>
T Scheduler::block_on(Task<T> task) {
    detail::Slot<T> slot;
    run_root(detail::run_child(std::move(task), slot));
    if constexpr (std::is_void_v<T>)
        slot.take();
    else
        return slot.take();
}

} // namespace galay
