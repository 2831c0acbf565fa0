// galay/blocking.hpp: run blocking code off the worker, on the process-wide blocking pool.
//
//     galay::Task<void> load(std::string path) {
//         auto text = co_await galay::spawn_blocking([&] { return read_whole_file(path); });
//         if (!text) co_return;                    // cancelled or timed out before it started
//         use(*text);                              // (an exception thrown by fn is rethrown here)
//         auto again = co_await galay::spawn_blocking([&] { return read_whole_file(path); })
//                          .timeout(2s);           // timed_out if it has not started by then
//     }
//
// `spawn_blocking(fn)` queues `fn()` on the blocking pool and suspends the task; when `fn`
// returns, the task resumes on its own worker. The result is `Result<R>` (`Result<void>` for a
// void `fn`; a `fn` that returns `Result<U>` gives `Result<U>`): the value, or
// `operation_canceled` / `timed_out` when the task was cancelled or the deadline passed before
// `fn` started (a queued `fn` is then dropped). Once `fn` runs it cannot be interrupted: a
// cancellation or deadline then waits for it and the result is `fn`'s own. An exception thrown by
// `fn` is rethrown by the `co_await`. `fn` is moved into the awaiting frame and may refer to the
// task's locals; if that frame is destroyed (runtime shutdown) while `fn` runs, the destruction
// waits for `fn` to return.
//
// The pool: one per process, created on first use, shared by every scheduler and runtime (and
// by galay itself: buffered file operations on the epoll backend, `resolve()`), so blocking work
// never multiplies with the number of workers. Threads start on demand up to the limit
// (`set_blocking_threads`, default 64, or the environment variable GALAY_BLOCKING_THREADS read at
// first use) and exit after 10 s idle; beyond the limit, jobs queue in order.
#pragma once

#include "galay/detail/remote_wait.hpp"
#include "galay/error.hpp"
#include "galay/task.hpp"

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

namespace galay {

class Scheduler;

/// Most threads the blocking pool runs at once (>= 1). Raising it takes effect at once; lowering
/// it as busy threads finish.
void set_blocking_threads(unsigned max) noexcept;
/// Most threads the blocking pool runs at once.
unsigned blocking_threads() noexcept;

namespace detail {
template <class F>
class BlockingAwaiter; // what `co_await spawn_blocking(fn)` is (below)
} // namespace detail

/// Run `fn()` on the blocking pool; `co_await` gives `Result<R>` (see the top of this header).
template <class F>
[[nodiscard]] detail::BlockingAwaiter<std::decay_t<F>> spawn_blocking(F&& fn) {
    return detail::BlockingAwaiter<std::decay_t<F>>(std::forward<F>(fn));
}

namespace detail {

using BlockingFn = void (*)(void* a, void* b) noexcept;

/// Queue `fn(a, b)` on the blocking pool. Throws std::system_error when no thread is running
/// and none can be started.
void blocking_submit(BlockingFn fn, void* a, void* b);
/// Take back the queued job (a, b) if no thread has started it; true when taken back.
bool blocking_cancel(void* a, void* b) noexcept;
/// Take back every queued job whose first key is `a`; calls `each(b, ctx)` for each one.
void blocking_cancel_all(void* a, void (*each)(void* b, void* ctx) noexcept, void* ctx) noexcept;
/// Wait until no pool thread runs a job with key `a` (and `b`, unless b is null). After it
/// returns, the pool does not touch what those jobs referred to.
void blocking_wait_idle(void* a, void* b) noexcept;
/// Threads the pool runs now, and jobs it has started since the process began (for tests).
struct BlockingStats {
    unsigned threads = 0;
    std::uint64_t jobs_started = 0;
    std::uint64_t jobs_queued = 0; // waiting for a thread
};
BlockingStats blocking_stats() noexcept;
/// On a scheduler with a paused clock, a job of this thread's tasks starts (+1) or is over (-1):
/// virtual time does not jump while one runs.
void paused_clock_hold(int delta) noexcept;
/// Post `h` to `s` (from a pool thread).
void post_to(Scheduler& s, std::coroutine_handle<> h) noexcept;

template <class R>
struct BlockingOut {
    using type = Result<R>;
};
template <class U>
struct BlockingOut<Result<U>> {
    using type = Result<U>;
};

template <class F>
class [[nodiscard]] BlockingAwaiter final : public TimedRemoteWait<BlockingAwaiter<F>> {
    using R = std::invoke_result_t<F&>;

public:
    using Out = typename BlockingOut<R>::type;

    explicit BlockingAwaiter(F fn)
        : fn_(std::move(fn)) {}
    BlockingAwaiter(BlockingAwaiter&& o) noexcept(std::is_nothrow_move_constructible_v<F>)
        : TimedRemoteWait<BlockingAwaiter<F>>(std::move(o))
        , fn_(std::move(o.fn_)) {}
    ~BlockingAwaiter() {
        if (!queued_) return;
        // The awaiting frame is being destroyed while fn is queued or running (shutdown).
        if (!blocking_cancel(this, nullptr)) blocking_wait_idle(this, nullptr);
    }

    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        this->set_waiter(h);
        CancelScope* scope = scope_of(h);
        if (scope != nullptr && scope->requested()) {
            cancelled_early_ = true;
            return false;
        }
        blocking_submit(&BlockingAwaiter::run, this, nullptr);
        queued_ = true;
        paused_clock_hold(1);
        this->arm(scope);
        return true;
    }
    Out await_resume() {
        if (queued_) paused_clock_hold(-1);
        queued_ = false;
        const int why = this->end_wait();
        if (cancelled_early_) return std::unexpected(errno_code(ECANCELED));
        if (why != 0) return std::unexpected(errno_code(why));
        if (error_) std::rethrow_exception(error_);
        if constexpr (std::is_void_v<R>)
            return Out{};
        else
            return Out(std::move(*value_));
    }

private:
    static void run(void* a, void*) noexcept {
        auto* self = static_cast<BlockingAwaiter*>(a);
        try {
            if constexpr (std::is_void_v<R>)
                std::invoke(self->fn_);
            else
                self->value_.emplace(std::invoke(self->fn_));
        } catch (...) {
            self->error_ = std::current_exception();
        }
        // The last touch of the frame: after the post it may resume and be gone.
        post_to(*self->sched_, self->waiter_);
    }
    bool withdraw() noexcept override { return blocking_cancel(this, nullptr); }

    F fn_;
    std::optional<std::conditional_t<std::is_void_v<R>, char, R>> value_;
    std::exception_ptr error_;
    bool queued_ = false;
    bool cancelled_early_ = false;
};

} // namespace detail

} // namespace galay
