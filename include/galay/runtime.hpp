// galay/runtime.hpp: the multi-threaded Runtime (one Scheduler per worker thread), spawn.
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
// A `Scheduler` (galay/scheduler.hpp) runs the coroutines of one thread; it owns one driver
// (io_uring or epoll, galay/backend.hpp) and a timer heap. `galay::block_on(task)` runs one on
// the calling thread. A `Runtime` is N workers, each a thread with its own Scheduler: thread per
// core, shared nothing.
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

#include "galay/invoke.hpp"
#include "galay/join_handle.hpp"
#include "galay/scheduler.hpp"
#include "galay/task.hpp"

#include <chrono>
#include <memory>
#include <source_location>
#include <stdexcept>

namespace galay {

/// How a Runtime is set up: its workers, their schedulers, pinning and shutdown.
struct RuntimeOptions {
    /// Worker threads (one Scheduler each). 0: std::thread::hardware_concurrency().
    unsigned workers = 0;
    /// Backend, ring and pool sizes, for every worker.
    SchedulerOptions scheduler{};
    /// Pin worker i to the i-th CPU this process may run on (modulo their number). macOS has no
    /// thread affinity: there the Runtime throws `galay::Error` (errc::not_supported).
    bool pin_workers = false;
    /// How long shutdown lets cancelled tasks finish on their own before their frames are
    /// destroyed.
    std::chrono::milliseconds shutdown_grace{1000};
};

namespace detail {
class RuntimeCore; // the workers and their threads (src/runtime/runtime_core.hpp)
} // namespace detail

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
    unsigned size() const noexcept;
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

    /// Run `fn()` on worker `worker` (< size()) and give its value back: `co_await` the result
    /// in a task on any worker, or `.join()` it on a plain thread (galay/invoke.hpp). `fn` is a
    /// plain callable or returns a `Task<T>`. Nothing is allocated once warm; on the caller's
    /// own worker it runs in place.
    template <class F>
    [[nodiscard]] Invoke<std::decay_t<F>> invoke_on(unsigned worker, F&& fn) {
        if (worker >= size()) throw std::out_of_range("galay: invoke_on: no such worker");
        return Invoke<std::decay_t<F>>(*this, worker, std::forward<F>(fn));
    }

    /// Stop: cancel every task, let them finish (up to `shutdown_grace`), destroy what is left,
    /// join the threads. Idempotent; from a thread that is not a worker.
    void shutdown() noexcept;

private:
    friend void detail::invoke_place(Runtime&, unsigned, detail::SpawnBase&) noexcept;
    /// spawn_on's second half: start `t` on worker `worker`, or refuse it after shutdown.
    void place(unsigned worker, detail::SpawnBase& t) noexcept;

    std::unique_ptr<detail::RuntimeCore> core_;
};

/// The index of this thread's worker in its Runtime, or -1 on a thread that is not a worker.
int this_worker() noexcept;

/// Start `task` on worker `worker` of the current thread's Runtime (a worker thread only).
template <class T>
JoinHandle<T> spawn_on(unsigned worker, Task<T> task,
                       std::source_location where = std::source_location::current());

/// `invoke_on(worker, fn)` on the current thread's Runtime (a worker thread only): see
/// Runtime::invoke_on.
template <class F>
[[nodiscard]] Invoke<std::decay_t<F>> invoke_on(unsigned worker, F&& fn);

namespace detail {
/// Terminate with `what` on stderr (misuse that cannot be reported otherwise).
[[noreturn]] void fatal(const char* what) noexcept;
} // namespace detail

template <class T>
JoinHandle<T> Runtime::spawn_on(unsigned worker, Task<T> task, std::source_location where) {
    if (worker >= size()) throw std::out_of_range("galay: spawn_on: no such worker");
    detail::SpawnPromise<T>& p = detail::make_spawned(std::move(task));
    p.where = where;
    place(worker, p);
    return JoinHandle<T>(p);
}

template <class T>
JoinHandle<T> spawn_on(unsigned worker, Task<T> task, std::source_location where) {
    Runtime* rt = Runtime::current();
    if (rt == nullptr)
        detail::fatal("galay: spawn_on() outside a Runtime worker (use rt.spawn_on)");
    return rt->spawn_on(worker, std::move(task), where);
}

template <class F>
Invoke<std::decay_t<F>> invoke_on(unsigned worker, F&& fn) {
    Runtime* rt = Runtime::current();
    if (rt == nullptr)
        detail::fatal("galay: invoke_on() outside a Runtime worker (use rt.invoke_on)");
    return rt->invoke_on(worker, std::forward<F>(fn));
}

} // namespace galay
