// bench_task_dump: what a task dump (galay/task_dump.hpp) costs with many tasks alive, and what
// its bookkeeping costs in memory per task.
//
//     bench_task_dump --tasks 100000 --dumps 5 --backend io_uring
//
// Spawns --tasks tasks over --workers workers, half waiting on a long sleep and half on a
// Channel receive, then takes --dumps dumps from the main thread and prints, per dump: the time
// from the request to the last line of its text (request, every worker's snapshot, naming the
// frames, formatting), and the longest time a worker's loop was held by its snapshot (timed by
// the worker around each chunk it copies). Also the heap bytes per task (mallinfo2 before and
// after spawning, frames and the bookkeeping included): run it on a build with
// GALAY_TASK_DUMP=OFF to see what the bookkeeping adds. --json prints one object.
//
// --churn ROUNDS: no dumps; the bookkeeping's own work per state change, each case ROUNDS times
// on one scheduler with no kernel I/O (a Channel round trip, a three-deep Task chain, a sleep
// due at once, a yield_now that makes a loop turn), --dumps runs; ns a round, to compare with a
// GALAY_TASK_DUMP=OFF build.
//
// Loop turns: a probe task on each worker sleeps --probe-us at a time and notes the longest gap
// between two of its resumes, which is the longest loop turn plus the sleep; the bench takes it
// over each dump (request to last line, then 20 more of its resumes) and over an equal period right
// after it with no dump, and reports per dump the largest lengthening over the workers (with -
// without). `--pin` pins worker i to the i-th CPU and this thread (and so the dump's low-priority
// thread it starts) to the next one modulo their number (`--workers 1 --pin` on two CPUs: worker
// on the first, the dump's request and formatting on the second; `--pin` with two workers: this
// thread beside worker 0), to tell which thread takes a worker's CPU. The same windows also read
// each worker's longest loop turn from the loop's own measure
// (metrics::WorkerMetrics::longest_turn_ns), which no sleep granularity blurs; it is empty (0) in a
// build with GALAY_TASK_DUMP=OFF.
//
// Wall or CPU: each worker reports its longest snapshot chunk's wall time and the thread CPU time
// it spent in it, and its chunks' CPU time per task copied. A dump whose loop turn lengthened by
// more than 1 ms is printed on its own line with the worst worker's involuntary context switches
// over that window and over the window without a dump: a long turn whose chunk's CPU is short
// and whose worker was preempted is another thread's time, not the dump's work. The summary
// counts those dumps and gives the worst worker's involuntary switches per dump.
#include "common/tool_support.hpp"

#include <galay/galay.hpp>
#include <malloc.h>
#include <nlohmann/json.hpp>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace galay;

namespace {

Task<void> sleeper() {
    (void)co_await sleep(std::chrono::hours(1));
}

Task<void> receiver(Channel<int>& ch) {
    (void)co_await ch.recv();
}

/// Where the dump is asked for and formatted (--from).
enum class From { main, task, task_inline };

/// A dump asked for from a task on a worker, as the /tasks endpoints do: off the worker
/// (task_dump_report_async), or with the text formatted on the worker (task_inline).
Task<void> dump_from_task(const Runtime& rt, bool off_worker, TaskDumpOptions o,
                          std::promise<std::string>& done) {
    if (off_worker) {
        done.set_value(co_await task_dump_report_async(rt, TaskDumpFormat::text, o));
        co_return;
    }
    const TaskDump d = co_await task_dump_async(rt, o);
    done.set_value(d.text());
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

/// One worker's probe: the longest gap between two of its resumes since the window began
/// (exchanged to 0 by the main thread at each window's start).
struct Probe {
    std::atomic<std::int64_t> worst_ns{0};
    std::atomic<std::uint64_t> resumes{0};
    std::atomic<bool> stop{false};
};

std::int64_t clock_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

Task<void> probe(Probe& p, std::chrono::microseconds period) {
    std::int64_t last = clock_ns();
    while (!p.stop.load(std::memory_order_relaxed)) {
        (void)co_await sleep(period);
        const std::int64_t now = clock_ns();
        const std::int64_t gap = now - last;
        last = now;
        std::int64_t cur = p.worst_ns.load(std::memory_order_relaxed);
        while (gap > cur &&
               !p.worst_ns.compare_exchange_weak(cur, gap, std::memory_order_relaxed)) {
        }
        p.resumes.fetch_add(1, std::memory_order_release);
    }
}

/// Pins the calling thread to the allowed CPU after the `workers` first ones (modulo their
/// number); false when it cannot.
bool pin_this_thread_after(unsigned workers) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    if (cpus.empty()) return false;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[workers % cpus.size()], &one);
    return ::pthread_setaffinity_np(::pthread_self(), sizeof one, &one) == 0;
}

