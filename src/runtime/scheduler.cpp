#include "driver/common/faults.hpp"
#include "galay/detail/io_awaitable.hpp"
#include "galay/runtime.hpp"
#include "runtime/drivers.hpp"
#include "runtime/fd_owners.hpp"

#include <concurrentqueue/concurrentqueue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
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

/// Work posted from other threads: coroutine handles to resume and RemoteCalls (low bit set),
/// plus a flag so that a burst of posts costs one wake-up.
class RemoteQueue {
public:
    moodycamel::ConcurrentQueue<std::uintptr_t> queue;
    std::atomic<bool> wake_pending{false};
    // Posts in progress. A post's item may be run (and the scheduler destroyed) before the
    // posting thread has finished waking the driver, so destruction waits for this to reach 0.
    std::atomic<int> posting{0};
};

constexpr std::uintptr_t kCallBit = 1; // RemoteCall* | 1 (coroutine frames are aligned)

} // namespace detail

namespace {

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

void fatal(const char* what) noexcept {
    std::fprintf(stderr, "%s\n", what);
    std::abort();
}

// ---------------------------------------------------------------------------------------------
// Spawned tasks
// ---------------------------------------------------------------------------------------------

namespace {

/// Where threads blocked in JoinHandle::join() sleep: a few mutex + condition variable pairs
/// picked by the address of the task's state. A condition variable rather than
/// std::atomic::wait (a raw futex system call): under ThreadSanitizer a signal that arrives
/// while a thread is in a call TSan does not intercept is held back until the thread makes one,
/// so a program parked in join() would never see its SIGTERM.
struct JoinStripe {
    std::mutex m;
    std::condition_variable cv;
};
JoinStripe& join_stripe(const void* state) noexcept {
    static JoinStripe stripes[16];
    return stripes[(reinterpret_cast<std::uintptr_t>(state) >> 6) % 16];
}

} // namespace

void SpawnBase::finish() noexcept {
    if (sched != nullptr) sched->leave(*this);
    const std::uint32_t prev = state.exchange(kDone, std::memory_order_acq_rel);
    if (prev == kAwaited) {
        // The awaiter published `waiter` before kAwaited and can no longer withdraw it.
        if (waiter_sched == Scheduler::current())
            waiter_sched->schedule(waiter);
        else
            waiter_sched->post(waiter);
    } else if (prev == kJoining) {
        // (the handle's reference keeps this state alive meanwhile)
        JoinStripe& js = join_stripe(this);
        { std::lock_guard lk(js.m); } // the joiner checks the state under this lock
        js.cv.notify_all();
    }
    release();
}

void SpawnBase::abandon() noexcept {
    drop_inner(*this); // destroys the task's frames, innermost first
    shut_down = true;
    finish();
}

void SpawnBase::release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) self.destroy();
}

void SpawnBase::request_abort() noexcept {
    if (state.load(std::memory_order_acquire) == kDone || sched == nullptr) return;
    if (Scheduler::current() == sched && linked) {
        scope.request();
        return;
    }
    if (abort_sent.exchange(true, std::memory_order_acq_rel)) return;
    refs.fetch_add(1, std::memory_order_relaxed); // the posted call's, released when it runs
    sched->post(abort_call);
}

void SpawnBase::on_start(void* owner, bool run) noexcept {
    auto* t = static_cast<SpawnBase*>(owner);
    if (run)
        t->sched->adopt(*t);
    else
        t->abandon();
}

void SpawnBase::on_abort(void* owner, bool run) noexcept {
    auto* t = static_cast<SpawnBase*>(owner);
    // A finished or abandoned task's scope may list leaves of frames already destroyed. (Posts
    // from two threads may arrive in either order: an abort can precede the task's start.)
    if (run && t->state.load(std::memory_order_acquire) != kDone) {
        if (t->linked)
            t->scope.request();
        else
            t->abort_early = true;
    }
    t->release();
}

