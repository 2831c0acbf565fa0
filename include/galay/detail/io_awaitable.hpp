// The awaitable shared by every I/O operation: it holds the IoOp in the coroutine frame, hands it
// to the current scheduler's driver, and adds the two things every operation has: a deadline
// (`.timeout(d)` / `.deadline(t)`) and cancellation through the awaiting task's scope.
#pragma once

#include "galay/detail/cancel.hpp"
#include "galay/detail/in_place.hpp"
#include "galay/detail/io_op.hpp"
#include "galay/detail/wait_desc.hpp"
#include "galay/scheduler.hpp"
#include "galay/time/timeout.hpp"

#include <chrono>
#include <coroutine>

namespace galay::detail {

/// Start `op` for the coroutine `h`. Returns true when `h` must suspend.
bool start_op(IoOp& op, std::coroutine_handle<> h, CancelScope* scope, Cancellable& self);
/// Ask a pending op to stop (from a cancellation scope or a deadline).
void cancel_op(IoOp& op) noexcept;
/// What a pending op waits on, for a task dump: its kind, fd, length and deadline.
void describe_op(const IoOp& op, WaitDesc& d) noexcept;

/// CRTP base: `Derived` provides `auto result()` mapping `op_.result` to the awaited value.
template <class Derived>
class [[nodiscard]] IoAwaitable : public Cancellable, public AwaitedInPlace<Derived> {
public:
    IoAwaitable() = default;
    IoAwaitable(IoAwaitable&&) noexcept = default; // only before it is awaited
    IoAwaitable& operator=(IoAwaitable&&) = delete;

    /// Fail with `std::errc::timed_out` if the op has not completed within `d`. The kernel
    /// operation is cancelled and finished before the awaiting coroutine resumes. An empty `d`
    /// (`galay::no_timeout`, an empty optional) arms nothing.
    [[nodiscard]] Derived&& timeout(Timeout d) && {
        if (d) {
            op_.timer.deadline_ns = Scheduler::now_ns() + d.value().count();
            has_deadline_ = true;
        }
        return static_cast<Derived&&>(*this);
    }
    /// Same, with an absolute steady-clock deadline.
    [[nodiscard]] Derived&& deadline(std::chrono::steady_clock::time_point t) && {
        op_.timer.deadline_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
        has_deadline_ = true;
        return static_cast<Derived&&>(*this);
    }

    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        if (!has_deadline_) op_.timer.deadline_ns = 0;
        static_cast<Derived*>(this)->prepare();
        scope_ = scope_of(h);
        return start_op(op_, h, scope_, *this);
    }
    auto await_resume() {
        if (scope_ != nullptr) CancelScope::unlink(*this);
        return static_cast<Derived*>(this)->result();
    }

    void cancel() noexcept override { cancel_op(op_); }
    void describe(WaitDesc& d) const noexcept override { describe_op(op_, d); }

protected:
    /// Point the op at members of the awaitable (which may have moved since construction).
    void prepare() noexcept {}

    IoOp op_;
    CancelScope* scope_ = nullptr;
    bool has_deadline_ = false;
};

/// The common result shape: a byte count (or fd) or an error.
inline Result<std::size_t> size_result(std::int64_t r) {
    if (r < 0) return fail(static_cast<int>(-r));
    return static_cast<std::size_t>(r);
}

} // namespace galay::detail
