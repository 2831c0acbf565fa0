// Runtime: N worker threads, one Scheduler each (see the threading rules in galay/runtime.hpp).
//
// A worker's life has three phases. (1) It runs its scheduler until the stop call posted by
// shutdown() arrives; the call cancels every task of the worker and marks it stopping (tasks
// started later begin cancelled). (2) It keeps running until it has no task left or the grace
// period ends: cancelled tasks usually end within a turn, as their pending operations complete
// with operation_canceled. (3) On its own thread (a DEFER_TASKRUN ring accepts submissions from
// its creator only) it cancels and finishes every kernel operation and destroys the tasks still
// alive. The Scheduler objects stay until the Runtime is destroyed, after every thread has been
// joined, so that a post from any thread (a task finishing on another worker, a blocking-pool
// thread) always finds its target; what arrives after phase 3 is dropped there.
#include "galay/runtime.hpp"
#include "platform/thread_calls.hpp"
#include "runtime/scheduler_access.hpp"
#include "runtime/stop_hooks.hpp"
#include "runtime/thread_signals.hpp"

#include <atomic>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

namespace galay {

namespace {
thread_local Runtime* t_runtime = nullptr;
thread_local int t_worker = -1;
} // namespace

namespace detail {

/// What a Runtime is behind its public face (galay/runtime.hpp): its workers, their threads and
/// schedulers, and the gate spawns pass while it is open.
class RuntimeCore {
public:
    struct Worker {
        RuntimeCore* rt = nullptr;
        unsigned index = 0;
        int cpu = -1; // pin_workers: the CPU it runs on
        std::thread thread;
        std::unique_ptr<Scheduler> sched;
        std::exception_ptr error; // its scheduler could not be created
        std::atomic<int> status{kStarting};
        enum : int { kStarting, kReady, kFailed };
        std::size_t running = 1; // phase 1 lasts while this is 1 (worker thread only)
        detail::RemoteCall stop_call;

        static void on_stop(void* owner, bool run) noexcept {
            auto* w = static_cast<Worker*>(owner);
            if (!run) return;
            w->running = 0;
            SchedulerAccess::core(*w->sched).cancel_all();
        }
    };

    RuntimeCore(Runtime& self, RuntimeOptions options)
        : self_(self)
        , options_(options) {}
    void start();
    void worker_main(unsigned index);
    bool enter() noexcept;
    void leave() noexcept;
    void shutdown() noexcept;
    /// ~Runtime, while the Runtime is still whole (a task that runs during the shutdown may call
    /// it): shutdown(), then what was queued for the workers after it is dropped and the
    /// schedulers are destroyed.
    void stop() noexcept;

