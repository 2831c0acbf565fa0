// The low-priority thread a task dump does its own work on (naming frames, formatting): a worker
// that becomes runnable takes the CPU back from it at once, instead of after a time slice. Also
// TaskDump::text() and json(), which format there.
#include "runtime/task_snapshot.hpp"

#include "galay/scheduler.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <system_error>
#include <thread>

namespace galay::detail {

namespace {

thread_local bool t_low_priority = false;

/// SCHED_IDLE: the scheduler runs this thread only when nothing else wants the CPU, and a waking
/// thread of any other policy preempts it. Where that is refused, the lowest nice value (a
/// thread's own on Linux). macOS and FreeBSD have neither for a thread: the lowest priority of
/// the normal policy.
void lower_this_thread() noexcept {
#if defined(__linux__)
    sched_param p{};
    if (::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &p) != 0)
        (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
#else
    sched_param p{};
    p.sched_priority = ::sched_get_priority_min(SCHED_OTHER);
    (void)::pthread_setschedparam(::pthread_self(), SCHED_OTHER, &p);
#endif
}

} // namespace

void at_low_priority(bool wanted, const std::function<void()>& f) {
    // On a worker the worker waits either way (and a dump's own snapshot must stay on it); on
    // a low-priority thread already, there is nothing to gain.
    if (!wanted || t_low_priority || Scheduler::current() != nullptr) {
        f();
        return;
    }
    std::exception_ptr failed;
    try {
        std::thread t([&] {
            t_low_priority = true;
            lower_this_thread();
            try {
                f();
            } catch (...) {
                failed = std::current_exception();
            }
        });
        t.join();
    } catch (const std::system_error&) { // no thread to be had: at the caller's priority
        f();
        return;
    }
    if (failed) std::rethrow_exception(failed);
}

} // namespace galay::detail

namespace galay {

std::string TaskDump::text() const {
    std::string out;
    detail::at_low_priority(low_priority, [&] { out = detail::dump_text(*this); });
    return out;
}

std::string TaskDump::json() const {
    std::string out;
    detail::at_low_priority(low_priority, [&] { out = detail::dump_json(*this); });
    return out;
}

} // namespace galay
