// galay/join_handle.hpp: what every spawn returns.
//
//     galay::JoinHandle<int> h = rt.spawn(compute());   // or galay::spawn / spawn_on
//     int v = co_await h;                                 // from a task on any worker
//     galay::Result<int> r = co_await h.timeout(1s);      // timed_out: the task goes on
//     int w = rt.spawn(compute()).join();                 // from a plain thread (blocks)
//     h.abort();                                          // cancel what it is waiting on
//     rt.spawn(serve_forever());                          // dropping the handle detaches it
//
// A `JoinHandle<T>` refers to one spawned task. The task's value or exception crosses threads:
// `co_await handle` on any worker (or `join()` on a thread that runs no scheduler) returns the
// value or rethrows the exception. `abort()` cancels the task the way `when_any` cancels a loser:
// the operation it is suspended on completes with `operation_canceled` (the kernel op is
// cancelled and finished first), later operations fail at once, and the task ends however it
// handles that; its handle then gives whatever it returned or threw. An abort from another
// thread is carried out on the task's own worker. If the runtime shuts down before the task
// finishes, the task's frame is destroyed and the handle throws `galay::Error` with
// `operation_canceled`. Dropping the handle detaches the task; an exception it throws then goes to
// the unhandled-exception handler. A handle is not `[[nodiscard]]`: dropping it is how a task is
// detached.
//
// Waiting for a handle is itself a cancellable operation. `co_await h.timeout(1s)` (or
// `.deadline(t)`) returns a `Result<T>` like every other timed wait: `timed_out` when the task is
// not done by then (the task goes on; wait again later), `operation_canceled` when the waiting
// task was cancelled or the runtime shut down first; the task's own exception is still rethrown.
//
//     galay::Result<int> r = co_await h.timeout(1s);
//     if (!r && r.error() == std::errc::timed_out) { /* still running */ }
//
// Plain `co_await h` gives the value itself, so its other outcomes can only be exceptions: the
// task's own, and `galay::Error` (`operation_canceled`) when the wait was cancelled or the
// runtime shut down. Cost: a spawn allocates the task's coroutine frame plus one small frame
// holding this shared state; nothing else.
#pragma once