    Runtime& self_;
    RuntimeOptions options_;
    std::vector<std::unique_ptr<Worker>> workers_;
    mutable std::atomic<unsigned> next_{0};
    std::atomic<int> entered_{0};
    std::atomic<bool> closed_{false};
    bool joined_ = false;
};

} // namespace detail

namespace {} // namespace

Runtime* Runtime::current() noexcept {
    return t_runtime;
}

int this_worker() noexcept {
    return t_worker;
}

namespace detail {

void RuntimeCore::start() {
    unsigned n = options_.workers;
    if (n == 0) n = std::thread::hardware_concurrency();
    if (n == 0) n = 1;
    std::vector<int> cpus;
    if (options_.pin_workers) {
#if GALAY_HAVE_CPU_AFFINITY
        cpus = platform::allowed_cpus();
#else
        throw Error(make_error_code(errc::not_supported),
                    "galay: pin_workers: this system has no thread CPU affinity");
#endif
    }
    workers_.reserve(n);
    for (unsigned i = 0; i < n; ++i) {
        auto w = std::make_unique<Worker>();
        w->rt = this;
        w->index = i;
        w->stop_call = {&Worker::on_stop, w.get()};
        if (!cpus.empty()) w->cpu = cpus[i % cpus.size()];
        workers_.push_back(std::move(w));
    }
    unsigned started = 0;
    std::exception_ptr thread_error;
    for (unsigned i = 0; i < n; ++i) {
        Worker& w = *workers_[i];
        try {
            w.thread = std::thread([this, i] { worker_main(i); });
            ++started;
        } catch (...) {
            thread_error = std::current_exception();
            break;
        }
    }
    // Wait until every started worker has created its scheduler (or failed to).
    std::exception_ptr error = thread_error;
    for (unsigned i = 0; i < started; ++i) {
        Worker& w = *workers_[i];
        w.status.wait(Worker::kStarting, std::memory_order_acquire);
        if (w.status.load(std::memory_order_acquire) == Worker::kFailed && !error) error = w.error;
    }
    if (error) {
        shutdown();
        workers_.clear();
        std::rethrow_exception(error);
    }
}

void RuntimeCore::worker_main(unsigned index) {
    Worker& w = *workers_[index];
    t_runtime = &self_;
    t_worker = static_cast<int>(index);
    const std::string name = "galay-w" + std::to_string(index);
    platform::set_thread_name(name.c_str());
    detail::block_async_signals(); // (runtime/thread_signals.hpp)
#if GALAY_HAVE_CPU_AFFINITY
    if (w.cpu >= 0) platform::pin_thread(w.cpu);
#endif
    std::unique_ptr<Scheduler> sched;
    std::exception_ptr error;
    try {
        sched = std::make_unique<Scheduler>(options_.scheduler);
        SchedulerAccess::core(*sched).wake_group_ = this;
        SchedulerAccess::core(*sched).worker_ = static_cast<int>(index);
    } catch (...) {
        error = std::current_exception();
    }
    Scheduler* s = sched.get();
    w.sched = std::move(sched);
    w.error = error;
    w.status.store(s != nullptr ? Worker::kReady : Worker::kFailed, std::memory_order_release);
    w.status.notify_all();
    if (s == nullptr) return;

    SchedulerCore& core = SchedulerAccess::core(*s);
    SchedulerCore::exchange_current(s);
    core.run_until_done(w.running); // until the stop call
    const std::int64_t grace =
        std::chrono::duration_cast<std::chrono::nanoseconds>(options_.shutdown_grace).count();
    core.run_until_done(core.linked_, Scheduler::now_ns() + (grace > 0 ? grace : 0));
    core.teardown();
    SchedulerCore::exchange_current(nullptr);
    t_runtime = nullptr;
    t_worker = -1;
}

void RuntimeCore::stop() noexcept {
    shutdown();
    // Everything queued for a worker after its phase 3 is dropped while every scheduler still
    // exists (dropping a spawn completes its handle, which may post to another one).
    for (auto& w : workers_)
        if (w->sched) SchedulerAccess::core(*w->sched).drop_remote();
    for (auto& w : workers_)
        w->sched.reset();
}

bool RuntimeCore::enter() noexcept {
    // Dekker with shutdown(): both sides write their flag then read the other's, seq_cst.
    entered_.fetch_add(1, std::memory_order_seq_cst);
    if (!closed_.load(std::memory_order_seq_cst)) return true;
    entered_.fetch_sub(1, std::memory_order_seq_cst);
    return false;
}

void RuntimeCore::leave() noexcept {
    entered_.fetch_sub(1, std::memory_order_seq_cst);
}

void RuntimeCore::shutdown() noexcept {
    if (joined_) return;
    if (t_runtime == &self_)
        detail::fatal("galay: Runtime::shutdown() called from one of its own workers (it joins "
                      "them); call it from another thread");
    // What must be torn down on the workers themselves (a Sharded's shards), while they run.
    if (!closed_.load(std::memory_order_seq_cst)) run_stop_hooks(self_);
    closed_.store(true, std::memory_order_seq_cst);
    while (entered_.load(std::memory_order_seq_cst) != 0)
        std::this_thread::yield();
    for (auto& w : workers_)
        if (w->sched) SchedulerAccess::post(*w->sched, w->stop_call);
    for (auto& w : workers_)
        if (w->thread.joinable()) w->thread.join();
    joined_ = true;
}

} // namespace detail

// --- the public face -------------------------------------------------------------------------

Runtime::Runtime(RuntimeOptions options)
    : core_(std::make_unique<detail::RuntimeCore>(*this, options)) {
    core_->start();
}

Runtime::~Runtime() {
    core_->stop();
}

unsigned Runtime::size() const noexcept {
    return static_cast<unsigned>(core_->workers_.size());
}

Backend Runtime::backend() const noexcept {
    return core_->workers_.front()->sched->backend();
}

const char* Runtime::backend_name() const noexcept {
    return core_->workers_.front()->sched->backend_name();
}

Scheduler& Runtime::scheduler(unsigned worker) const {
    if (worker >= core_->workers_.size()) throw std::out_of_range("galay: no such worker");
    return *core_->workers_[worker]->sched;
}

unsigned Runtime::least_loaded() const noexcept {
    const auto& workers = core_->workers_;
    const auto n = static_cast<unsigned>(workers.size());
    const unsigned start = core_->next_.fetch_add(1, std::memory_order_relaxed) % n;
    unsigned best = start;
    std::size_t best_load = workers[start]->sched->detached_count();
    for (unsigned k = 1; k < n && best_load != 0; ++k) {
        const unsigned i = (start + k) % n;
        const std::size_t load = workers[i]->sched->detached_count();
        if (load < best_load) {
            best = i;
            best_load = load;
        }
    }
    return best;
}

void Runtime::place(unsigned worker, detail::SpawnBase& t) noexcept {
    if (!core_->enter()) {
        detail::refuse_spawn(t);
        return;
    }
    detail::SchedulerAccess::core(*core_->workers_[worker]->sched).start_spawned(t);
    core_->leave();
}

void Runtime::shutdown() noexcept {
    core_->shutdown();
}

} // namespace galay
