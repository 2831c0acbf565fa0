// The process-wide blocking pool (galay/blocking.hpp): `spawn_blocking`, the epoll file engine's
// buffered-file operations and `resolve()` all run their blocking calls here.
//
// Why one pool per process rather than one per scheduler or per Runtime: blocking work is bounded
// by what the machine can do (disk, DNS), not by the number of event loops, and a plain Scheduler
// with no Runtime needs it too. It is created on first use and never destroyed (threads exit
// after 10 s idle; at process exit idle ones are simply dropped), so no static destructor can
// race a job still running.
//
// A job is a function and two keys (a, b). Jobs wait in a FIFO; `blocking_cancel` takes one back
// while no thread has started it. Whoever submitted a job knows when it is over through its own
// hand-back (a post, a queue): `blocking_wait_idle` is for the one case where the submitter is
// destroyed first and must know the pool no longer touches it.
#include "galay/blocking.hpp"
#include "galay/runtime.hpp"
#include "platform/thread_calls.hpp"
#include "runtime/scheduler_access.hpp"
#include "runtime/thread_signals.hpp"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

namespace galay {
namespace detail {
namespace {

constexpr unsigned kDefaultThreads = 64;
constexpr auto kKeepAlive = std::chrono::seconds(10);

struct Job {
    BlockingFn fn;
    void* a;
    void* b;
};

/// What one pool thread is running (linked into the pool's list while it runs).
struct Running {
    void* a = nullptr;
    void* b = nullptr;
    Running* next = nullptr;
};

class Pool {
public:
    Pool() {
        if (const char* env = std::getenv("GALAY_BLOCKING_THREADS"); env != nullptr && *env) {
            const long v = std::strtol(env, nullptr, 10);
            if (v > 0) max_ = static_cast<unsigned>(v);
        }
    }

    void submit(const Job& job) {
        std::unique_lock lk(m_);
        queue_.push_back(job);
        // A new thread when every idle one already has a job waiting for it, up to the limit.
        if (queue_.size() > idle_ && threads_ < max_) {
            try {
                std::thread([this] { work(); }).detach();
                ++threads_;
                return;
            } catch (...) {
                if (threads_ == 0) { // nobody would ever run it
                    queue_.pop_back();
                    throw;
                }
            }
        }
        if (idle_ > 0) work_cv_.notify_one();
    }

    bool cancel(void* a, void* b) noexcept {
        std::lock_guard lk(m_);
        for (auto it = queue_.begin(); it != queue_.end(); ++it) {
            if (it->a != a || it->b != b) continue;
            queue_.erase(it);
            return true;
        }
        return false;
    }

    void cancel_all(void* a, void (*each)(void*, void*) noexcept, void* ctx) noexcept {
        std::deque<Job> taken;
        {
            std::lock_guard lk(m_);
            for (auto it = queue_.begin(); it != queue_.end();) {
                if (it->a == a) {
                    taken.push_back(*it);
                    it = queue_.erase(it);
                } else {
                    ++it;
                }
            }
        }
        for (const Job& j : taken)
            each(j.b, ctx);
    }

    void wait_idle(void* a, void* b) noexcept {
        std::unique_lock lk(m_);
        ++idle_waiters_;
        done_cv_.wait(lk, [&] {
            for (Running* r = running_; r != nullptr; r = r->next)
                if (r->a == a && (b == nullptr || r->b == b)) return false;
            return true;
        });
        --idle_waiters_;
    }

    void set_max(unsigned n) noexcept {
        std::lock_guard lk(m_);
        max_ = n == 0 ? 1 : n;
    }
    unsigned max() noexcept {
        std::lock_guard lk(m_);
        return max_;
    }
    BlockingStats stats() noexcept {
        std::lock_guard lk(m_);
        return {threads_, started_, queue_.size()};
    }

private:
    void work() noexcept {
        platform::set_thread_name("galay-blocking");
        block_async_signals(); // (runtime/thread_signals.hpp)
        std::unique_lock lk(m_);
        for (;;) {
            while (queue_.empty()) {
                ++idle_;
                const bool woken =
                    work_cv_.wait_for(lk, kKeepAlive, [&] { return !queue_.empty(); });
                --idle_;
                if (!woken) {
                    --threads_;
                    return;
                }
            }
            if (threads_ > max_) { // the limit was lowered: leave the job to the others
                --threads_;
                work_cv_.notify_one();
                return;
            }
            const Job job = queue_.front();
            queue_.pop_front();
            ++started_;
            Running me{job.a, job.b, running_};
            running_ = &me;
            lk.unlock();
            job.fn(job.a, job.b);
            lk.lock();
            for (Running** p = &running_; *p != nullptr; p = &(*p)->next) {
                if (*p != &me) continue;
                *p = me.next;
                break;
            }
            if (idle_waiters_ > 0) done_cv_.notify_all();
        }
    }

    std::mutex m_;
    std::condition_variable work_cv_;
    std::condition_variable done_cv_;
    std::deque<Job> queue_;
    Running* running_ = nullptr;
    unsigned threads_ = 0;
    unsigned idle_ = 0;
    unsigned idle_waiters_ = 0;
    unsigned max_ = kDefaultThreads;
    std::uint64_t started_ = 0;
};

Pool& pool() {
    static Pool* p = new Pool; // never destroyed: see the top of this file
    return *p;
}

} // namespace

void blocking_submit(BlockingFn fn, void* a, void* b) {
    pool().submit(Job{fn, a, b});
}

bool blocking_cancel(void* a, void* b) noexcept {
    return pool().cancel(a, b);
}

void blocking_cancel_all(void* a, void (*each)(void* b, void* ctx) noexcept, void* ctx) noexcept {
    pool().cancel_all(a, each, ctx);
}

void blocking_wait_idle(void* a, void* b) noexcept {
    pool().wait_idle(a, b);
}

BlockingStats blocking_stats() noexcept {
    return pool().stats();
}

void post_to(Scheduler& s, std::coroutine_handle<> h) noexcept {
    SchedulerAccess::core(s).post(h);
}

} // namespace detail

void set_blocking_threads(unsigned max) noexcept {
    detail::pool().set_max(max);
}

unsigned blocking_threads() noexcept {
    return detail::pool().max();
}

} // namespace galay
