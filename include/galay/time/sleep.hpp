// galay/time/sleep.hpp: sleeping and deadlines on the current scheduler's timer heap.
//
//     co_await galay::sleep(10ms);
//     co_await galay::sleep_until(std::chrono::steady_clock::now() + 1s);
//     auto r = co_await galay::timeout(2s, fetch());  // Result<T>: timed_out if fetch is too slow
//     auto n = co_await stream.recv(buf).timeout(2s); // single operations have .timeout() too
//
// Timers belong to the scheduler of the thread that armed them; there is no timer thread. A
// sleep is cancellable: in a cancelled task (when_any loser, CancelSource) it returns
// `operation_canceled` at once.
#pragma once

#include "galay/detail/cancel.hpp"
#include "galay/runtime.hpp"
#include "galay/time/timeout.hpp"

#include <chrono>
#include <type_traits>

namespace galay {

namespace detail {
template <class T>
struct IsResult; // is T a Result<U> (below)
} // namespace detail

/// Suspend the current task for `d` (a non-positive duration still yields once).
[[nodiscard]] Task<Result<void>> sleep(std::chrono::nanoseconds d);
/// Suspend the current task until the steady clock reaches `t`.
[[nodiscard]] Task<Result<void>> sleep_until(std::chrono::steady_clock::time_point t);

/// Run `task`; if it has not finished within `d`, cancel it (its pending operation is cancelled
/// and finished first) and return `std::errc::timed_out`. A task returning `Result<U>` gives
/// `Result<U>` (not nested); `void` gives `Result<void>`. An empty `d` (`galay::no_timeout`)
/// runs the task without a deadline (and without the timer task).
///
/// What the task had done by then stays done, and what it would have returned is dropped: a
/// task that read part of a message from a stream leaves the stream past those bytes. Where the
/// stream must stay usable after a timeout, put the deadline on its operations instead
/// (`.timeout(d)` / `.deadline(t)` on a recv consume nothing when they time out).
template <class T>
[[nodiscard]] auto timeout(Timeout d, Task<T> task) {
    using Out = std::conditional_t<detail::IsResult<T>::value, T,
                                   std::conditional_t<std::is_void_v<T>, Result<void>, Result<T>>>;
    return [](Timeout d, Task<T> task) -> Task<Out> {
        if (!d) {
            if constexpr (std::is_void_v<T>) {
                co_await std::move(task);
                co_return Out{};
            } else {
                auto v = co_await std::move(task);
                co_return Out(std::move(v));
            }
        }
        auto r = co_await when_any(std::move(task), sleep(d.value()));
        if (r.index() == 1) co_return Out(std::unexpected(make_error_code(std::errc::timed_out)));
        if constexpr (std::is_void_v<T>)
            co_return Out{};
        else
            co_return Out(std::move(std::get<0>(r)));
    }(d, std::move(task));
}

namespace detail {

/// Suspends until a steady-clock deadline, or until its task's scope is cancelled.
class [[nodiscard]] SleepAwaiter final : public Cancellable {
public:
    explicit SleepAwaiter(std::int64_t deadline_ns) noexcept { node_.deadline_ns = deadline_ns; }
    SleepAwaiter(SleepAwaiter&&) = delete;

    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        return suspend(h, scope_of(h));
    }
    Result<void> await_resume() noexcept {
        if (scope_ != nullptr) CancelScope::unlink(*this);
        if (cancelled_) return fail(ECANCELED);
        return {};
    }
    void cancel() noexcept override;
    void describe(WaitDesc& d) const noexcept override;

private:
    bool suspend(std::coroutine_handle<> h, CancelScope* scope);
    static void fire(TimerNode* n);

    TimerNode node_;
    std::coroutine_handle<> waiter_;
    CancelScope* scope_ = nullptr;
    bool cancelled_ = false;
};

template <class T>
struct IsResult : std::false_type {};
template <class T>
struct IsResult<Result<T>> : std::true_type {};

} // namespace detail

} // namespace galay
