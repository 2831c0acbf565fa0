// The awaitable of `galay::idle(op)` (galay/net/server.hpp): `op` awaited in a cancel scope of
// its own that the connection it runs in (a task of `galay::serve`) lists as its idle wait, so
// that a drain can cancel that wait, and that wait alone, while the connection is at rest.
#pragma once

#include "galay/detail/cancel.hpp"
#include "galay/detail/in_place.hpp"
#include "galay/detail/task_promise.hpp"

#include <coroutine>
#include <optional>
#include <type_traits>
#include <utility>

namespace galay::detail {

/// The serve connection whose scope `scope` is, or is under (null: none): it now waits in
/// `child`, which is linked under `scope`; with its server draining, `child` is cancelled at once.
void* idle_begin(CancelScope* scope, CancelScope& child) noexcept;
/// The wait in `child` is over: the connection `conn` is active again.
void idle_end(void* conn, CancelScope& child) noexcept;

/// What `co_await a` awaits: `a.operator co_await()` when it has one, else `a` itself.
template <class A>
concept HasMemberCoAwait = requires(A&& a) { std::move(a).operator co_await(); };

template <class A>
class [[nodiscard]] IdleWait : public AwaitedInPlace<IdleWait<A>> {
    template <class B>
    struct AwaiterOf {
        using type = B*;
    };
    template <HasMemberCoAwait B>
    struct AwaiterOf<B> {
        using type = std::optional<decltype(std::declval<B&&>().operator co_await())>;
    };

public:
    explicit IdleWait(A&& a) noexcept(std::is_nothrow_move_constructible_v<A>)
        : a_(std::move(a)) {}
    explicit IdleWait(const A& a)
        : a_(a) {}
    /// Only before it is awaited.
    IdleWait(IdleWait&& o) noexcept(std::is_nothrow_move_constructible_v<A>)
        : a_(std::move(o.a_)) {}

    bool await_ready() {
        if constexpr (HasMemberCoAwait<A>)
            awaiter_.emplace(std::move(a_).operator co_await());
        else
            awaiter_ = &a_;
        return inner().await_ready();
    }
    template <class P>
    decltype(auto) await_suspend(std::coroutine_handle<P> h) {
        if constexpr (std::is_base_of_v<PromiseBase, P>) {
            CancelScope* caller = h.promise().scope;
            conn_ = idle_begin(caller, child_);
            if (conn_ != nullptr) {
                // The operation links into the scope of the coroutine that awaits it, as it
                // suspends: for that moment, the idle scope.
                struct Restore {
                    CancelScope*& slot;
                    CancelScope* saved;
                    ~Restore() { slot = saved; }
                } restore{h.promise().scope, caller};
                h.promise().scope = &child_;
                return inner().await_suspend(h);
            }
        }
        return inner().await_suspend(h);
    }
    decltype(auto) await_resume() {
        struct End {
            IdleWait& w;
            ~End() {
                if (w.conn_ != nullptr) idle_end(w.conn_, w.child_);
            }
        } end{*this};
        return inner().await_resume();
    }

private:
    auto& inner() noexcept { return *awaiter_; }

    A a_;
    typename AwaiterOf<A>::type awaiter_{};
    CancelScope child_;
    void* conn_ = nullptr;
};

} // namespace galay::detail
