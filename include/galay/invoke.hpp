// galay/invoke.hpp: run a function on another worker and get its answer back.
//
//     galay::Task<std::size_t> count_on(galay::Runtime& rt, unsigned worker) {
//         std::size_t n = co_await rt.invoke_on(worker, [] { return shard_size(); });
//         std::string s = co_await rt.invoke_on(worker, [] { return load_async(); }); // a Task
//         galay::Result<std::size_t> r = co_await rt.invoke_on(worker, [] {
//             return shard_size();
//         }).timeout(100ms);                                     // timed_out: gave up waiting
//         co_return n;
//     }
//     std::size_t m = rt.invoke_on(0, [] { return shard_size(); }).join(); // a plain thread
//
// `rt.invoke_on(worker, fn)` is a message to that worker's loop and a reply to the caller's:
// `fn()` runs on worker `worker`, alongside its tasks, and its value (or the exception it threw)
// comes back to the awaiting task, on the caller's own worker. `fn` may be a plain callable or
// return a `Task<T>` (a coroutine: it runs as a task of that worker, so it may await I/O
// there). The callable is moved into the call; what it captures must be safe to use on the
// other worker (values, or state that belongs to that worker, as a `Sharded<T>` shard does).
// A result that is a reference is copied on the worker that made it. With g++ 12, a callable
// that owns something (a `std::string`, a `unique_ptr` captured by value) must not be a
// temporary of the `co_await` expression (it would be destroyed twice, as the README's
// aggregate hazard): bind the call first, `auto call = rt.invoke_on(w, [s = std::move(s)] {..});
// co_await std::move(call);`. Captures of pointers, references and numbers are safe inline.
//
// Cost: nothing is allocated once warm. The call's state (the callable and the reply slot) is
// one small coroutine frame from a per-thread cache; a callable returning a `Task` adds that
// task's own frame. It crosses workers as `spawn_on` does (one post there, one post back),
// without a second frame.
//
// On the caller's own worker the call is not posted: a plain callable runs at once, inside the
// `co_await`, and a coroutine is awaited in place (as `co_await fn()`), in the caller's
// cancellation scope. That is what calling it directly would do: the state is this worker's
// already, so a round trip through the ready queue would only reorder it behind other tasks.
//
// When the waiting task is cancelled or its `.timeout()` fires, it resumes at once, and the call
// is withdrawn as `JoinHandle::abort` would: not started yet, `fn` is skipped; a plain callable
// already running runs to completion (its result is dropped on its worker); a coroutine already
// running has its pending operation cancelled and ends however it handles that. The reply slot
// belongs to the call, not to the waiting frame, so the other worker never writes into memory the
// caller freed. An exception of a call nobody waits for any more goes to the unhandled-exception
// handler.
//
// Outcomes: `co_await call` gives the value and rethrows `fn`'s exception; a cancelled wait, and
// a call refused or dropped because the runtime shut down, throw `galay::Error`
// (`operation_canceled`). `.result()`, `.timeout(d)` and `.deadline(t)` give a `Result<T>`
// instead, with those two as errors (`timed_out` for the deadline); `fn`'s own exception is
// still rethrown. `.join()` blocks a thread that runs no scheduler until the value is there.
#pragma once

#include "galay/detail/invoke_task.hpp"
#include "galay/detail/remote_wait.hpp"
#include "galay/error.hpp"
#include "galay/task.hpp"
#include "galay/time/timeout.hpp"

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

namespace galay {

class Runtime;

/// One call of `F` on a worker (see the top of this header): what `Runtime::invoke_on` returns.
/// Await it once (`co_await`, or `.result()` / `.timeout(d)` / `.deadline(t)` for a `Result`), or
/// `.join()` it on a plain thread. `AsResult`: the awaited value is a `Result<T>`.
template <class F, bool AsResult = false>
class [[nodiscard]] Invoke final : public detail::TimedRemoteWait<Invoke<F, AsResult>> {
    using Promise = detail::InvokePromise<F>;
    static constexpr bool kCoroutine = Promise::kCoroutine;

public:
    /// What `fn` gives back (a Task's value for a coroutine).
    using value_type = detail::invoke_value_t<F>;
    /// What `co_await` gives: the value, or a `Result` of it.
    using result_type = std::conditional_t<AsResult, Result<value_type>, value_type>;

    /// A call of `fn` on worker `worker` of `rt` (made by `Runtime::invoke_on`).
    Invoke(Runtime& rt, unsigned worker, F fn) noexcept(std::is_nothrow_move_constructible_v<F>)
        : rt_(&rt)
        , worker_(worker)
        , fn_(std::move(fn)) {}
    /// Only before it is awaited.
    Invoke(Invoke&& o) noexcept(std::is_nothrow_move_constructible_v<F>)
        : detail::TimedRemoteWait<Invoke>(std::move(o))
        , rt_(o.rt_)
        , worker_(o.worker_)
        , fn_(std::move(o.fn_)) {}
    ~Invoke() {
        if (p_ == nullptr) return;
        if (registered_) (void)withdraw(); // the awaiting frame is destroyed (shutdown)
        if (p_ != nullptr) p_->release();
    }

