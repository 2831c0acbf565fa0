// galay/sync/cancel_token.hpp: a cancellation token any thread may trigger, for tasks on any
// workers.
//
//     galay::CancelToken shutdown;                     // outlives the tasks attached to it
//     rt.spawn(galay::with_cancel(shutdown, serve_client(std::move(conn))));  // any worker
//     auto fired = co_await shutdown.wait().timeout(1s); // a task waits for it (Result<void>)
//     shutdown.cancel();                               // any thread, a signal task, a plain thread
//
// `cancel()` is thread-safe and idempotent. Every task attached with `with_cancel(token, task)`,
// on whichever worker it runs, is cancelled on its own worker the way `when_any` cancels a loser:
// the operation it waits on completes with `operation_canceled` (a kernel op is cancelled and
// finished first) and its later operations fail at once; the task ends however it handles that
// and `with_cancel` gives what it returned or threw. A task attached after `cancel()` starts
// cancelled. `co_await token.wait()` lets any task wait for the cancellation itself.
//
// `CancelSource` (galay/task.hpp) is the single-threaded form: cheaper (no task per attachment),
// but its `cancel()` must run on the thread of the tasks attached to it. Use a CancelToken
// whenever the canceller or the tasks may be on another thread. Cost of an attachment: two small
// task frames (a watcher that waits for the token or the task's end).
#pragma once

#include "galay/sync/event.hpp"
#include "galay/task.hpp"

#include <utility>

namespace galay {

/// A thread-safe cancellation token (see the top of this header).
class CancelToken {
public:
    CancelToken() = default;
    CancelToken(const CancelToken&) = delete;
    CancelToken& operator=(const CancelToken&) = delete;

    /// Cancel every attached task, each on its own worker; from any thread. Idempotent.
    void cancel() noexcept { fired_.set(); }
    /// True once `cancel()` has been called.
    bool cancelled() const noexcept { return fired_.is_set(); }
    /// Wait until the token is cancelled (`Result<void>`; takes `.timeout(d)` / `.deadline(t)`).
    [[nodiscard]] Event::WaitAwaiter wait() noexcept { return fired_.wait(); }

private:
    Event fired_;
};

namespace detail {

/// Waits for the token or for the attached task's end, whichever comes first; on the token,
/// cancels the task through a source of the task's own thread.
inline Task<void> watch_token(CancelToken& token, Event& done, CancelSource& local) {
    auto fired = [](CancelToken& token) -> Task<bool> {
        auto r = co_await token.wait();
        co_return r.has_value();
    };
    auto ended = [](Event& done) -> Task<bool> {
        (void)co_await done.wait();
        co_return false;
    };
    auto first = co_await when_any(fired(token), ended(done));
    if (first.index() == 0 && std::get<0>(first)) local.cancel();
}

/// Sets an Event when it goes out of scope (the task ended, by value or exception).
class SetOnExit {
public:
    explicit SetOnExit(Event& e) noexcept
        : e_(e) {}
    SetOnExit(const SetOnExit&) = delete;
    SetOnExit& operator=(const SetOnExit&) = delete;
    ~SetOnExit() { e_.set(); }

private:
    Event& e_;
};

template <class T>
Task<T> run_until_done(CancelSource& local, Event& done, Task<T> task) {
    SetOnExit signal_end(done);
    co_return co_await with_cancel(local, std::move(task));
}

} // namespace detail

/// Run `task` so that `token.cancel()`, from any thread, cancels whatever it is waiting on, as
/// the caller's own cancellation still does. Gives what the task returned, or rethrows what it
/// threw. One token may serve any number of tasks on any workers; it must outlive them.
template <class T>
[[nodiscard]] Task<T> with_cancel(CancelToken& token, Task<T> task) {
    CancelSource local; // this task's thread only
    Event done;
    auto both = co_await when_all(detail::run_until_done(local, done, std::move(task)),
                                  detail::watch_token(token, done, local));
    if constexpr (!std::is_void_v<T>) co_return std::move(std::get<0>(both));
}

} // namespace galay
