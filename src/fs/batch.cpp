#include "galay/fs/batch.hpp"

#include "runtime/op_start.hpp"

#include <cassert>
#include <exception>

namespace galay::detail {
namespace {

// Every op of a batch names the same waiter: a tiny coroutine that counts completions and, at the
// last one, hands control to the awaiting coroutine by symmetric transfer. One frame per Batch
// (created at its first submit), so a batch of N ops costs no allocation per op.
struct Countdown {
    struct promise_type {
        std::size_t remaining = 0;
        std::coroutine_handle<> parent;

        Countdown get_return_object() noexcept {
            return Countdown{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        std::suspend_always initial_suspend() const noexcept { return {}; }
        std::suspend_always final_suspend() const noexcept { return {}; }
        void return_void() const noexcept {}
        void unhandled_exception() const noexcept { std::terminate(); }
    };
    std::coroutine_handle<promise_type> h;
};
using CountdownHandle = std::coroutine_handle<Countdown::promise_type>;

/// One completion: resumed by the scheduler, counts down, parks again or resumes the parent.
struct CountdownStep {
    CountdownStep() noexcept = default;
    bool await_ready() const noexcept { return false; }
    std::coroutine_handle<> await_suspend(CountdownHandle h) noexcept {
        self = h;
        Countdown::promise_type& p = h.promise();
        if (p.remaining == 0 && p.parent) return std::exchange(p.parent, {});
        return std::noop_coroutine();
    }
    void await_resume() noexcept {
        assert(self.promise().remaining > 0 && "batch countdown resumed too often");
        --self.promise().remaining;
    }
    CountdownHandle self;
};

Countdown countdown_loop() {
    for (;;)
        co_await CountdownStep{};
}

CountdownHandle countdown_of(std::coroutine_handle<> h) noexcept {
    return CountdownHandle::from_address(h.address());
}

} // namespace

BatchAwaitable&& BatchAwaitable::timeout(Timeout d) && {
    if (d) deadline_ns_ = Scheduler::now_ns() + d.value().count();
    return std::move(*this);
}

BatchAwaitable&& BatchAwaitable::deadline(std::chrono::steady_clock::time_point t) && {
    deadline_ns_ =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    return std::move(*this);
}

bool BatchAwaitable::await_ready() const noexcept {
    for (const fs::Batch::Entry& e : batch_->entries_)
        if (!e.precheck) return false;
    return true; // nothing to submit (empty, or every op failed its checks)
}

bool BatchAwaitable::start(std::coroutine_handle<> h, CancelScope* scope) {
    SchedulerCore& sched = SchedulerAccess::core(current_scheduler());
    fs::Batch& b = *batch_;
    scope_ = scope;
    if (!b.countdown_) {
        b.countdown_ = countdown_loop().h;
        b.countdown_.resume(); // park it at its first step
    }
    const bool cancelled = scope != nullptr && scope->requested();
    // All but the last op to be submitted say "more follows": the epoll driver then hands the
    // whole batch to the kernel in one io_submit (io_uring ignores it: every SQE of a loop turn
    // goes in one io_uring_enter anyway).
    std::size_t last = b.entries_.size();
    if (!cancelled)
        for (std::size_t i = b.entries_.size(); i-- > 0;)
            if (!b.entries_[i].precheck) {
                last = i;
                break;
            }
    // Each op is started as an IoAwaitable starts its one (op_start.hpp), all naming the countdown
    // as their waiter and carrying the batch's deadline: at the deadline every op still pending is
    // cancelled and fails with `timed_out`.
    std::size_t pending = 0;
    for (std::size_t i = 0; i < b.entries_.size(); ++i) {
        fs::Batch::Entry& e = b.entries_[i];
        IoOp& op = e.op;
        op.flags = i < last ? IoOp::kMoreFollows : 0;
        reset_op(op, b.countdown_);
        op.timer.deadline_ns = deadline_ns_;
        if (e.precheck) continue;
        if (cancelled) {
            op.result = -ECANCELED;
            continue;
        }
        if (!submit_op(sched, op)) ++pending;
    }
    // Everything failed its checks or completed at once.
    if (pending == 0) return yield_if_over_budget(sched, h);
    // Completions only reach the countdown through the scheduler's ready queue, never from
    // inside submit(), and deadlines fire only from the run loop, so arming it after submitting
    // is safe.
    Countdown::promise_type& p = countdown_of(b.countdown_).promise();
    p.remaining = pending;
    p.parent = h;
    if (scope != nullptr) scope->link(*this);
    return true;
}

void BatchAwaitable::cancel() noexcept {
    for (fs::Batch::Entry& e : batch_->entries_)
        cancel_op(e.op);
}

Result<void> BatchAwaitable::await_resume() noexcept {
    if (scope_ != nullptr) CancelScope::unlink(*this); // (each op's deadline went with it)
    for (std::size_t i = 0; i < batch_->entries_.size(); ++i)
        if (auto r = batch_->result(i); !r) return std::unexpected(r.error());
    return {};
}

} // namespace galay::detail

namespace galay::fs {

Batch::Batch(Batch&& o) noexcept
    : entries_(std::move(o.entries_))
    , countdown_(std::exchange(o.countdown_, {})) {}

Batch& Batch::operator=(Batch&& o) noexcept {
    if (this != &o) {
        if (countdown_) countdown_.destroy();
        entries_ = std::move(o.entries_);
        countdown_ = std::exchange(o.countdown_, {});
    }
    return *this;
}

Batch::~Batch() {
    if (countdown_) countdown_.destroy();
}

std::size_t Batch::push(Entry e) {
    entries_.push_back(e);
    return entries_.size() - 1;
}

std::size_t Batch::add_transfer(const File& f, detail::OpCode code, const void* buf,
                                std::size_t len, std::uint64_t offset, detail::FileXfer mode,
                                int fixed_slot) {
    Entry e;
    e.mode = mode;
    e.precheck = f.prepare_transfer(e.op, code, buf, len, offset, mode, fixed_slot);
    return push(e);
}

std::size_t Batch::read_at(const File& f, FixedSlice buf, std::uint64_t offset) {
    return add_transfer(f, detail::OpCode::read_at, buf.data(), buf.size(), offset,
                        detail::FileXfer::some, File::fixed_slot(buf));
}

std::size_t Batch::read_exact_at(const File& f, FixedSlice buf, std::uint64_t offset) {
    return add_transfer(f, detail::OpCode::read_at, buf.data(), buf.size(), offset,
                        detail::FileXfer::exact, File::fixed_slot(buf));
}

std::size_t Batch::write_at(const File& f, FixedSlice buf, std::uint64_t offset) {
    return add_transfer(f, detail::OpCode::write_at, buf.data(), buf.size(), offset,
                        detail::FileXfer::some, File::fixed_slot(buf));
}

std::size_t Batch::write_all_at(const File& f, FixedSlice buf, std::uint64_t offset) {
    return add_transfer(f, detail::OpCode::write_at, buf.data(), buf.size(), offset,
                        detail::FileXfer::all, File::fixed_slot(buf));
}

std::size_t Batch::readv_at(const File& f, std::span<const iovec> iov, std::uint64_t offset) {
    Entry e;
    e.precheck = f.prepare_vector(e.op, detail::OpCode::readv_at, iov, offset);
    return push(e);
}

std::size_t Batch::writev_at(const File& f, std::span<const iovec> iov, std::uint64_t offset) {
    Entry e;
    e.precheck = f.prepare_vector(e.op, detail::OpCode::writev_at, iov, offset);
    return push(e);
}

std::size_t Batch::fsync(const File& f) {
    Entry e;
    e.precheck = f.prepare_sync(e.op, detail::OpCode::fsync);
    return push(e);
}

std::size_t Batch::fdatasync(const File& f) {
    Entry e;
    e.precheck = f.prepare_sync(e.op, detail::OpCode::fdatasync);
    return push(e);
}

Result<std::size_t> Batch::result(std::size_t i) const noexcept {
    assert(i < entries_.size());
    const Entry& e = entries_[i];
    if (e.precheck) return std::unexpected(e.precheck);
    return detail::file_transfer_result(e.op, e.mode);
}

} // namespace galay::fs
