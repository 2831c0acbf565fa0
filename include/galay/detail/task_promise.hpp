// galay/detail/task_promise.hpp: the promise behind galay::Task (galay/task.hpp): where a finished
// coroutine goes next (symmetric transfer), the cancellation scope it runs in, and its result or
// exception. Included by galay/task.hpp; not meant to be included on its own.
#pragma once

#include "galay/detail/cancel.hpp"

#include <cassert>
#include <coroutine>
#include <exception>
#include <type_traits>
#include <utility>
#include <variant>

// The bookkeeping of task dumps (galay/task_dump.hpp) is always on; the CMake option
// GALAY_TASK_DUMP=OFF leaves it out only to measure what it costs.
#ifndef GALAY_TASK_DUMP
#define GALAY_TASK_DUMP 1
#endif

namespace galay {

template <class T = void>
class Task;

namespace detail {

/// What every galay promise has: where to go when done, and the cancellation scope it runs in.
struct PromiseBase {
    std::coroutine_handle<> continuation;
    CancelScope* scope = nullptr;
    // The galay task this one awaits now (null when it awaits anything else): the link a task
    // dump follows from a spawned task's root down to its leaf frame, read only at dump time.
    std::coroutine_handle<> child;

    struct FinalAwaiter {
        bool await_ready() const noexcept { return false; }
        // Symmetric transfer: returning the continuation (instead of resuming it) lets the compiler
        // turn the hand-off into a tail call, so deep await chains run in constant stack.
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) const noexcept {
            std::coroutine_handle<> c = h.promise().continuation;
            return c ? c : std::noop_coroutine();
        }
        void await_resume() const noexcept {}
    };

    std::suspend_always initial_suspend() const noexcept { return {}; }
    [[nodiscard]] FinalAwaiter final_suspend() const noexcept { return {}; }
};

/// The PromiseBase of a coroutine whose promise derives from it (where `child` points): the
/// promise sits right after the frame's two function pointers for any promise aligned to at most
/// 16 bytes (GCC and Clang), which is why only those are linked.
inline PromiseBase& promise_base_of(std::coroutine_handle<> h) noexcept {
    return std::coroutine_handle<PromiseBase>::from_address(h.address()).promise();
}

/// The cancellation scope of the coroutine behind `h`, if it is a galay coroutine.
template <class P>
CancelScope* scope_of(std::coroutine_handle<P> h) noexcept {
    if constexpr (std::is_base_of_v<PromiseBase, P>)
        return h.promise().scope;
    else
        return nullptr;
}

template <class T>
struct TaskPromise : PromiseBase {
    std::variant<std::monostate, T, std::exception_ptr> result;

    Task<T> get_return_object() noexcept;
    void unhandled_exception() noexcept { result.template emplace<2>(std::current_exception()); }
    template <class U = T>
        requires std::is_convertible_v<U&&, T>
    void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
        result.template emplace<1>(std::forward<U>(v));
    }
    T take() {
        if (result.index() == 2) std::rethrow_exception(std::get<2>(result));
        assert(result.index() == 1 && "task resumed its awaiter without a result");
        return std::move(std::get<1>(result));
    }
};

template <>
struct TaskPromise<void> : PromiseBase {
    std::exception_ptr error;

    Task<void> get_return_object() noexcept;
    void unhandled_exception() noexcept { error = std::current_exception(); }
    void return_void() noexcept {}
    void take() {
        if (error) std::rethrow_exception(error);
    }
};

} // namespace detail

} // namespace galay