#include "galay/detail/remote_wait.hpp"
#include "galay/error.hpp"
#include "galay/task.hpp"

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <source_location>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace galay {

class Scheduler;
class Runtime;
template <class T>
class JoinHandle;

namespace detail {

/// Work posted to a scheduler's queue that is not a coroutine to resume. `fn(owner, true)` runs
/// on the scheduler's thread; `fn(owner, false)` is called instead when the scheduler is shut
/// down before it ran (on whatever thread drops it).
struct RemoteCall {
    void (*fn)(void* owner, bool run) noexcept = nullptr;
    void* owner = nullptr;
};

/// The state of one spawned task shared by the task (on its worker) and its JoinHandle (anywhere).
/// It lives in the promise of a small wrapper coroutine that awaits the user's task, so a spawn
/// allocates nothing else. Two references: the task's (dropped when it finishes) and the
/// handle's (dropped with the handle); the last one destroys the wrapper frame.
struct SpawnBase {
    enum : std::uint32_t { kRunning, kAwaited, kJoining, kDone };

    SpawnBase() noexcept
        : start_call{&on_start, this}
        , abort_call{&on_abort, this} {}
    SpawnBase(const SpawnBase&) = delete;
    SpawnBase& operator=(const SpawnBase&) = delete;

    // --- the worker side (the scheduler's thread only) ---
    SpawnBase* prev = nullptr; // the scheduler's list of its tasks (for shutdown)
    SpawnBase* next = nullptr;
    bool linked = false;
    bool abort_early = false;   // an abort arrived before the task was adopted
    Scheduler* sched = nullptr; // where it runs (null: refused, the runtime was shut down)
    CancelScope scope;          // the task runs in it; abort() and shutdown request it
    std::coroutine_handle<> self;
    std::source_location where; // where it was spawned (stall reports, task hooks)
    bool observed = false;      // its scheduler has a stall detector or hooks

    // --- shared ---
    std::atomic<std::uint32_t> refs{2};
    std::atomic<std::uint32_t> state{kRunning};
    std::atomic<bool> abort_sent{false};
    bool shut_down = false; // destroyed unfinished at shutdown: no result
    bool taken = false;     // the result was handed out
    // Written by the awaiting side before it publishes kAwaited; read by the finishing side after
    // it saw kAwaited.
    std::coroutine_handle<> waiter;
    Scheduler* waiter_sched = nullptr;

    RemoteCall start_call; // posted by a spawn from another thread: adopt and start the task
    RemoteCall abort_call; // posted by abort() from another thread
    void (*drop_inner)(SpawnBase&) noexcept = nullptr;

    /// The task is over (or abandoned): leave the scheduler, publish kDone, wake the waiter,
    /// drop the task's reference.
    void finish() noexcept;
    /// Destroy the unfinished task (shutdown); its handle will report the shutdown.
    void abandon() noexcept;
    /// Drop one reference; the last one destroys the wrapper frame.
    void release() noexcept;
    /// JoinHandle::abort().
    void request_abort() noexcept;
    /// Block this (non-scheduler) thread until the task is done.
    void wait_done() noexcept;
    /// Throws what taking the result must throw (shutdown, taken twice).
    void check_result() const;

private:
    static void on_start(void* owner, bool run) noexcept;
    static void on_abort(void* owner, bool run) noexcept;
};

/// A task of a scheduler with a stall detector or hooks runs for the first time.
void task_first_resume(SpawnBase& t) noexcept;

template <class T>
struct SpawnCoro;

/// The wrapper's promise: the shared state plus the user's task and its outcome.
template <class T>
struct SpawnPromise final : SpawnBase {
    Task<T> inner;
    Slot<T> slot;

    SpawnPromise() noexcept {
        drop_inner = [](SpawnBase& b) noexcept { static_cast<SpawnPromise&>(b).inner = Task<T>{}; };
    }
    ~SpawnPromise() {
        // Nobody took it and nobody ever will: report it as for any detached task.
        if (slot.error && !taken && !shut_down) report_unhandled_exception(slot.error);
    }

    SpawnCoro<T> get_return_object() noexcept;
    std::suspend_always initial_suspend() const noexcept { return {}; }
    struct Final {
        bool await_ready() const noexcept { return false; }
        // May destroy this very frame (when the handle is already gone): allowed, the coroutine
        // is suspended here.
        void await_suspend(std::coroutine_handle<SpawnPromise> h) const noexcept {
            h.promise().finish();
        }
        void await_resume() const noexcept {}
    };
    Final final_suspend() const noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { slot.error = std::current_exception(); }

    Lifted<T> take() {
        check_result();
        taken = true;
        return slot.take();
    }
};

template <class T>
struct SpawnCoro {
    using promise_type = SpawnPromise<T>;
    std::coroutine_handle<SpawnPromise<T>> h;
};

template <class T>
SpawnCoro<T> SpawnPromise<T>::get_return_object() noexcept {
    return {std::coroutine_handle<SpawnPromise<T>>::from_promise(*this)};
}

/// `co_await PromiseOf<P>{}` gives the awaiting coroutine's own promise, without suspending.
template <class P>
struct PromiseOf {
    PromiseOf() noexcept = default; // (not an aggregate: see the GCC 12 note in the README)
    P* p = nullptr;
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        p = &h.promise();
        return false;
    }
    P& await_resume() const noexcept { return *p; }
};

template <class T>
SpawnCoro<T> spawn_body() {
    SpawnPromise<T>& p = co_await PromiseOf<SpawnPromise<T>>{};
    if (p.observed) [[unlikely]]
        task_first_resume(p);
    try {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(p.inner);
            p.slot.value.emplace();
        } else {
            p.slot.value.emplace(co_await std::move(p.inner));
        }
    } catch (...) {
        p.slot.error = std::current_exception();
    }
    p.inner = Task<T>{}; // free the task's frame (and what it holds) now, not with the handle
}

/// The wrapper for `task`, not started: the task will run in the wrapper's cancel scope.
template <class T>
SpawnPromise<T>& make_spawned(Task<T> task) {
    if (!task.valid()) throw std::invalid_argument("galay: spawn of an empty Task");
    SpawnCoro<T> c = spawn_body<T>();
    SpawnPromise<T>& p = c.h.promise();
    p.self = c.h;
    p.scope.set_task(&p);
    task.handle().promise().scope = &p.scope;
    p.inner = std::move(task);
    return p;
}

/// `co_await handle`: waits for the task on whatever worker awaits it. `AsResult`: the wait's own
/// failures (timeout, cancellation, shutdown) come back as a `Result` instead of an exception.
template <class T, bool AsResult = false>
class [[nodiscard]] HandleAwaiter final : public TimedRemoteWait<HandleAwaiter<T, AsResult>> {
public:
    using value_type = std::conditional_t<AsResult, Result<T>, T>;

    explicit HandleAwaiter(SpawnPromise<T>* p) noexcept
        : p_(p) {}
    HandleAwaiter(HandleAwaiter&& o) noexcept
        : TimedRemoteWait<HandleAwaiter<T, AsResult>>(std::move(o))
        , p_(o.p_) {}
    ~HandleAwaiter() {
        if (registered_) withdraw(); // the awaiting frame is destroyed (shutdown)
    }