/// The calling thread's id, from a task on the worker it runs on.
Task<void> note_tid(std::promise<pid_t>& tid) {
    tid.set_value(::gettid());
    co_return;
}

/// How many times thread `tid` of this process lost its CPU while it could run (the kernel's
/// nonvoluntary_ctxt_switches): a loop turn that grew while it did was preempted.
long preemptions(pid_t tid) {
    const std::string path = "/proc/self/task/" + std::to_string(tid) + "/status";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return -1;
    char line[256];
    long n = -1;
    while (std::fgets(line, sizeof line, f) != nullptr)
        if (std::sscanf(line, "nonvoluntary_ctxt_switches: %ld", &n) == 1) break;
    std::fclose(f);
    return n;
}

// --churn: the bookkeeping's own work per state change, with nothing else in the way (no
// kernel I/O, one scheduler, one thread). Each case runs `rounds` times; the figure is the
// wall time over the rounds, in ns.
/// Ping-pong between two tasks over two Channels of one slot: each round trip suspends and
/// resumes both tasks once (a waiter's start time and its link into the task's scope).
Task<void> pong(Channel<int>& in, Channel<int>& out, unsigned rounds) {
    for (unsigned i = 0; i < rounds; ++i) {
        auto v = co_await in.recv();
        (void)co_await out.send(*v);
    }
}
Task<void> ping(Channel<int>& out, Channel<int>& in, unsigned rounds) {
    for (unsigned i = 0; i < rounds; ++i) {
        (void)co_await out.send(static_cast<int>(i));
        (void)co_await in.recv();
    }
}
/// A three-deep chain of Tasks that end at once: the awaited child linked from each parent.
/// (Under sanitizers the compiler emits no tail call for symmetric transfer, so every round
/// uses stack: keep --churn to a few thousand rounds there.)
Task<int> leaf(int v) {
    co_return v + 1;
}
Task<int> middle(int v) {
    co_return co_await leaf(v) + 1;
}
Task<int> top(int v) {
    co_return co_await middle(v) + 1;
}
Task<void> chains(unsigned rounds, int& sum) {
    for (unsigned i = 0; i < rounds; ++i)
        sum += co_await top(static_cast<int>(i));
}
/// A timer that is due at once: the sleep's start time and its link into the task's scope (the
/// loop runs the woken task without polling the driver, 64 times between two polls).
Task<void> sleeps(unsigned rounds) {
    for (unsigned i = 0; i < rounds; ++i)
        (void)co_await sleep(std::chrono::nanoseconds(1));
}
/// yield_now: a loop turn per round, with a poll of the driver that does not wait (the turn's
/// length filed, the clock a dump's wait times are read from moved on).
Task<void> yields(unsigned rounds) {
    for (unsigned i = 0; i < rounds; ++i)
        co_await yield_now();
}
/// Each case `rounds` times on a fresh scheduler, in ns per round.
Task<void> churn_once(unsigned rounds, std::vector<double>& out) {
    Channel<int> a(1), b(1);
    int sum = 0;
    auto t0 = std::chrono::steady_clock::now();
    JoinHandle<void> p = spawn(pong(a, b, rounds));
    co_await spawn(ping(a, b, rounds));
    co_await std::move(p);
    auto t1 = std::chrono::steady_clock::now();
    co_await spawn(chains(rounds, sum));
    auto t2 = std::chrono::steady_clock::now();
    co_await spawn(sleeps(rounds));
    auto t3 = std::chrono::steady_clock::now();
    co_await spawn(yields(rounds));
    auto t4 = std::chrono::steady_clock::now();
    if (sum == 0) throw std::logic_error("bench_task_dump: the chains returned nothing");
    const auto per = [&](auto d) {
        return std::chrono::duration<double, std::nano>(d).count() / static_cast<double>(rounds);
    };
    out = {per(t1 - t0), per(t2 - t1), per(t3 - t2), per(t4 - t3)};
}
/// --churn: `repeats` runs of every case; prints each case's median [min-max] in ns per round.
int run_churn(Backend backend, unsigned rounds, unsigned repeats, bool json) {
    static constexpr const char* kCases[] = {"channel_round_trip", "await_chain_of_3",
                                             "sleep_due_at_once", "yield_now_turn"};
    std::vector<std::vector<double>> ns(std::size(kCases));
    try {
        for (unsigned r = 0; r < repeats; ++r) {
            std::vector<double> one;
            SchedulerOptions so;
            so.backend = backend;
            block_on(churn_once(rounds, one), so);
            for (std::size_t c = 0; c < ns.size(); ++c)
                ns[c].push_back(one[c]);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_task_dump: %s\n", e.what());
        return tools::kExitFailure;
    }
    if (json) {
        nlohmann::json out;
        out["backend"] = backend_name(backend);
        out["task_dump_bookkeeping"] = GALAY_TASK_DUMP != 0;
        out["rounds"] = rounds;
        for (std::size_t c = 0; c < ns.size(); ++c)
            out[std::string(kCases[c]) + "_ns"] = ns[c];
        std::printf("%s\n", out.dump().c_str());
        return tools::kExitOk;
    }
    std::printf("bench_task_dump --churn: %u rounds x %u runs (%s), bookkeeping %s\n", rounds,
                repeats, backend_name(backend), GALAY_TASK_DUMP ? "on" : "off");
    for (std::size_t c = 0; c < ns.size(); ++c)
        std::printf("%-20s median %.1f ns [%.1f-%.1f] a round\n", kCases[c], median(ns[c]),
                    *std::min_element(ns[c].begin(), ns[c].end()),
                    *std::max_element(ns[c].begin(), ns[c].end()));
    return tools::kExitOk;
}

/// --caller: how the thread that asks for the dumps (and, with --normal-priority, formats them)
/// is scheduled. "nice19": the lowest nice value; "slice100ms": Linux's EEVDF custom slice
/// (sched_attr.sched_runtime, Linux 6.12 and later) at its longest, which lets a waking thread
/// with the default, shorter slice preempt it at once. False when the kernel refuses.
bool schedule_caller(const std::string& how) {
    if (how == "nice19") return ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19) == 0;
    if (how != "slice100ms") return true;
    struct { // the kernel's struct sched_attr (its header clashes with <sched.h>)
        std::uint32_t size, sched_policy;
        std::uint64_t sched_flags;
        std::int32_t sched_nice;
        std::uint32_t sched_priority;
        std::uint64_t sched_runtime, sched_deadline, sched_period;
        std::uint32_t sched_util_min, sched_util_max;
    } a{};
    a.size = sizeof a;
    a.sched_policy = SCHED_OTHER;
    a.sched_runtime = 100'000'000;
    return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

double spread_min(const std::vector<double>& v) {
    return *std::min_element(v.begin(), v.end());
}
double spread_max(const std::vector<double>& v) {
    return *std::max_element(v.begin(), v.end());
}

} // namespace