void SpawnBase::wait_done() noexcept {
    if (Scheduler::current() != nullptr)
        fatal("galay: JoinHandle::join() would block a scheduler thread; co_await the handle "
              "inside a task instead");
    if (state.load(std::memory_order_acquire) == kDone) return;
    JoinStripe& js = join_stripe(this);
    std::unique_lock lk(js.m);
    std::uint32_t expected = kRunning;
    state.compare_exchange_strong(expected, kJoining, std::memory_order_acq_rel);
    js.cv.wait(lk, [this] { return state.load(std::memory_order_acquire) == kDone; });
}

void SpawnBase::check_result() const {
    if (shut_down)
        throw Error(errno_code(ECANCELED),
                    "galay: the runtime shut down before the spawned task finished");
    if (taken) throw std::logic_error("galay: the result of a JoinHandle was already taken");
}

void refuse_spawn(SpawnBase& t) noexcept {
    t.sched = nullptr;
    t.abandon();
}

// ---------------------------------------------------------------------------------------------
// RemoteWait
// ---------------------------------------------------------------------------------------------

void RemoteWait::set_waiter(std::coroutine_handle<> h) {
    sched_ = &current_scheduler();
    waiter_ = h;
    interrupted_ = 0;
}

void RemoteWait::arm(CancelScope* scope) {
    if (deadline_ns_ != 0) {
        timer_.deadline_ns = deadline_ns_;
        timer_.on_fire = &RemoteWait::on_deadline;
        timer_.context = this;
        sched_->arm_timer(timer_);
    }
    scope_ = scope;
    if (scope != nullptr) scope->link(*this); // (calls cancel() at once if it was requested)
}

int RemoteWait::end_wait() noexcept {
    if (scope_ != nullptr) CancelScope::unlink(*this);
    scope_ = nullptr;
    if (timer_.armed()) sched_->disarm_timer(timer_);
    return interrupted_;
}

void RemoteWait::interrupt(int reason) noexcept {
    if (interrupted_ != 0 || !waiter_) return;
    if (!withdraw()) return; // the completion has the waiter: its post is on the way
    interrupted_ = reason;
    if (timer_.armed()) sched_->disarm_timer(timer_);
    sched_->schedule(waiter_);
}

void RemoteWait::on_deadline(TimerNode* n) {
    static_cast<RemoteWait*>(n->context)->interrupt(ETIMEDOUT);
}

} // namespace detail
} // namespace galay

