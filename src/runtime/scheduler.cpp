// The scheduler of one thread: its ready queue and run loop, its timers, the tasks spawned on it,
// and the queue other threads post to (SchedulerCore, scheduler_core.hpp), and the public
// Scheduler's members, which hand each call to it. (Elsewhere: spawned_task.cpp, the JoinHandle
// state; op_start.cpp, how an I/O op reaches the driver; observe.cpp, the counters, stall
// detector, hooks and paused clock; close_fd.cpp; remote_wait.cpp.)
#include "driver/common/faults.hpp"
#include "runtime/drivers.hpp"
#include "runtime/observe.hpp"
#include "runtime/scheduler_access.hpp"

#include <concurrentqueue/concurrentqueue.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
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

namespace detail {

Scheduler* SchedulerCore::exchange_current(Scheduler* s) noexcept {
    return std::exchange(t_current, s);
}

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

SchedulerCore::SchedulerCore(Scheduler& self, const SchedulerOptions& options)
    : self_(self)
    , remote_(std::make_unique<RemoteQueue>()) {
    faults::install_from_environment();
    if (options.idle_spin.count() < 0)
        throw Error(errno_code(EINVAL), "galay: SchedulerOptions::idle_spin must not be negative");
    // (Capped at a day, which is "until a timer or work": nanoseconds of any longer could
    // overflow.)
    idle_spin_ns_ =
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::min<std::chrono::microseconds>(options.idle_spin, std::chrono::hours(24)))
            .count();
    Result<Backend> b = resolve_backend(options.backend);
    if (!b) throw Error(b.error(), "galay: cannot start the scheduler");
    driver_ = find_backend(*b)->entry->make(self_, options);
    fair_completions_ = options.fair_completions;
    observe_options(options);
    ready_.reserve(1024);
    running_.reserve(1024);
}

SchedulerCore::~SchedulerCore() = default;

void SchedulerCore::shut_down() noexcept {
    teardown(); // (done already on a Runtime worker's own thread)
    while (remote_->posting.load(std::memory_order_acquire) != 0)
        std::this_thread::yield();
    drop_remote();
    driver_.reset();
    if (paused_) g_paused_clocks.fetch_sub(1, std::memory_order_relaxed);
}

void SchedulerCore::teardown() noexcept {
    if (torn_down_) return;
    torn_down_ = true;
    stopping_ = true;
    Scheduler* saved = exchange_current(&self_);
    // Cancel every kernel operation and wait for it, so no buffer of a frame about to be
    // destroyed is still owned by the kernel.
    driver_->shutdown();
    // The frames about to be destroyed hold the timer nodes: forget them first.
    timers_.clear();
    while (!tasks_.empty())
        tasks_.front()->abandon(); // (unlinks it)
    ready_.clear();
    running_.clear();
    Observer::clear(*this);
    drop_remote();
    // The destroyed frames closed their sockets: on io_uring, the requests that drop the ring's
    // references to them (registered slot, armed multishot recv) go to the kernel now, not
    // whenever the ring is torn down.
    driver_->flush();
    exchange_current(saved);
}

void SchedulerCore::drop_remote() noexcept {
    std::uintptr_t batch[64];
    std::size_t n;
    while ((n = remote_->queue.try_dequeue_bulk(batch, 64)) != 0) {
        for (std::size_t i = 0; i < n; ++i) {
            if ((batch[i] & kCallBit) == 0) continue; // a frame being (or already) destroyed
            auto* c = reinterpret_cast<RemoteCall*>(batch[i] & ~kCallBit);
            c->fn(c->owner, false);
        }
    }
}

void SchedulerCore::start_spawned(SpawnBase& t) {
    t.sched = &self_;
    live_.fetch_add(1, std::memory_order_relaxed);
    if (t_current == &self_)
        adopt(t);
    else
        post(t.start_call);
}

void SchedulerCore::adopt(SpawnBase& t) {
    counters_.tasks_spawned.add();
    if (observer_ != nullptr) observe_spawn(*this, t);
    t.linked = true;
    tasks_.push_back(t);
    ++linked_;
    // Started during shutdown, or aborted before it started: cancelled from the start.
    if (stopping_ || t.abort_early) t.scope.request();
    schedule(t.self);
}

void SchedulerCore::leave(SpawnBase& t) noexcept {
    if (t.linked) {
        if (!dump_cursors_.empty()) [[unlikely]]
            dump_cursor_leaving(t);
        tasks_.remove(t);
        t.linked = false;
        --linked_;
    }
    live_.fetch_sub(1, std::memory_order_relaxed);
    counters_.tasks_finished.add();
    if (observer_ != nullptr) observe_exit(*this, t);
}

void SchedulerCore::cancel_all() noexcept {
    stopping_ = true;
    for (SpawnBase* t = tasks_.front(); t != nullptr;) {
        SpawnBase* next = tasks_.next(*t); // (request() never finishes a task)
        t->scope.request();
        t = next;
    }
}

