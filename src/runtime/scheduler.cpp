#include "galay/detail/io_awaitable.hpp"
#include "galay/runtime.hpp"
#include "runtime/drivers.hpp"
#include "runtime/fd_owners.hpp"

#include <concurrentqueue/concurrentqueue.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

namespace galay {

namespace {
// Not a static data member used from inline code: UBSan (GCC 12) reports the TLS wrapper of
// such a member as a null store.
thread_local Scheduler* t_current = nullptr;
} // namespace

Scheduler* Scheduler::current() noexcept {
    return t_current;
}

Scheduler* Scheduler::exchange_current(Scheduler* s) noexcept {
    return std::exchange(t_current, s);
}

namespace detail {

/// Coroutine handles posted from other threads, plus a flag so that a burst of posts costs one
/// wake-up.
class RemoteQueue {
public:
    moodycamel::ConcurrentQueue<std::coroutine_handle<>> queue;
    std::atomic<bool> wake_pending{false};
    // Posts in progress. A post's handle may be resumed (and the scheduler destroyed) before the
    // posting thread has finished waking the driver, so shutdown waits for this to reach zero.
    std::atomic<int> posting{0};
};

/// The promise of a detached task: linked into its scheduler so that shutdown can destroy the
/// ones still suspended.
struct DetachedPromise {
    Scheduler* sched = nullptr;
    DetachedPromise* prev = nullptr;
    DetachedPromise* next = nullptr;

