// galay/task.hpp: the coroutine type every async function returns.
//
//     galay::Task<int> answer() { co_return 42; }
//     galay::Task<void> main_task() {
//         int v = co_await answer();                       // lazy: starts here
//         auto [a, b] = co_await galay::when_all(answer(), answer());
//         // the first to finish wins; the losers are cancelled
//         auto first = co_await galay::when_any(answer(), galay::sleep(1s));
//     }
//
// A `Task` does nothing until it is awaited (or handed to `spawn` / `block_on`). Awaiting it and
// finishing it use symmetric transfer, so a chain of 100,000 nested awaits does not grow the
// stack. An exception thrown in a task is rethrown in its awaiter; for a detached task (`spawn`)
// it is reported on stderr (see `set_unhandled_exception_handler`), never swallowed.
#pragma once

#include "galay/detail/cancel.hpp"
#include "galay/detail/join.hpp"
#include "galay/detail/task_promise.hpp"

#include <atomic>
#include <cassert>
#include <coroutine>
#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace galay {

/// A lazily started coroutine producing a `T`. Move-only; destroying it destroys the coroutine.
template <class T>
class [[nodiscard]] Task {
public:
    // (the promise: galay/detail/task_promise.hpp)
    /// The coroutine's promise (the compiler looks it up here).
    using promise_type = detail::TaskPromise<T>;
    /// The handle of the coroutine it owns.
    using handle_type = std::coroutine_handle<promise_type>;
    /// What `co_await task` gives.
    using value_type = T;

    Task() noexcept = default;
    /// Owns the coroutine `h` (the promise makes tasks this way).
    explicit Task(handle_type h) noexcept
        : h_(h) {}
    /// Takes over the coroutine of `other`, which owns none after.
    Task(Task&& other) noexcept
        : h_(std::exchange(other.h_, {})) {}
    /// Destroys its own coroutine, then takes over the one of `other`.
    Task& operator=(Task&& other) noexcept {
        if (this != &other) {
            if (h_) h_.destroy();
            h_ = std::exchange(other.h_, {});
        }
        return *this;
    }
    Task(const Task&) = delete;
    Task& operator=(const Task&) = delete;
    ~Task() {
        if (h_) h_.destroy();
    }

    /// True while it owns a coroutine.
    bool valid() const noexcept { return static_cast<bool>(h_); }
    /// True once the coroutine has finished.
    bool done() const noexcept { return h_ && h_.done(); }

    /// What `co_await std::move(task)` awaits: starts the task by symmetric transfer, resumes the
    /// caller when it ends.
    struct [[nodiscard]] Awaiter {
        /// The awaited coroutine.
        handle_type h;
        /// The awaiting galay task's promise, whose `child` is `h` while it runs (task dumps).
        detail::PromiseBase* parent = nullptr;
        /// Awaiter protocol, called by `co_await`: ready when there is nothing to run.
        bool await_ready() const noexcept { return !h || h.done(); }
        /// Awaiter protocol: the task continues `caller` and inherits its cancel scope.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> caller) noexcept {
            h.promise().continuation = caller;
            if (h.promise().scope == nullptr) h.promise().scope = detail::scope_of(caller);
            if constexpr (GALAY_TASK_DUMP && std::is_base_of_v<detail::PromiseBase, P> &&
                          alignof(promise_type) <= 16) {
                parent = &caller.promise();
                parent->child = h;
            }
            return h; // start the child by symmetric transfer
        }
        /// Awaiter protocol: the task's value, or its exception rethrown.
        T await_resume() {
            if constexpr (GALAY_TASK_DUMP)
                if (parent != nullptr) parent->child = {};
            return h.promise().take();
        }
    };
    /// Run the task in the awaiting one and give its value (`co_await std::move(t)` or `co_await
    /// f()`).
    [[nodiscard]] Awaiter operator co_await() && noexcept { return Awaiter{h_, nullptr}; }

    /// Give up ownership of the coroutine (used by spawn/block_on).
    handle_type release() noexcept { return std::exchange(h_, {}); }
    /// The coroutine, still owned by the task.
    handle_type handle() const noexcept { return h_; }

private:
    handle_type h_;
};

/// @cond galay_detail
namespace detail {
template <class T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
    return Task<T>{std::coroutine_handle<TaskPromise<T>>::from_promise(*this)};
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
    return Task<void>{std::coroutine_handle<TaskPromise<void>>::from_promise(*this)};
}
} // namespace detail
/// @endcond

// ---------------------------------------------------------------------------------------------
// Unhandled exceptions of detached tasks
// ---------------------------------------------------------------------------------------------

/// Called with the exception that ended a detached task (see set_unhandled_exception_handler).
using UnhandledExceptionHandler = void (*)(std::exception_ptr) noexcept;

/// Replace the reporter for exceptions escaping detached tasks (default: print to stderr).
/// Returns the previous handler.
UnhandledExceptionHandler set_unhandled_exception_handler(UnhandledExceptionHandler h) noexcept;
/// Report an exception nobody awaits (calls the current handler).
void report_unhandled_exception(std::exception_ptr e) noexcept;

// ---------------------------------------------------------------------------------------------
// when_all / when_any (their child coroutines and join awaiter: galay/detail/join.hpp)
// ---------------------------------------------------------------------------------------------