int main(int argc, char** argv) {
    Backend backend = Backend::io_uring;
    unsigned tasks = 100'000;
    unsigned workers = 2;
    unsigned dumps = 5;
    unsigned probe_us = 100;
    bool pin = false;
    bool json = false;
    bool normal_priority = false;
    std::string from_name = "main";
    unsigned churn = 0;
    std::string caller = "default";
    cli::App app{"Task dump cost: time to the last line, loop hold, bytes per task",
                 "bench_task_dump"};
    tools::add_backend_flag(app, &backend);
    app.add_option("--tasks", tasks, "tasks alive during the dumps")
        ->check(tools::whole(1, 1'000'000));
    app.add_option("--workers", workers, "Runtime workers")->check(tools::whole(1, 64));
    app.add_option("--dumps", dumps, "dumps to take")->check(tools::whole(1, 1000));
    app.add_option("--probe-us", probe_us, "the loop-turn probe's sleep, in microseconds")
        ->check(tools::whole(10, 100'000));
    app.add_flag("--pin", pin,
                 "pin worker i to the i-th CPU this process may use and the dumping thread to the "
                 "next one");
    app.add_option("--from", from_name,
                   "who asks for the dump: main (this thread, then text()), task (a task on worker "
                   "0, with task_dump_report_async, as GET /tasks does), task-inline (a task on "
                   "worker 0 that formats the text on its worker)")
        ->check(cli::IsMember({"main", "task", "task-inline"}))
        ->capture_default_str();
    app.add_flag("--normal-priority", normal_priority,
                 "do the dump's own work at the caller's priority (TaskDumpOptions::low_priority "
                 "false)");
    app.add_option("--caller", caller,
                   "how the thread asking for the dumps is scheduled: default, nice19 (the "
                   "lowest nice value), slice100ms (Linux 6.12+: the longest EEVDF slice, so "
                   "that a waking worker preempts it)")
        ->check(cli::IsMember({"default", "nice19", "slice100ms"}))
        ->capture_default_str();
    app.add_option("--churn", churn,
                   "instead of dumps: time the bookkeeping's state changes alone (a Channel round "
                   "trip, a three-deep Task chain, a sleep due at once, a yield_now), this many "
                   "rounds each, --dumps runs of them, ns a round")
        ->check(tools::whole(1, 100'000'000));
    app.add_flag("--json", json, "print one JSON object");
    if (auto code = tools::parse_command_line(app, argc, argv, "bench_task_dump")) return *code;
    if (churn > 0) return run_churn(backend, churn, dumps, json);
    const From from = from_name == "task"          ? From::task
                      : from_name == "task-inline" ? From::task_inline
                                                   : From::main;

    RuntimeOptions o;
    o.workers = workers;
    o.scheduler.backend = backend;
    o.pin_workers = pin;
    std::optional<Runtime> rt;
    try {
        rt.emplace(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_task_dump: cannot start the runtime: %s\n", e.what());
        return tools::kExitFailure;
    }
    if (!schedule_caller(caller)) {
        std::fprintf(stderr, "bench_task_dump: error: --caller %s: the kernel refused: %s\n",
                     caller.c_str(), std::strerror(errno));
        return tools::kExitFailure;
    }
    if (pin && !pin_this_thread_after(workers)) {
        std::fprintf(stderr, "bench_task_dump: cannot pin the dumping thread: %s\n",
                     std::strerror(errno));
        return tools::kExitFailure;
    }
    std::vector<std::unique_ptr<Channel<int>>> channels;
    for (unsigned w = 0; w < workers; ++w)
        channels.push_back(std::make_unique<Channel<int>>(1));
    const std::size_t heap0 = mallinfo2().uordblks;
    for (unsigned i = 0; i < tasks; ++i) {
        const unsigned w = i % workers;
        if (i % 2 == 0)
            rt->spawn_on(w, sleeper());
        else
            rt->spawn_on(w, receiver(*channels[w]));
    }
    // Every task placed and suspended: the dump sees them all waiting.
    TaskDump d;
    for (int tries = 0; tries < 1000; ++tries) {
        d = task_dump(*rt, {.answer_within = std::chrono::milliseconds(5000)});
        std::size_t waiting = 0;
        for (const TaskInfo& t : d.tasks)
            waiting += t.state == TaskState::waiting && !t.waits.empty();
        if (waiting >= tasks) break;
    }
    d = TaskDump{}; // (its memory is not the tasks')
    const std::size_t heap1 = mallinfo2().uordblks;
    // The probes start after the heap is measured (their frames are not the tasks').
    std::vector<std::unique_ptr<Probe>> probes;
    for (unsigned w = 0; w < workers; ++w) {
        probes.push_back(std::make_unique<Probe>());
        rt->spawn_on(w, probe(*probes.back(), std::chrono::microseconds(probe_us)));
    }
    // Each worker's longest probe gap over body() and then at least 20 more of its resumes, in
    // ms. Waiting for the resumes rather than for a time is what makes every figure a measured
    // one: on a loaded machine a worker may not run at all for a while, and a window it never
    // resumed in would report no gap. A probe that does not resume for 10 s is a stuck worker:
    // the bench says so and reports nothing.
    // Also each worker's longest loop turn over the window, from the loop's own measure
    // (metrics::WorkerMetrics::longest_turn_ns: a snapshot starts a new period), in ms.
    std::vector<pid_t> tids;
    for (unsigned w = 0; w < workers; ++w) {
        std::promise<pid_t> tid;
        std::future<pid_t> got = tid.get_future();
        rt->spawn_on(w, note_tid(tid));
        tids.push_back(got.get());
    }
    std::vector<double> loop_worst;
    std::vector<long> preempted; // per worker, over the window
    auto window = [&](auto&& body) {
        (void)metrics::snapshot(*rt);
        for (auto& p : probes)
            p->worst_ns.store(0, std::memory_order_relaxed);
        std::vector<long> before;
        for (const pid_t t : tids)
            before.push_back(preemptions(t));
        body();
        std::vector<std::uint64_t> after;
        for (auto& p : probes)
            after.push_back(p->resumes.load(std::memory_order_acquire));
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        for (std::size_t w = 0; w < probes.size(); ++w) {
            while (probes[w]->resumes.load(std::memory_order_acquire) < after[w] + 20) {
                if (std::chrono::steady_clock::now() > give_up) {
                    std::fprintf(stderr,
                                 "bench_task_dump: error: worker %zu's probe did not resume for "
                                 "10 s; no figure reported\n",
                                 w);
                    std::_Exit(tools::kExitFailure); // a stuck worker would hold shutdown()
                }
                std::this_thread::sleep_for(std::chrono::microseconds(probe_us));
            }
        }
        preempted.clear();
        for (std::size_t w = 0; w < tids.size(); ++w)
            preempted.push_back(preemptions(tids[w]) - before[w]);
        loop_worst.clear();
        for (const metrics::WorkerMetrics& w : metrics::snapshot(*rt).workers)
            loop_worst.push_back(static_cast<double>(w.longest_turn_ns) / 1e6);
        std::vector<double> worst;
        for (auto& p : probes)
            worst.push_back(
                static_cast<double>(p->worst_ns.exchange(0, std::memory_order_relaxed)) / 1e6);
        return worst;
    };
    std::vector<double> to_last_line_ms, hold_ms, hold_cpu_ms, took_ms;
    std::vector<double> cpu_ns_per_task; // the snapshots' CPU time over the tasks copied
    std::vector<long> preempted_with_dump, preempted_without_dump; // the worst worker's, per dump
    std::vector<double> turn_with_ms, turn_without_ms, lengthening_ms; // per dump, worst worker
    std::vector<double> loop_turn_with_ms, loop_turn_without_ms, loop_lengthening_ms; // (same)
    std::size_t lines = 0;
    for (unsigned i = 0; i < dumps; ++i) {
        std::chrono::steady_clock::time_point t0, t1;
        TaskDump x;
        std::string text;
        // Each window runs on for 20 probe resumes past the dump, so that the resume that ends
        // the gap a dump lengthened falls inside it however short the dump; the window without a
        // dump lasts as long as the dump did, then as many resumes.
        const TaskDumpOptions dump_options{.answer_within = std::chrono::milliseconds(5000),
                                           .low_priority = !normal_priority};
        const std::vector<double> with = window([&] {
            t0 = std::chrono::steady_clock::now();
            if (from == From::main) {
                x = task_dump(*rt, dump_options);
                text = x.text();
            } else {
                std::promise<std::string> done;
                std::future<std::string> got = done.get_future();
                rt->spawn_on(0, dump_from_task(*rt, from == From::task, dump_options, done));
                text = got.get();
            }
            t1 = std::chrono::steady_clock::now();
        });
        const std::vector<double> loop_with = loop_worst;
        const std::vector<long> preempted_with = preempted;
        const std::vector<double> without = window([&] { std::this_thread::sleep_for(t1 - t0); });
        const std::vector<double> loop_without = loop_worst;
        const std::vector<long> preempted_without = preempted;
        unsigned worst_worker = 0;
        double worst_with = 0, worst_without = 0, worst_lengthening = -1e9;
        double loop_with_max = 0, loop_without_max = 0, loop_lengthening = -1e9;
        for (unsigned w = 0; w < workers; ++w) {
            worst_with = std::max(worst_with, with[w]);
            worst_without = std::max(worst_without, without[w]);
            worst_lengthening = std::max(worst_lengthening, with[w] - without[w]);
            loop_with_max = std::max(loop_with_max, loop_with[w]);
            loop_without_max = std::max(loop_without_max, loop_without[w]);
            if (loop_with[w] - loop_without[w] > loop_lengthening) {
                loop_lengthening = loop_with[w] - loop_without[w];
                worst_worker = w;
            }
        }
        turn_with_ms.push_back(worst_with);
        turn_without_ms.push_back(worst_without);
        lengthening_ms.push_back(worst_lengthening);
        loop_turn_with_ms.push_back(loop_with_max);
        loop_turn_without_ms.push_back(loop_without_max);
        loop_lengthening_ms.push_back(loop_lengthening);
        lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
        to_last_line_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        preempted_with_dump.push_back(preempted_with[worst_worker]);
        preempted_without_dump.push_back(preempted_without[worst_worker]);
        if (!json && loop_lengthening > 1.0)
            std::printf("dump %u: loop turn lengthened %.2f ms (worker %u, preempted %ld times in "
                        "the window with the dump, %ld without)\n",
                        i + 1, loop_lengthening, worst_worker, preempted_with[worst_worker],
                        preempted_without[worst_worker]);
        if (from != From::main) continue; // (the TaskDump stayed in the task)
        took_ms.push_back(std::chrono::duration<double, std::milli>(x.took).count());
        double hold = 0, hold_cpu = 0, cpu_ns = 0, copied = 0;
        for (const WorkerDumpInfo& w : x.workers) {
            const double ms = std::chrono::duration<double, std::milli>(w.pause).count();
            if (ms >= hold) {
                hold = ms;
                hold_cpu = std::chrono::duration<double, std::milli>(w.pause_cpu).count();
            }
            cpu_ns += static_cast<double>(w.snapshot_cpu.count());
            copied += static_cast<double>(w.tasks);
        }
        hold_ms.push_back(hold);
        hold_cpu_ms.push_back(hold_cpu);
        cpu_ns_per_task.push_back(copied > 0 ? cpu_ns / copied : 0.0);
        if (!json && loop_lengthening > 1.0)
            std::printf("dump %u: longest snapshot chunk %.2f ms wall, %.2f ms CPU\n", i + 1, hold,
                        hold_cpu);
    }
    const double bytes_per_task =
        static_cast<double>(heap1 > heap0 ? heap1 - heap0 : 0) / static_cast<double>(tasks);
    if (json) {
        nlohmann::json out;
        out["backend"] = backend_name(backend);
        out["tasks"] = tasks;
        out["workers"] = workers;
        out["task_dump_bookkeeping"] = GALAY_TASK_DUMP != 0;
        out["heap_bytes_per_task"] = bytes_per_task;
        out["to_last_line_ms"] = to_last_line_ms;
        out["from"] = from == From::main ? "main" : from == From::task ? "task" : "task-inline";
        out["low_priority"] = !normal_priority;
        out["caller"] = caller;
        if (from == From::main) { // (measured only there)
            out["task_dump_ms"] = took_ms;
            out["max_loop_hold_ms"] = hold_ms;
            out["max_loop_hold_cpu_ms"] = hold_cpu_ms;
            out["snapshot_cpu_ns_per_task"] = cpu_ns_per_task;
        }
        out["pinned"] = pin;
        out["probe_us"] = probe_us;
        out["probe_gap_with_dump_ms"] = turn_with_ms;
        out["probe_gap_without_dump_ms"] = turn_without_ms;
        out["turn_lengthening_ms"] = lengthening_ms;
        out["loop_turn_with_dump_ms"] = loop_turn_with_ms;
        out["loop_turn_without_dump_ms"] = loop_turn_without_ms;
        out["loop_turn_lengthening_ms"] = loop_lengthening_ms;
        out["worst_worker_preempted_with_dump"] = preempted_with_dump;
        out["worst_worker_preempted_without_dump"] = preempted_without_dump;
        out["lines"] = lines;
        std::printf("%s\n", out.dump().c_str());
    } else {
        std::printf("bench_task_dump: %u tasks on %u workers (%s), bookkeeping %s, %s, dump from "
                    "%s at %s priority\n",
                    tasks, workers, backend_name(backend), GALAY_TASK_DUMP ? "on" : "off",
                    pin ? "pinned" : "not pinned",
                    from == From::main   ? "this thread"
                    : from == From::task ? "a task, formatted off its worker"
                                         : "a task, formatted on its worker",
                    normal_priority ? "normal" : "low");
        if (caller != "default") std::printf("the asking thread: %s\n", caller.c_str());
        std::printf("heap per task (frames included): %.0f bytes\n", bytes_per_task);
        std::printf("dump, request to last line of text: median %.1f ms [%.1f-%.1f], %zu lines\n",
                    median(to_last_line_ms),
                    *std::min_element(to_last_line_ms.begin(), to_last_line_ms.end()),
                    *std::max_element(to_last_line_ms.begin(), to_last_line_ms.end()), lines);
        if (from == From::main) { // (measured only there)
            std::printf("  of which task_dump (snapshots, frames named): median %.1f ms\n",
                        median(took_ms));
            std::printf("longest loop hold by a snapshot chunk: wall median %.2f ms [%.2f-%.2f], "
                        "that chunk's CPU median %.2f ms [%.2f-%.2f]\n",
                        median(hold_ms), spread_min(hold_ms), spread_max(hold_ms),
                        median(hold_cpu_ms), spread_min(hold_cpu_ms), spread_max(hold_cpu_ms));
            std::printf("snapshot CPU per task copied: median %.0f ns [%.0f-%.0f]\n",
                        median(cpu_ns_per_task), spread_min(cpu_ns_per_task),
                        spread_max(cpu_ns_per_task));
        }
        std::printf("longest probe gap (%u us sleeps), any worker: with a dump median %.2f ms "
                    "[%.2f-%.2f], without %.2f ms [%.2f-%.2f]\n",
                    probe_us, median(turn_with_ms), spread_min(turn_with_ms),
                    spread_max(turn_with_ms), median(turn_without_ms), spread_min(turn_without_ms),
                    spread_max(turn_without_ms));
        std::printf("loop turn lengthened by a dump (worst worker, with - without): median %.2f ms "
                    "[%.2f-%.2f]\n",
                    median(lengthening_ms), spread_min(lengthening_ms), spread_max(lengthening_ms));
        std::printf("longest loop turn (the loop's own measure), any worker: with a dump median "
                    "%.2f ms [%.2f-%.2f], without %.2f ms [%.2f-%.2f]\n",
                    median(loop_turn_with_ms), spread_min(loop_turn_with_ms),
                    spread_max(loop_turn_with_ms), median(loop_turn_without_ms),
                    spread_min(loop_turn_without_ms), spread_max(loop_turn_without_ms));
        std::printf("loop turn lengthened by a dump, the loop's own measure (worst worker): "
                    "median %.2f ms [%.2f-%.2f], over 1 ms in %zu of %zu dumps\n",
                    median(loop_lengthening_ms), spread_min(loop_lengthening_ms),
                    spread_max(loop_lengthening_ms),
                    static_cast<std::size_t>(std::count_if(loop_lengthening_ms.begin(),
                                                           loop_lengthening_ms.end(),
                                                           [](double ms) { return ms > 1.0; })),
                    loop_lengthening_ms.size());
        const auto as_doubles = [](const std::vector<long>& v) {
            return std::vector<double>(v.begin(), v.end());
        };
        const std::vector<double> pw = as_doubles(preempted_with_dump);
        const std::vector<double> pwo = as_doubles(preempted_without_dump);
        std::printf(
            "that worker's involuntary context switches: with a dump median %.0f [%.0f-%.0f], "
            "without %.0f [%.0f-%.0f]\n",
            median(pw), spread_min(pw), spread_max(pw), median(pwo), spread_min(pwo),
            spread_max(pwo));
    }
    for (auto& p : probes)
        p->stop.store(true, std::memory_order_relaxed);
    rt->shutdown();
    return tools::kExitOk;
}
