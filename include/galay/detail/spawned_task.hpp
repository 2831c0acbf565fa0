// The state of a spawned task, shared by the task and its JoinHandle (galay/join_handle.hpp):
// the wrapper coroutine every spawn makes around the user's task, and the awaiter of
// `co_await handle`. What a later task dump reads per task lives in SpawnBase.
#pragma once

#include "galay/detail/remote_wait.hpp"
#include "galay/error.hpp"
#include "galay/task.hpp"

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <source_location>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace galay {

class Scheduler;

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
    // --- what a task dump reads (galay/task_dump.hpp), on the worker's thread ---
    std::uint64_t id = 0;         // unique in the process (next_task_id)
    std::unique_ptr<char[]> name; // set_task_name(), from the task itself
    std::coroutine_handle<> root; // the user's task, while it runs (its frame chain's top)

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

/// A process-unique task id: the spawning thread's number in the high bits, its own count below
/// (no shared counter is touched per spawn).
std::uint64_t next_task_id() noexcept;
/// The id of the spawned task a scope belongs to (0: none).
std::uint64_t task_id_of(const CancelScope* scope) noexcept;

/// A JoinHandle wait's description: the awaited task and its worker.
void describe_join(const SpawnBase* awaited, WaitDesc& d) noexcept;

/// A task of a scheduler with a stall detector or hooks runs for the first time.
void task_first_resume(SpawnBase& t) noexcept;

template <class T>
struct SpawnCoro;

/// The final awaiter of a spawned task's wrapper (promise `P`): finish() the task. That may
/// destroy this very frame (when nobody holds the state any more): allowed, the coroutine is
/// suspended here.
template <class P>
struct FinishAtFinal {
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<P> h) const noexcept { h.promise().finish(); }
    void await_resume() const noexcept {}
};

/// What every spawned task's promise adds to the shared state: the outcome, and the promise
/// members that only concern it.
template <class T>
struct SpawnOutcome : SpawnBase {
    Slot<T> slot;

    ~SpawnOutcome() {
        // Nobody took it and nobody ever will: report it as for any detached task.
        if (slot.error && !taken && !shut_down) report_unhandled_exception(slot.error);
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { slot.error = std::current_exception(); }

    Lifted<T> take() {
        check_result();
        taken = true;
        return slot.take();
    }
};

/// The wrapper's promise: the shared state plus the user's task and its outcome.
template <class T>
struct SpawnPromise final : SpawnOutcome<T> {
    Task<T> inner;

    SpawnPromise() noexcept {
        this->drop_inner = [](SpawnBase& b) noexcept {
            b.root = {};
            static_cast<SpawnPromise&>(b).inner = Task<T>{};
        };
    }

    SpawnCoro<T> get_return_object() noexcept;
    FinishAtFinal<SpawnPromise> final_suspend() const noexcept { return {}; }
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
    p.root = {};
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
    if constexpr (GALAY_TASK_DUMP) {
        p.id = next_task_id();
        if constexpr (alignof(typename Task<T>::promise_type) <= 16) p.root = task.handle();
    }
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

    /// Task dumps: the task it waits for.
    void describe(WaitDesc& d) const noexcept override {
        RemoteWait::describe(d);
        describe_join(p_, d);
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

} // namespace galay
