// galay/detail/join.hpp: the machinery of when_all / when_any (galay/task.hpp): one child
// coroutine per task, each storing its outcome in a slot, and the awaiter that starts them all and
// resumes the parent when the last has finished. Included by galay/task.hpp.
#pragma once

#include "galay/detail/cancel.hpp"
#include "galay/detail/task_promise.hpp"
#include "galay/detail/wait_desc.hpp"

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace galay {

namespace detail {

template <class T>
using Lifted = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

struct JoinChild;

/// Shared by the children of one when_all/when_any: counts them down and resumes the parent.
/// While the parent waits it is linked into the parent's scope, so that a task dump shows the
/// join and its pending children (its cancel() does nothing: the children's own operations are
/// what a request reaches).
struct JoinState final : Cancellable {
    JoinState() = default;
    JoinState(const JoinState&) = delete;
    JoinState& operator=(const JoinState&) = delete;
    ~JoinState() { CancelScope::unlink(*this); }

    std::size_t remaining = 0;
    std::coroutine_handle<> parent;
    std::size_t winner = static_cast<std::size_t>(-1); // first child to finish (when_any)
    CancelScope* losers = nullptr;                     // scope to cancel on first finish
    const JoinChild* children = nullptr;               // (a task dump reads them)
    std::size_t count = 0;

    void cancel() noexcept override {}
    void describe(WaitDesc& d) const noexcept override;
};
/// Link `j` into `scope` (may be null) for task dumps, noting when the wait began.
void join_began(JoinState& j, CancelScope* scope) noexcept;

/// A child coroutine of a join: runs one task, stores its outcome, counts down on completion.
struct JoinChild {
    struct promise_type : PromiseBase {
        JoinState* join = nullptr;
        std::size_t index = 0;
        JoinChild get_return_object() noexcept {
            return JoinChild{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        struct Final {
            bool await_ready() const noexcept { return false; }
            std::coroutine_handle<>
            await_suspend(std::coroutine_handle<promise_type> h) const noexcept {
                JoinState& j = *h.promise().join;
                if (j.winner == static_cast<std::size_t>(-1)) {
                    j.winner = h.promise().index;
                    if (j.losers != nullptr) j.losers->request();
                }
                if (--j.remaining == 0) return j.parent;
                return std::noop_coroutine();
            }
            void await_resume() const noexcept {}
        };
        Final final_suspend() const noexcept { return {}; }
        void return_void() noexcept {}
        // The body catches everything into the slot; reaching here is a bug in galay itself.
        void unhandled_exception() noexcept { std::terminate(); }
    };

    explicit JoinChild(std::coroutine_handle<promise_type> h) noexcept
        : h(h) {}
    JoinChild(JoinChild&& o) noexcept
        : h(std::exchange(o.h, {})) {}
    JoinChild& operator=(JoinChild&&) = delete;
    ~JoinChild() {
        if (h) h.destroy();
    }
    std::coroutine_handle<promise_type> h;
};

/// One child's outcome: a value, or the exception it threw.
template <class T>
struct Slot {
    std::optional<Lifted<T>> value;
    std::exception_ptr error;

    Lifted<T> take() {
        if (error) std::rethrow_exception(error);
        return std::move(*value);
    }
};

template <class T>
JoinChild run_child(Task<T> task, Slot<T>& slot) {
    try {
        if constexpr (std::is_void_v<T>) {
            co_await std::move(task);
            slot.value.emplace();
        } else {
            slot.value.emplace(co_await std::move(task));
        }
    } catch (...) {
        slot.error = std::current_exception();
    }
}

/// One child coroutine per task, each storing its outcome in the matching slot (not started).
template <class... Ts>
std::vector<JoinChild> make_children(std::tuple<Slot<Ts>...>& slots, Task<Ts>... tasks) {
    std::vector<JoinChild> children;
    children.reserve(sizeof...(Ts));
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (children.push_back(run_child(std::move(tasks), std::get<I>(slots))), ...);
    }(std::index_sequence_for<Ts...>{});
    return children;
}
template <class T>
std::vector<JoinChild> make_children(std::vector<Slot<T>>& slots, std::vector<Task<T>>& tasks) {
    std::vector<JoinChild> children;
    children.reserve(tasks.size());
    for (std::size_t i = 0; i < tasks.size(); ++i)
        children.push_back(run_child(std::move(tasks[i]), slots[i]));
    return children;
}

/// Starts every child, then suspends the parent until the last one has finished.
struct [[nodiscard]] JoinAwaiter {
    JoinState& join;
    std::vector<JoinChild>& children;
    CancelScope* child_scope; // scope the children run in (null: inherit the parent's)

    bool await_ready() const noexcept { return children.empty(); }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> parent) noexcept {
        join.parent = parent;
        if constexpr (GALAY_TASK_DUMP) {
            join.children = children.data();
            join.count = children.size();
            join_began(join, scope_of(parent));
        }
        CancelScope* scope = child_scope;
        if (scope != nullptr)
            scope->attach_to(scope_of(parent));
        else
            scope = scope_of(parent);
        join.remaining = children.size() + 1; // +1: no child resumes us before all have started
        for (std::size_t i = 0; i < children.size(); ++i) {
            auto& p = children[i].h.promise();
            p.join = &join;
            p.index = i;
            p.scope = scope;
            p.continuation = {};
            children[i].h.resume();
        }
        return --join.remaining != 0;
    }
    void await_resume() const noexcept {
        if (child_scope != nullptr) child_scope->detach();
        if constexpr (GALAY_TASK_DUMP) CancelScope::unlink(join);
    }
};

} // namespace detail

} // namespace galay
