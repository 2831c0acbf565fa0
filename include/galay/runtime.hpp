// galay/runtime.hpp: the per-thread scheduler, backend selection, block_on and spawn.
//
//     #include <galay/runtime.hpp>
//     galay::Task<int> run() { co_return 7; }
//     int main() {
//         galay::Scheduler sched({.backend = galay::Backend::automatic});
//         std::printf("%d on %s\n", sched.block_on(run()), sched.backend_name());
//     }
//
// One `Scheduler` per thread; it owns one driver (io_uring or epoll) and a timer heap, and runs
// the coroutines of that thread. Work reaches a scheduler from other threads only through
// `post()` (a lock-free MPSC queue plus a wake-up), which is what a multi-threaded runtime is
// made of. `Backend::automatic` uses io_uring when the kernel allows it and epoll otherwise,
// printing one line when it falls back; `GALAY_BACKEND=epoll|io_uring|auto` overrides it.
#pragma once

#include "galay/detail/io_op.hpp"
#include "galay/detail/timer_heap.hpp"
#include "galay/error.hpp"
#include "galay/task.hpp"

#include <chrono>
#include <coroutine>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace galay {

using detail::Backend;

/// "io_uring", "epoll" or "auto".
const char* backend_name(Backend b) noexcept;
/// Parses "auto", "io_uring" (or "uring"), "epoll". Returns nullopt for anything else.
std::optional<Backend> parse_backend(std::string_view s) noexcept;

/// Result of probing io_uring on this kernel.
struct UringProbe {
    bool usable = false;
    std::error_code error; ///< why not, when !usable
    std::string reason;    ///< a sentence naming the failing step (setup, missing opcode, sysctl)
};
/// Probe io_uring: ring set-up plus every opcode galay uses. Cached after the first call.
/// For tests, `GALAY_FAKE_URING_PROBE=<errno name or number>` makes the probe fail that way.
const UringProbe& probe_io_uring();

/// The backend `requested` resolves to on this machine (automatic -> io_uring or epoll, after
/// looking at `GALAY_BACKEND`), or an error when a forced backend cannot run here.
Result<Backend> resolve_backend(Backend requested);

struct SchedulerOptions {
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
};

namespace detail {
class RemoteQueue;
struct DetachedPromise;
} // namespace detail

class Scheduler {
public:
    /// Creates the driver. Throws `galay::Error` when the requested backend cannot run.
    explicit Scheduler(SchedulerOptions options = {});
    ~Scheduler();
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    /// The scheduler running on this thread (inside block_on), or null.
    static Scheduler* current() noexcept;
    /// Make `s` this thread's current scheduler; returns the previous one.
    static Scheduler* exchange_current(Scheduler* s) noexcept;

    Backend backend() const noexcept { return driver_->backend(); }
    const char* backend_name() const noexcept { return driver_->name(); }
    detail::Driver& driver() noexcept { return *driver_; }

    /// Run `task` on this thread until it finishes; detached tasks run alongside it.
    template <class T>
    T block_on(Task<T> task);

    /// Start `task` detached on this scheduler. An exception escaping it is reported.
    void spawn(Task<void> task);

    /// Number of detached tasks that have not finished.
    std::size_t detached_count() const noexcept { return detached_count_; }

    /// Resume `h` from this thread's run loop (this thread only).
    void schedule(std::coroutine_handle<> h) { ready_.push_back(h); }
    /// Resume `h` on this scheduler's thread. Safe from any thread.
    void post(std::coroutine_handle<> h);

    // --- used by awaitables and drivers ---------------------------------------------------
    static std::int64_t now_ns() noexcept {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }
    void arm_timer(detail::TimerNode& n) { timers_.push(n); }
    void disarm_timer(detail::TimerNode& n) noexcept { timers_.remove(n); }

    /// A driver finished `op`: stop its deadline, map a timed-out cancel, queue its waiter.
    void complete(detail::IoOp& op) {
        op.pending = false;
        if (op.timer.armed()) timers_.remove(op.timer);
        if (op.timed_out && op.result == -ECANCELED) op.result = -ETIMEDOUT;
        ready_.push_back(op.waiter);
    }

    /// Called when an op completed without suspending. Returns false when the coroutine has run
    /// long enough without yielding and must go to the back of the ready queue (fairness).
    bool take_inline_budget() noexcept { return ++inline_completions_ < kInlineBudget; }

private:
    static constexpr unsigned kInlineBudget = 64;

    void run_until_done(const std::size_t& remaining);
    void run_ready();
    void fire_timers();
    void drain_remote();
    void shutdown() noexcept;
    friend struct detail::DetachedPromise;

    std::unique_ptr<detail::Driver> driver_;
    std::unique_ptr<detail::RemoteQueue> remote_;
    std::vector<std::coroutine_handle<>> ready_;
    std::vector<std::coroutine_handle<>> running_;
    detail::TimerHeap timers_;
    detail::DetachedPromise* detached_head_ = nullptr;
    std::size_t detached_count_ = 0;
    unsigned inline_completions_ = 0;
};

/// The current thread's scheduler; terminates with a clear message when there is none.
Scheduler& current_scheduler();

/// Start `task` detached on the current scheduler.
inline void spawn(Task<void> task) {
    current_scheduler().spawn(std::move(task));
}

/// Create a scheduler with `options`, run `task` to completion on this thread, return its result.
template <class T>
T block_on(Task<T> task, SchedulerOptions options = {}) {
    Scheduler s(options);
    return s.block_on(std::move(task));
}

/// Go to the back of the ready queue, letting other tasks of this scheduler run.
struct YieldAwaiter {
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) const { current_scheduler().schedule(h); }
    void await_resume() const noexcept {}
};
inline YieldAwaiter yield_now() noexcept {
    return {};
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