void SchedulerCore::post(std::coroutine_handle<> h) {
    enqueue_remote(reinterpret_cast<std::uintptr_t>(h.address()));
}

void SchedulerCore::post(RemoteCall& call) {
    enqueue_remote(reinterpret_cast<std::uintptr_t>(&call) | kCallBit);
}

void SchedulerCore::enqueue_remote(std::uintptr_t item) {
    remote_->posting.fetch_add(1, std::memory_order_acq_rel);
    remote_->queue.enqueue(item);
    if (!remote_->wake_pending.exchange(true, std::memory_order_acq_rel)) {
        SchedulerCore* from = t_current != nullptr ? &SchedulerAccess::core(*t_current) : nullptr;
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

void SchedulerCore::drain_remote() {
    // An exchange (not a store): the flag must be clear before the queue is read, or a post
    // between the two could find it still set and skip its wake-up.
    if (!remote_->wake_pending.exchange(false, std::memory_order_acq_rel)) return;
    counters_.remote_wakeups.add();
    std::uintptr_t batch[64];
    std::size_t n;
    while ((n = remote_->queue.try_dequeue_bulk(batch, 64)) != 0) {
        counters_.remote_items.add(n);
        for (std::size_t i = 0; i < n; ++i) {
            if ((batch[i] & kCallBit) != 0) {
                auto* c = reinterpret_cast<RemoteCall*>(batch[i] & ~kCallBit);
                c->fn(c->owner, true);
            } else {
                ready_.push_back(
                    std::coroutine_handle<>::from_address(reinterpret_cast<void*>(batch[i])));
            }
        }
    }
}

void SchedulerCore::run_ready() {
    // Resume the current batch only: coroutines scheduled meanwhile wait for the next turn, so
    // that the driver can be polled between batches (run_until_done decides when) and I/O is
    // not starved.
    running_.swap(ready_);
    resumed_since_poll_ += running_.size();
    if (!running_.empty()) spin_armed_ = true;
    if (observer_ != nullptr) {
        run_ready_observed();
        return;
    }
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

void SchedulerCore::run_ready_fairly() {
    // As run_ready, but every kFairCheckEvery handlers look at the clock: once kFairFlushNs
    // have passed since the last hand-over, what the handlers queued (their replies) goes to
    // the kernel now instead of after the whole batch (one io_uring_enter, no waiting).
    std::int64_t last = Scheduler::now_ns();
    std::size_t n = 0;
    for (std::coroutine_handle<> h : running_) {
        inline_completions_ = 0;
        h.resume();
        if (++n % kFairCheckEvery == 0) {
            const std::int64_t now = Scheduler::now_ns();
            if (now - last >= kFairFlushNs) {
                driver_->submit_queued();
                last = now;
            }
        }
    }
    running_.clear();
}

void SchedulerCore::fire_timers(std::int64_t now) {
    if (timers_.empty()) return;
    if (now < 0 || paused_) now = Scheduler::now_ns();
    while (!timers_.empty() && timers_.top_deadline() <= now) {
        TimerNode* n = timers_.pop();
        n->on_fire(n);
    }
}

bool SchedulerCore::advance_paused_clock(std::int64_t deadline_ns) {
    // Whatever the kernel has finished comes first: I/O is never skipped by a jump.
    ++polls_;
    poll_counted(0);
    if (!ready_.empty() || remote_->wake_pending.load(std::memory_order_relaxed)) return true;
    if (bounded_in_flight_ != 0) return false; // a file op or a connect: wait for it for real
    std::int64_t target = -1;
    if (!timers_.empty()) target = timers_.top_deadline();
    if (deadline_ns >= 0 && (target < 0 || deadline_ns < target)) target = deadline_ns;
    if (target < 0) return false;
    if (target > virtual_ns_) virtual_ns_ = target;
    return true;
}

bool SchedulerCore::spin_for_work(std::int64_t deadline_ns) {
    // The loop would wait in the kernel. Waking a sleeping thread costs the kernel a context
    // switch and, on a virtual machine, the hypervisor a halt and a wake of the idle vCPU: a
    // poll that finds the completion while the thread still runs avoids both.
    const std::int64_t start = Scheduler::real_now_ns();
    const std::int64_t budget_end = start + idle_spin_ns_;
    std::int64_t end = budget_end;
    if (!timers_.empty()) end = std::min(end, timers_.top_deadline());
    if (deadline_ns >= 0) end = std::min(end, deadline_ns);
    if (end <= start) return false; // a timer or the deadline is due: the loop will not wait
    spin_armed_ = false;
    counters_.spins_started.add();
    bool found;
    std::int64_t now;
    for (;;) {
        ++polls_;
        driver_->poll(0);
        if (!ready_.empty() || remote_->wake_pending.load(std::memory_order_relaxed)) {
            found = true;
            now = Scheduler::real_now_ns();
            break;
        }
        now = Scheduler::real_now_ns();
        if (now >= end) {
            found = end < budget_end; // stopped by a timer or the deadline, not the budget
            break;
        }
    }
    if constexpr (GALAY_METRICS) {
        counters_.spin_ns.add(static_cast<std::uint64_t>(now - start));
        (found ? counters_.spins_found : counters_.spins_slept).add();
        if (found) {
            // The poll that found work ends a turn, as the wait it replaces would have.
            publish_gauges();
            counters_.turn_ended();
            turn_over_at(now); // (the spin counts in the turn it ends)
        }
    }
    return found;
}

void SchedulerCore::run_until_done(const std::size_t& remaining, std::int64_t deadline_ns) {
    const bool outer = !in_loop_;
    in_loop_ = true;
    struct InLoop { // (nothing in the loop throws; this also covers a future early return)
        Driver& d;
        explicit InLoop(Driver& driver) noexcept
            : d(driver) {
            d.loop_entered();
        }
        ~InLoop() { d.loop_left(); }
    } in_loop(*driver_);
    if constexpr (GALAY_METRICS) {
        mark_ns_ = Scheduler::real_now_ns();
        if (outer) coarse_ns_.store(mark_ns_, std::memory_order_relaxed); // the first turn's start
    }
    while (remaining != 0) {
        drain_remote();
        run_ready();
        if (remaining == 0) break;
        fire_timers();
        if (!ready_.empty() && resumed_since_poll_ < kPollEvery) {
            // The batch woke tasks of this scheduler (a channel, a mutex, a join): run them
            // without asking the kernel for completions first, a system call that would find
            // none most of the time, until kPollEvery resumes have passed since the last poll
            // (so I/O waits at most that long). What they queued for the kernel (io_uring
            // submissions, wake-ups of other workers) goes to it now.
            driver_->submit_queued();
            if (deadline_ns >= 0 && Scheduler::now_ns() >= deadline_ns) break;
            continue;
        }
        resumed_since_poll_ = 0;
        std::int64_t timeout = -1;
        if (!ready_.empty() || remote_->wake_pending.load(std::memory_order_relaxed))
            timeout = 0;
        else if (spin_armed_ && idle_spin_ns_ > 0 && !paused_ && spin_for_work(deadline_ns)) {
            fire_timers();
            continue;
        } else if (!timers_.empty())
            timeout = std::max<std::int64_t>(0, timers_.top_deadline() - Scheduler::now_ns());
        if (deadline_ns >= 0) {
            const std::int64_t left = deadline_ns - Scheduler::now_ns();
            if (left <= 0) break;
            if (timeout < 0 || timeout > left) timeout = left;
        }
        if (paused_ && timeout != 0) {
            if (advance_paused_clock(deadline_ns)) {
                fire_timers();
                continue;
            }
            timeout = -1; // an op that finishes on its own is in the kernel: wait for it
        }
        ++polls_;
        fire_timers(poll_counted(timeout)); // (one clock read after the poll for both)
    }
    if constexpr (GALAY_METRICS) counters_.busy_ns.add(Scheduler::real_now_ns() - mark_ns_);
    if (outer) {
        in_loop_ = false;
        driver_->flush(); // wake-ups (and anything else) queued in the ring by the last batch
    }
}

} // namespace detail

// --- the public face -------------------------------------------------------------------------

Scheduler& current_scheduler() {
    Scheduler* s = t_current;
    if (s == nullptr) {
        std::fputs("galay: an operation was awaited outside a scheduler (use block_on)\n", stderr);
        std::abort();
    }
    return *s;
}

Scheduler::Scheduler(SchedulerOptions options)
    : core_(std::make_unique<detail::SchedulerCore>(*this, options)) {}

Scheduler::~Scheduler() {
    core_->shut_down();
}

Backend Scheduler::backend() const noexcept {
    return core_->driver_->backend();
}

const char* Scheduler::backend_name() const noexcept {
    return core_->driver_->name();
}

std::size_t Scheduler::detached_count() const noexcept {
    return core_->live_.load(std::memory_order_relaxed);
}

void Scheduler::schedule(std::coroutine_handle<> h) {
    core_->schedule(h);
}

void Scheduler::schedule_after_poll(std::coroutine_handle<> h) {
    core_->schedule_after_poll(h);
}

void Scheduler::post(std::coroutine_handle<> h) {
    core_->post(h);
}

void Scheduler::start(detail::SpawnBase& t) {
    core_->start_spawned(t);
}

void Scheduler::run_root(detail::JoinChild root) {
    Scheduler* saved = detail::SchedulerCore::exchange_current(this);
    detail::JoinState join;
    join.remaining = 1;
    join.parent = std::noop_coroutine();
    root.h.promise().join = &join;
    core_->schedule(root.h);
    core_->run_until_done(join.remaining);
    detail::SchedulerCore::exchange_current(saved);
}

} // namespace galay