    /// The same call, awaited as a `Result<T>`: a cancelled wait or a shutdown is an error, not
    /// an exception.
    Invoke<F, true> result() && { return as_result(this->deadline_ns_); }
    /// Give up waiting after `d` (`timed_out`); the call is withdrawn (see the top). A `Result`.
    /// An empty `d` (`galay::no_timeout`) sets no deadline.
    Invoke<F, true> timeout(Timeout d) && {
        std::int64_t ns = this->deadline_ns_;
        if (d) ns = this->steady_ns() + std::max<std::int64_t>(d.value().count(), 1);
        return as_result(ns);
    }
    /// Give up waiting at the steady-clock time `t` (`timed_out`). A `Result`.
    Invoke<F, true> deadline(std::chrono::steady_clock::time_point t) && {
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
        return as_result(std::max<std::int64_t>(ns, 1));
    }

    /// Run the call and block this thread until it is done; the value, or the exception (a
    /// call the shut-down runtime refused throws `operation_canceled`). For threads that run no
    /// scheduler (on a worker it stops the program with a message: `co_await` it there).
    value_type join() && {
        p_ = &detail::make_invoke(std::move(*fn_));
        detail::invoke_place(*rt_, worker_, *p_);
        p_->wait_done();
        return take();
    }

    /// Awaiter protocol: a plain callable for this very worker runs inside await_resume.
    bool await_ready() {
        local_ = detail::on_worker(*rt_, worker_);
        return local_ && !kCoroutine;
    }
    /// Awaiter protocol: post the call to its worker (or start the coroutine here, on this one).
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) {
        detail::CancelScope* scope = detail::scope_of(h);
        if (scope != nullptr && scope->requested()) { // a cancelled task's calls fail at once
            cancelled_at_once_ = true;
            return h;
        }
        if constexpr (kCoroutine) {
            if (local_) {
                inner_.emplace(std::invoke(*fn_));
                auto c = inner_->handle();
                c.promise().continuation = h;
                if (c.promise().scope == nullptr) c.promise().scope = scope;
                return c;
            }
        }
        this->set_waiter(h);
        p_ = &detail::make_invoke(std::move(*fn_));
        p_->waiter = h;
        p_->waiter_sched = this->sched_;
        p_->state.store(detail::SpawnBase::kAwaited, std::memory_order_relaxed);
        registered_ = true;
        detail::invoke_place(*rt_, worker_, *p_); // (publishes the state to the worker)
        this->arm(scope);
        return std::noop_coroutine();
    }
    /// Awaiter protocol: the value (see the top for the failures).
    result_type await_resume() {
        if (local_) {
            if constexpr (kCoroutine) {
                if (inner_) return lift(inner_->handle().promise());
            } else {
                return lift_call();
            }
        }
        int why = cancelled_at_once_ ? ECANCELED : 0;
        if (registered_) {
            registered_ = false;
            why = this->end_wait();
        }
        if (why == 0 && p_ != nullptr && p_->shut_down) why = ECANCELED;
        if (why != 0) {
            if constexpr (AsResult)
                return fail(why);
            else
                throw Error(errno_code(why), "galay: invoke_on: waiting for the call");
        }
        if constexpr (AsResult) {
            if constexpr (std::is_void_v<value_type>) {
                take();
                return {};
            } else {
                return take();
            }
        } else {
            return take();
        }
    }

private:
    template <class G, bool R>
    friend class Invoke;

    /// The same call, not started, awaited as a `Result`, with the deadline `deadline_ns`.
    Invoke<F, true> as_result(std::int64_t deadline_ns) {
        Invoke<F, true> r(*rt_, worker_, std::move(*fn_));
        r.deadline_ns_ = deadline_ns;
        return r;
    }

    /// The outcome, from the call's state, which this then lets go of.
    value_type take() {
        Promise* p = std::exchange(p_, nullptr);
        struct Release {
            Promise* p;
            ~Release() { p->release(); }
        } release{p};
        if constexpr (std::is_void_v<value_type>)
            p->take();
        else
            return p->take();
    }
    /// A coroutine run in place on this worker: its value or exception.
    template <class TP>
    result_type lift(TP& promise) {
        if constexpr (std::is_void_v<value_type>) {
            promise.take();
            if constexpr (AsResult) return {};
        } else {
            return promise.take();
        }
    }
    /// A plain callable run here, now.
    result_type lift_call() {
        if constexpr (std::is_void_v<value_type>) {
            std::invoke(*fn_);
            if constexpr (AsResult) return {};
        } else {
            return std::invoke(*fn_);
        }
    }

    /// A cancellation or deadline on the caller's thread: take the waiter back unless the call
    /// has finished (its post is then on the way) and withdraw the call (JoinHandle::abort).
    bool withdraw() noexcept override {
        std::uint32_t expected = detail::SpawnBase::kAwaited;
        if (!p_->state.compare_exchange_strong(expected, detail::SpawnBase::kRunning,
                                               std::memory_order_acq_rel))
            return false;
        // (registered_ stays: await_resume still ends the wait, which reads why it ended)
        p_->request_abort();
        std::exchange(p_, nullptr)->release();
        return true;
    }

    Runtime* rt_;
    unsigned worker_;
    std::optional<F> fn_;
    Promise* p_ = nullptr;
    // A coroutine awaited in place, on its own worker.
    [[no_unique_address]] std::conditional_t<kCoroutine, std::optional<Task<value_type>>,
                                             std::monostate>
        inner_;
    bool local_ = false;
    bool registered_ = false;
    bool cancelled_at_once_ = false;
};

} // namespace galay
