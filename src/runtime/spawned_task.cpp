// Spawned tasks: the shared state behind a JoinHandle (finish, abort, join from another thread),
// and where an exception escaping a detached task is reported.
#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>

namespace galay {

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
    if (sched != nullptr) SchedulerAccess::core(*sched).leave(*this);
    const std::uint32_t prev = state.exchange(kDone, std::memory_order_acq_rel);
    if (prev == kAwaited) {
        // The awaiter published `waiter` before kAwaited and can no longer withdraw it, so it
        // holds its reference until it is resumed: the task's is dropped first, and the state is
        // freed where the awaiter takes the result (an invoke_on frame goes back to the
        // caller's cache).
        Scheduler* to = waiter_sched;
        const std::coroutine_handle<> h = waiter;
        release();
        if (to == Scheduler::current())
            SchedulerAccess::schedule(*to, h);
        else
            SchedulerAccess::core(*to).post(h);
        return;
    }
    if (prev == kJoining) {
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
    SchedulerAccess::post(*sched, abort_call);
}

void SpawnBase::on_start(void* owner, bool run) noexcept {
    auto* t = static_cast<SpawnBase*>(owner);
    if (run)
        SchedulerAccess::core(*t->sched).adopt(*t);
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
} // namespace detail
} // namespace galay