    bool await_ready() const noexcept {
        return p_ == nullptr || p_->state.load(std::memory_order_acquire) == SpawnBase::kDone;
    }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        this->set_waiter(h);
        p_->waiter = h;
        p_->waiter_sched = this->sched_;
        std::uint32_t expected = SpawnBase::kRunning;
        if (!p_->state.compare_exchange_strong(expected, SpawnBase::kAwaited,
                                               std::memory_order_acq_rel))
            return false; // finished meanwhile (or awaited twice at once: caught by take())
        registered_ = true;
        this->arm(scope_of(h));
        return true;
    }
    value_type await_resume() {
        registered_ = false;
        const int why = this->end_wait();
        if constexpr (AsResult) {
            if (why != 0) return fail(why);
            if (p_ == nullptr) throw std::logic_error("galay: co_await on an empty JoinHandle");
            if (p_->shut_down) return fail(ECANCELED);
            if constexpr (std::is_void_v<T>) {
                p_->take();
                return {};
            } else {
                return p_->take();
            }
        } else {
            if (why != 0) throw Error(errno_code(why), "galay: waiting for a spawned task");
            if (p_ == nullptr) throw std::logic_error("galay: co_await on an empty JoinHandle");
            if constexpr (std::is_void_v<T>)
                p_->take();
            else
                return p_->take();
        }
    }

private:
    bool withdraw() noexcept override {
        std::uint32_t expected = SpawnBase::kAwaited;
        if (!p_->state.compare_exchange_strong(expected, SpawnBase::kRunning,
                                               std::memory_order_acq_rel))
            return false;
        registered_ = false;
        return true;
    }

    SpawnPromise<T>* p_;
    bool registered_ = false;
};

} // namespace detail

/// The handle of a spawned task (see the top of this header).
template <class T>
class JoinHandle {
public:
    JoinHandle() noexcept = default;
    /// Takes over the task of `o`, which is empty after.
    JoinHandle(JoinHandle&& o) noexcept
        : p_(std::exchange(o.p_, nullptr)) {}
    /// Detaches its own task, then takes over the one of `o`.
    JoinHandle& operator=(JoinHandle&& o) noexcept {
        if (this != &o) {
            detach();
            p_ = std::exchange(o.p_, nullptr);
        }
        return *this;
    }
    JoinHandle(const JoinHandle&) = delete;
    JoinHandle& operator=(const JoinHandle&) = delete;
    ~JoinHandle() { detach(); }

    /// True while it refers to a task (not moved from, detached or joined).
    bool valid() const noexcept { return p_ != nullptr; }
    /// The task has finished (its result is ready, or the runtime shut down).
    bool finished() const noexcept {
        return p_ != nullptr &&
               p_->state.load(std::memory_order_acquire) == detail::SpawnBase::kDone;
    }
    /// Cancel the task's pending operation (and every later one); from any thread. No effect on
    /// a finished task.
    void abort() noexcept {
        if (p_ != nullptr) p_->request_abort();
    }
    /// Let the task run on without a handle (what the destructor does).
    void detach() noexcept {
        if (p_ != nullptr) std::exchange(p_, nullptr)->release();
    }

    /// Block this thread until the task finishes; returns its value or rethrows its exception.
    /// For threads that run no scheduler (inside a task, `co_await` the handle instead: calling
    /// join() there stops the program with a message).
    T join() {
        if (p_ == nullptr) throw std::logic_error("galay: join() on an empty JoinHandle");
        p_->wait_done();
        if constexpr (std::is_void_v<T>)
            p_->take();
        else
            return p_->take();
    }

    /// `co_await handle` (from a task on any scheduler): the value, or the task's exception.
    detail::HandleAwaiter<T> operator co_await() const noexcept {
        return detail::HandleAwaiter<T>(p_);
    }
    /// `co_await handle.timeout(d)`: a `Result<T>`; `timed_out` when the task is not done within
    /// `d` (the task goes on), `operation_canceled` when the wait was cancelled or the runtime
    /// shut down. The task's own exception is rethrown.
    detail::HandleAwaiter<T, true> timeout(std::chrono::nanoseconds d) const noexcept {
        return detail::HandleAwaiter<T, true>(p_).timeout(d);
    }
    /// `co_await handle.deadline(t)`: as timeout(), with an absolute steady-clock deadline.
    detail::HandleAwaiter<T, true>
    deadline(std::chrono::steady_clock::time_point t) const noexcept {
        return detail::HandleAwaiter<T, true>(p_).deadline(t);
    }
    /// `co_await handle.result()`: as `co_await handle`, but a cancelled wait or a shutdown comes
    /// back as a `Result` error instead of an exception.
    detail::HandleAwaiter<T, true> result() const noexcept {
        return detail::HandleAwaiter<T, true>(p_);
    }

private:
    // Made only by the spawns: a handle is one of the task's two references.
    friend class Scheduler;
    friend class Runtime;
    explicit JoinHandle(detail::SpawnPromise<T>& p) noexcept
        : p_(&p) {}

    detail::SpawnPromise<T>* p_ = nullptr;
};

} // namespace galay