namespace galay {

namespace detail {

std::atomic<Driver*> FdOwners::slots_[FdOwners::kMaxFd];
std::mutex FdOwners::mutex_;

bool forget_fd_everywhere(int fd) noexcept {
    if (fd < 0) return true;
    Scheduler* s = Scheduler::current();
    Driver* mine = s != nullptr ? &s->driver() : nullptr;
    if (mine != nullptr) mine->forget_fd(fd);
    if (!FdOwners::in_range(fd)) return true;
    if (Driver* owner = FdOwners::owner(fd); owner == nullptr || owner == mine) return true;
    // Another driver holds it. Under the mutex it cannot be destroyed while we look at it.
    std::unique_lock lock(FdOwners::mutex());
    Driver* owner = FdOwners::owner(fd);
    if (owner == nullptr || owner == mine) return true;
    if (owner->runs_on_this_thread()) {
        // This thread's scheduler, outside block_on (or another scheduler's block_on is running
        // on this thread): nothing else touches that driver, so it drops the fd right now.
        lock.unlock();
        owner->forget_fd(fd);
        return true;
    }
    if (!FdOwners::disown(fd, owner)) return true;
    owner->forget_fd_remote(fd);
    return false;
}

void close_fd(int fd) noexcept {
    if (fd < 0) return;
    // In a task, the current driver may close it with the loop's next submission (no system
    // call of its own), unless a driver of another thread holds it.
    if (Scheduler* s = Scheduler::current(); s != nullptr && FdOwners::in_range(fd)) {
        Driver* owner = FdOwners::owner(fd);
        if ((owner == nullptr || owner == &s->driver()) && s->driver().close_later(fd)) return;
    }
    if (!forget_fd_everywhere(fd)) {
        // A driver on another thread holds the file (a registered slot, an armed recv) until it
        // next runs, which may be a while if its thread is outside block_on. shutdown(2) makes
        // the close visible now: the FIN leaves and a listener stops listening. (Not with
        // SO_LINGER 0: that peer must get the RST which the final release sends. Not a socket:
        // nothing to do, the kernel object is released when that driver lets go.)
        linger l{};
        socklen_t len = sizeof l;
        if (::getsockopt(fd, SOL_SOCKET, SO_LINGER, &l, &len) == 0 &&
            !(l.l_onoff != 0 && l.l_linger == 0))
            ::shutdown(fd, SHUT_RDWR);
    }
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
    detail::faults::install_from_environment();
    Result<Backend> b = resolve_backend(options.backend);
    if (!b) throw Error(b.error(), "galay: cannot start the scheduler");
    driver_ = detail::find_backend(*b)->entry->make(*this, options);
    fair_completions_ = options.fair_completions;
    ready_.reserve(1024);
    running_.reserve(1024);
}

Scheduler::~Scheduler() {
    teardown(); // (done already on a Runtime worker's own thread)
    while (remote_->posting.load(std::memory_order_acquire) != 0)
        std::this_thread::yield();
    drop_remote();
    driver_.reset();
}

void Scheduler::teardown() noexcept {
    if (torn_down_) return;
    torn_down_ = true;
    stopping_ = true;
    Scheduler* saved = exchange_current(this);
    // Cancel every kernel operation and wait for it, so no buffer of a frame about to be
    // destroyed is still owned by the kernel.
    driver_->shutdown();
    // The frames about to be destroyed hold the timer nodes: forget them first.
    timers_.clear();
    while (!tasks_.empty())
        tasks_.front()->abandon(); // (unlinks it)
    ready_.clear();
    running_.clear();
    drop_remote();
    // The destroyed frames closed their sockets: on io_uring, the requests that drop the ring's
    // references to them (registered slot, armed multishot recv) go to the kernel now, not
    // whenever the ring is torn down.
    driver_->flush();
    exchange_current(saved);
}

void Scheduler::drop_remote() noexcept {
    std::uintptr_t batch[64];
    std::size_t n;
    while ((n = remote_->queue.try_dequeue_bulk(batch, 64)) != 0) {
        for (std::size_t i = 0; i < n; ++i) {
            if ((batch[i] & detail::kCallBit) == 0)
                continue; // a frame being (or already) destroyed
            auto* c = reinterpret_cast<detail::RemoteCall*>(batch[i] & ~detail::kCallBit);
            c->fn(c->owner, false);
        }
    }
}

void Scheduler::start_spawned(detail::SpawnBase& t) {
    t.sched = this;
    live_.fetch_add(1, std::memory_order_relaxed);
    if (t_current == this)
        adopt(t);
    else
        post(t.start_call);
}

void Scheduler::adopt(detail::SpawnBase& t) {
    t.linked = true;
    tasks_.push_back(t);
    ++linked_;
    // Started during shutdown, or aborted before it started: cancelled from the start.
    if (stopping_ || t.abort_early) t.scope.request();
    schedule(t.self);
}

void Scheduler::leave(detail::SpawnBase& t) noexcept {
    if (t.linked) {
        tasks_.remove(t);
        t.linked = false;
        --linked_;
    }
    live_.fetch_sub(1, std::memory_order_relaxed);
}

void Scheduler::cancel_all() noexcept {
    stopping_ = true;
    for (detail::SpawnBase* t = tasks_.front(); t != nullptr;) {
        detail::SpawnBase* next = tasks_.next(*t); // (request() never finishes a task)
        t->scope.request();
        t = next;
    }
}

void Scheduler::post(std::coroutine_handle<> h) {
    enqueue_remote(reinterpret_cast<std::uintptr_t>(h.address()));
}

void Scheduler::post(detail::RemoteCall& call) {
    enqueue_remote(reinterpret_cast<std::uintptr_t>(&call) | detail::kCallBit);
}

void Scheduler::enqueue_remote(std::uintptr_t item) {
    remote_->posting.fetch_add(1, std::memory_order_acq_rel);
    remote_->queue.enqueue(item);
    if (!remote_->wake_pending.exchange(true, std::memory_order_acq_rel)) {
        Scheduler* from = t_current;
        // From our own loop the flag alone is enough: it is checked before the driver sleeps.
        // Between workers of one Runtime on io_uring, an IORING_OP_MSG_RING queued in the
        // sender's ring rides with its next io_uring_enter (its loop polls right after the
        // current batch), instead of an eventfd write now.
        if (from == this) {
        } else if (from != nullptr && from->in_loop_ && wake_group_ != nullptr &&
                   from->wake_group_ == wake_group_ && from->driver_->wake_peer(*driver_)) {
        } else {
            driver_->wake();
        }
    }
    remote_->posting.fetch_sub(1, std::memory_order_release);
}

void Scheduler::drain_remote() {
    // An exchange (not a store): the flag must be clear before the queue is read, or a post
    // between the two could find it still set and skip its wake-up.
    if (!remote_->wake_pending.exchange(false, std::memory_order_acq_rel)) return;
    std::uintptr_t batch[64];
    std::size_t n;
    while ((n = remote_->queue.try_dequeue_bulk(batch, 64)) != 0) {
        for (std::size_t i = 0; i < n; ++i) {
            if ((batch[i] & detail::kCallBit) != 0) {
                auto* c = reinterpret_cast<detail::RemoteCall*>(batch[i] & ~detail::kCallBit);
                c->fn(c->owner, true);
            } else {
                ready_.push_back(
                    std::coroutine_handle<>::from_address(reinterpret_cast<void*>(batch[i])));
            }
        }
    }
}

void Scheduler::run_ready() {
    // Resume the current batch only: coroutines scheduled meanwhile wait for the next turn, so
    // the driver is polled between batches and I/O is not starved.
    running_.swap(ready_);
    if (fair_completions_ && running_.size() >= kFairCheckEvery * 2) {
        run_ready_fairly();
        return;
    }
    for (std::coroutine_handle<> h : running_) {
        inline_completions_ = 0;
        h.resume();
    }
    running_.clear();
}

void Scheduler::run_ready_fairly() {
    // As run_ready, but every kFairCheckEvery handlers look at the clock: once kFairFlushNs
    // have passed since the last hand-over, what the handlers queued (their replies) goes to
    // the kernel now instead of after the whole batch (one io_uring_enter, no waiting).
    std::int64_t last = now_ns();
    std::size_t n = 0;
    for (std::coroutine_handle<> h : running_) {
        inline_completions_ = 0;
        h.resume();
        if (++n % kFairCheckEvery == 0) {
            const std::int64_t now = now_ns();
            if (now - last >= kFairFlushNs) {
                driver_->submit_queued();
                last = now;
            }
        }
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

void Scheduler::run_until_done(const std::size_t& remaining, std::int64_t deadline_ns) {
    const bool outer = !in_loop_;
    in_loop_ = true;
    struct InLoop { // (nothing in the loop throws; this also covers a future early return)
        detail::Driver& d;
        explicit InLoop(detail::Driver& driver) noexcept
            : d(driver) {
            d.loop_entered();
        }
        ~InLoop() { d.loop_left(); }
    } in_loop(*driver_);
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
        if (deadline_ns >= 0) {
            const std::int64_t left = deadline_ns - now_ns();
            if (left <= 0) break;
            if (timeout < 0 || timeout > left) timeout = left;
        }
        driver_->poll(timeout);
        fire_timers();
    }
    if (outer) {
        in_loop_ = false;
        driver_->flush(); // wake-ups (and anything else) queued in the ring by the last batch
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
