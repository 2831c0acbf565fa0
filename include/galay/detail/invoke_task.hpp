// The task behind `Runtime::invoke_on` (galay/invoke.hpp): a spawned task (SpawnBase, the state
// a JoinHandle shares) whose coroutine frame holds the callable and its outcome and comes from a
// per-thread cache of frames instead of the heap, so a call allocates nothing once warm. The
// frame is freed where the caller takes the outcome (SpawnBase::finish lets go of the worker's
// reference before it wakes the caller), which keeps each thread's cache fed by its own calls.
#pragma once

#include "galay/detail/spawned_task.hpp"
#include "galay/task.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <type_traits>

namespace galay {

class Runtime;

namespace detail {

/// A block of at least `n` bytes from this thread's cache (the heap when it is empty or `n` is
/// large). Any thread.
void* invoke_frame_alloc(std::size_t n);
/// Give a block of `invoke_frame_alloc(n)` back to this thread's cache (any thread).
void invoke_frame_free(void* p, std::size_t n) noexcept;
/// True on the thread of worker `worker` of `rt`.
bool on_worker(const Runtime& rt, unsigned worker) noexcept;
/// Start the invoke task `t` on worker `worker` of `rt` (or refuse it after shutdown).
void invoke_place(Runtime& rt, unsigned worker, SpawnBase& t) noexcept;

template <class R>
struct IsTask : std::false_type {};
template <class U>
struct IsTask<Task<U>> : std::true_type {};

/// What a call of `F` gives back across workers: a Task's value for a coroutine, the decayed
/// return value otherwise (a reference is copied: it would point into another worker's state).
template <class F, class R = std::invoke_result_t<F&>>
struct InvokeValue {
    using type = std::remove_cvref_t<R>;
};
template <class F, class U>
struct InvokeValue<F, Task<U>> {
    using type = U;
};
template <class F>
using invoke_value_t = typename InvokeValue<F>::type;

template <class F>
struct InvokeCoro;

/// The invoke task's promise: the spawned-task state, the callable, the coroutine it returned
/// (if it is one) and the outcome.
template <class F>
struct InvokePromise final : SpawnOutcome<invoke_value_t<F>> {
    using T = invoke_value_t<F>;
    static constexpr bool kCoroutine = IsTask<std::invoke_result_t<F&>>::value;

    std::optional<F> fn;
    std::optional<Task<T>> inner; // (kCoroutine) the callable's task, destroyed first

    // (An exception of a call whose caller gave up is reported by SpawnOutcome.)
    InvokePromise() noexcept {
        this->drop_inner = [](SpawnBase& b) noexcept {
            auto& self = static_cast<InvokePromise&>(b);
            self.inner.reset();
            self.fn.reset();
        };
    }

    static void* operator new(std::size_t n) { return invoke_frame_alloc(n); }
    static void operator delete(void* p, std::size_t n) noexcept { invoke_frame_free(p, n); }

    InvokeCoro<F> get_return_object() noexcept;
    FinishAtFinal<InvokePromise> final_suspend() const noexcept { return {}; }
};

template <class F>
struct InvokeCoro {
    using promise_type = InvokePromise<F>;
    std::coroutine_handle<InvokePromise<F>> h;
};

template <class F>
InvokeCoro<F> InvokePromise<F>::get_return_object() noexcept {
    return {std::coroutine_handle<InvokePromise<F>>::from_promise(*this)};
}

template <class F>
InvokeCoro<F> invoke_body() {
    InvokePromise<F>& p = co_await PromiseOf<InvokePromise<F>>{};
    using T = typename InvokePromise<F>::T;
    if (p.observed) [[unlikely]]
        task_first_resume(p);
    // Cancelled before it ran (the caller gave up, or the worker is shutting down): skipped.
    if (p.scope.requested()) {
        p.shut_down = true;
        co_return;
    }
    try {
        if constexpr (InvokePromise<F>::kCoroutine) {
            p.inner.emplace(std::invoke(*p.fn));
            if (auto h = p.inner->handle()) h.promise().scope = &p.scope;
            if constexpr (std::is_void_v<T>) {
                co_await std::move(*p.inner);
                p.slot.value.emplace();
            } else {
                p.slot.value.emplace(co_await std::move(*p.inner));
            }
        } else if constexpr (std::is_void_v<T>) {
            std::invoke(*p.fn);
            p.slot.value.emplace();
        } else {
            p.slot.value.emplace(std::invoke(*p.fn));
        }
    } catch (...) {
        p.slot.error = std::current_exception();
    }
    // What the callable holds is released on its worker, not where the caller takes the result.
    p.inner.reset();
    p.fn.reset();
}

/// The invoke task for `fn`, not started; the caller holds one reference, the task the other.
template <class F>
InvokePromise<F>& make_invoke(F&& fn) {
    InvokeCoro<std::remove_cvref_t<F>> c = invoke_body<std::remove_cvref_t<F>>();
    InvokePromise<std::remove_cvref_t<F>>& p = c.h.promise();
    p.self = c.h;
    p.scope.set_task(&p);
    p.fn.emplace(std::forward<F>(fn));
    return p;
}

} // namespace detail
} // namespace galay
