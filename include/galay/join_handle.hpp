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

#include "galay/detail/spawned_task.hpp"
#include "galay/error.hpp"
#include "galay/task.hpp"
#include "galay/time/timeout.hpp"

#include <chrono>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace galay {

class Scheduler;
class Runtime;

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
    detail::HandleAwaiter<T, true> timeout(Timeout d) const noexcept {
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