/// Run every task concurrently on the current scheduler; resumes when all have finished.
/// Returns their results (void becomes std::monostate). If any threw, the first exception (in
/// argument order) is rethrown after all have finished.
template <class... Ts>
[[nodiscard]] Task<std::tuple<detail::Lifted<Ts>...>> when_all(Task<Ts>... tasks) {
    std::tuple<detail::Slot<Ts>...> slots;
    std::vector<detail::JoinChild> children = detail::make_children(slots, std::move(tasks)...);
    detail::JoinState join;
    co_await detail::JoinAwaiter{join, children, nullptr};
    co_return std::apply([](auto&... s) { return std::tuple<detail::Lifted<Ts>...>{s.take()...}; },
                         slots);
}

/// Run a homogeneous set of tasks concurrently; results in input order.
template <class T>
[[nodiscard]] Task<std::vector<detail::Lifted<T>>> when_all(std::vector<Task<T>> tasks) {
    std::vector<detail::Slot<T>> slots(tasks.size());
    std::vector<detail::JoinChild> children = detail::make_children(slots, tasks);
    detail::JoinState join;
    co_await detail::JoinAwaiter{join, children, nullptr};
    std::vector<detail::Lifted<T>> out;
    out.reserve(slots.size());
    for (auto& s : slots)
        out.push_back(s.take());
    co_return out;
}

/// Run tasks concurrently; when the first finishes, the others are cancelled (their pending
/// operations complete with `operation_canceled`) and awaited. Returns the winner's result as a
/// variant whose index is the winner's position. If the winner threw, its exception is rethrown;
/// exceptions of cancelled losers are reported through the unhandled-exception handler.
template <class... Ts>
[[nodiscard]] Task<std::variant<detail::Lifted<Ts>...>> when_any(Task<Ts>... tasks) {
    static_assert(sizeof...(Ts) > 0, "when_any needs at least one task");
    std::tuple<detail::Slot<Ts>...> slots;
    std::vector<detail::JoinChild> children = detail::make_children(slots, std::move(tasks)...);
    detail::CancelScope scope;
    detail::JoinState join;
    join.losers = &scope;
    co_await detail::JoinAwaiter{join, children, &scope};
    std::optional<std::variant<detail::Lifted<Ts>...>> out;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (
            [&] {
                auto& s = std::get<I>(slots);
                if (I == join.winner)
                    out.emplace(std::in_place_index<I>, s.take());
                else if (s.error)
                    report_unhandled_exception(s.error);
            }(),
            ...);
    }(std::index_sequence_for<Ts...>{});
    co_return std::move(*out);
}

/// when_any over a homogeneous set: returns {index of the winner, its result}.
template <class T>
[[nodiscard]] Task<std::pair<std::size_t, detail::Lifted<T>>> when_any(std::vector<Task<T>> tasks) {
    std::vector<detail::Slot<T>> slots(tasks.size());
    std::vector<detail::JoinChild> children = detail::make_children(slots, tasks);
    detail::CancelScope scope;
    detail::JoinState join;
    join.losers = &scope;
    co_await detail::JoinAwaiter{join, children, &scope};
    for (std::size_t i = 0; i < slots.size(); ++i)
        if (i != join.winner && slots[i].error) report_unhandled_exception(slots[i].error);
    co_return std::pair<std::size_t, detail::Lifted<T>>{join.winner, slots[join.winner].take()};
}

/// Wrap any awaitable (an I/O operation, say) in a Task, e.g. to pass it to when_all/when_any.
template <class A>
[[nodiscard]] auto as_task(A awaitable) -> Task<decltype(std::declval<A&>().await_resume())> {
    co_return co_await std::move(awaitable);
}

/// A handle that cancels the task it is attached to with `with_cancel`. Single-threaded: call
/// `cancel()` on the thread that runs the attached tasks (from another thread, use
/// `galay::CancelToken`, galay/sync/cancel_token.hpp).
class CancelSource {
public:
    /// Cancel every pending operation of the attached task(s); later operations fail at once.
    void cancel() noexcept { scope_.request(); }
    /// True once `cancel()` has been called.
    bool cancelled() const noexcept { return scope_.requested(); }
    /// The scope that `with_cancel` attaches a task to.
    detail::CancelScope& scope() noexcept { return scope_; }

private:
    detail::CancelScope scope_;
};

namespace detail {

/// The cancellation scope of the awaiting coroutine (null outside galay tasks).
struct CurrentScope {
    CancelScope* scope = nullptr;
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        scope = scope_of(h);
        return false; // just looking
    }
    CancelScope* await_resume() const noexcept { return scope; }
};

/// The scope a `with_cancel` task runs in: a child of the caller's scope, reached by the
/// source through a relay, unlinked from both when the task is over (or its frame destroyed).
struct SourceLink {
    CancelScope scope;
    ScopeRelay relay{scope};
    SourceLink(CancelScope* caller, CancelScope& source) noexcept {
        scope.attach_to(caller);
        source.link(relay); // (a source cancelled already asks the scope at once)
    }
    SourceLink(const SourceLink&) = delete;
    SourceLink& operator=(const SourceLink&) = delete;
    ~SourceLink() { scope.detach(); } // (and the relay leaves the source's list as it goes)
};

} // namespace detail

/// Run `task` so that `source.cancel()` cancels whatever it is waiting on, as the caller's own
/// cancellation (a when_any it lost, JoinHandle::abort, a timeout, shutdown) still does. One
/// source may serve several tasks at once; it must outlive them.
template <class T>
[[nodiscard]] Task<T> with_cancel(CancelSource& source, Task<T> task) {
    detail::SourceLink link(co_await detail::CurrentScope{}, source.scope());
    Task<T> inner = std::move(task); // (a local after `link`: its frame goes first)
    if (auto h = inner.handle()) h.promise().scope = &link.scope;
    co_return co_await std::move(inner); // (T = void: co_return of a void expression)
}

} // namespace galay