    struct Handle {
        std::coroutine_handle<DetachedPromise> h;
    };
    Handle get_return_object() noexcept {
        return {std::coroutine_handle<DetachedPromise>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept {
        report_unhandled_exception(std::current_exception());
    }
    ~DetachedPromise() {
        if (sched == nullptr) return;
        sched->detached_.remove(*this);
        --sched->detached_count_;
    }
};

DetachedPromise*& DetachedLinks::next(DetachedPromise& p) noexcept {
    return p.next;
}
DetachedPromise*& DetachedLinks::prev(DetachedPromise& p) noexcept {
    return p.prev;
}

} // namespace detail
} // namespace galay

template <class... Args>
struct std::coroutine_traits<galay::detail::DetachedPromise::Handle, Args...> {
    using promise_type = galay::detail::DetachedPromise;
};

namespace galay {
namespace {

detail::DetachedPromise::Handle run_detached(Task<void> task) {
    co_await std::move(task);
}

void default_unhandled(std::exception_ptr e) noexcept {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "galay: unhandled exception in a detached task: %s\n", ex.what());
    } catch (...) {
        std::fprintf(stderr, "galay: unhandled exception of unknown type in a detached task\n");
    }
}

std::atomic<UnhandledExceptionHandler> g_unhandled{&default_unhandled};

} // namespace

UnhandledExceptionHandler set_unhandled_exception_handler(UnhandledExceptionHandler h) noexcept {
    return g_unhandled.exchange(h != nullptr ? h : &default_unhandled);
}

void report_unhandled_exception(std::exception_ptr e) noexcept {
    g_unhandled.load()(e);
}

namespace detail {

std::atomic<Driver*> FdOwners::slots_[FdOwners::kMaxFd];
std::mutex FdOwners::mutex_;

void forget_fd_everywhere(int fd) noexcept {
    if (fd < 0) return;
    Scheduler* s = Scheduler::current();
    Driver* mine = s != nullptr ? &s->driver() : nullptr;
    if (mine != nullptr) mine->forget_fd(fd);
    if (!FdOwners::in_range(fd)) return;
    Driver* owner = FdOwners::owner(fd);
    if (owner == nullptr || owner == mine) return;
    std::lock_guard lock(FdOwners::mutex());
    if (FdOwners::disown(fd, owner)) owner->forget_fd_remote(fd);
}

void close_fd(int fd) noexcept {
    if (fd < 0) return;
    forget_fd_everywhere(fd);
    ::close(fd);
}

} // namespace detail

Scheduler& current_scheduler() {
    Scheduler* s = t_current;
    if (s == nullptr) {
        std::fputs("galay: an operation was awaited outside a scheduler (use block_on)\n", stderr);
        std::abort();
    }
    return *s;
}

Scheduler::Scheduler(SchedulerOptions options)
    : remote_(std::make_unique<detail::RemoteQueue>()) {
    Result<Backend> b = resolve_backend(options.backend);
    if (!b) throw Error(b.error(), "galay: cannot start the scheduler");
    driver_ = *b == Backend::io_uring ? detail::make_uring_driver(*this, options)
                                      : detail::make_epoll_driver(*this, options);
    ready_.reserve(1024);
    running_.reserve(1024);
}

Scheduler::~Scheduler() {
    shutdown();
}

void Scheduler::shutdown() noexcept {
    Scheduler* saved = exchange_current(this);
    while (remote_->posting.load(std::memory_order_acquire) != 0)
        std::this_thread::yield();
    // Cancel every kernel operation and wait for it, so no buffer of a frame we are about to
    // destroy is still owned by the kernel.
    driver_->shutdown();
    ready_.clear();
    timers_.clear();
    while (!detached_.empty()) {
        auto h = std::coroutine_handle<detail::DetachedPromise>::from_promise(*detached_.front());
        h.destroy();
    }
    driver_.reset();
    exchange_current(saved);
}

void Scheduler::spawn(Task<void> task) {
    auto h = run_detached(std::move(task)).h;
    detail::DetachedPromise& p = h.promise();
    p.sched = this;
    detached_.push_back(p);
    ++detached_count_;
    schedule(h);
}

void Scheduler::post(std::coroutine_handle<> h) {
    remote_->posting.fetch_add(1, std::memory_order_acq_rel);
    remote_->queue.enqueue(h);
    if (!remote_->wake_pending.exchange(true, std::memory_order_acq_rel)) driver_->wake();
    remote_->posting.fetch_sub(1, std::memory_order_acq_rel);
}

void Scheduler::drain_remote() {
    if (!remote_->wake_pending.load(std::memory_order_acquire)) return;
    remote_->wake_pending.store(false, std::memory_order_release);
    std::coroutine_handle<> batch[64];
    std::size_t n;
    while ((n = remote_->queue.try_dequeue_bulk(batch, 64)) != 0)
        ready_.insert(ready_.end(), batch, batch + n);
}

void Scheduler::run_ready() {
    // Resume the current batch only: coroutines scheduled meanwhile wait for the next turn, so
    // the driver is polled between batches and I/O is not starved.
    running_.swap(ready_);
    for (std::coroutine_handle<> h : running_) {
        inline_completions_ = 0;
        h.resume();
    }
    running_.clear();
}

void Scheduler::fire_timers() {
    if (timers_.empty()) return;
    const std::int64_t now = now_ns();
    while (!timers_.empty() && timers_.top()->deadline_ns <= now) {
        detail::TimerNode* n = timers_.pop();
        n->on_fire(n);
    }
}

void Scheduler::run_until_done(const std::size_t& remaining) {
    while (remaining != 0) {
        drain_remote();
        run_ready();
        if (remaining == 0) break;
        fire_timers();
        std::int64_t timeout = -1;
        if (!ready_.empty() || remote_->wake_pending.load(std::memory_order_relaxed))
            timeout = 0;
        else if (!timers_.empty())
            timeout = std::max<std::int64_t>(0, timers_.top()->deadline_ns - now_ns());
        driver_->poll(timeout);
        fire_timers();
    }
}

namespace detail {

void cancel_op(IoOp& op) noexcept;
namespace {
void on_op_deadline(TimerNode* n) {
    auto* op = static_cast<IoOp*>(n->context);
    op->timed_out = true;
    cancel_op(*op);
}
} // namespace

bool start_op(IoOp& op, std::coroutine_handle<> h, CancelScope* scope, Cancellable& self) {
    Scheduler& s = current_scheduler();
    op.waiter = h;
    op.result = 0;
    op.done = 0;
    op.timed_out = op.cancelled = false;
    if (scope != nullptr && scope->requested()) {
        op.result = -ECANCELED;
        return false;
    }
    if (s.driver().submit(op)) {
        if (s.take_inline_budget()) return false;
        s.schedule(h); // completed, but this coroutine has run long enough: yield once
        return true;
    }
    if (op.timer.deadline_ns != 0) {
        op.timer.on_fire = &on_op_deadline;
        op.timer.context = &op;
        s.arm_timer(op.timer);
    }
    if (scope != nullptr) scope->link(self);
    return true;
}

void cancel_op(IoOp& op) noexcept {
    if (!op.pending || op.cancelled) return;
    op.cancelled = true;
    current_scheduler().driver().cancel(op);
}

} // namespace detail
} // namespace galay
