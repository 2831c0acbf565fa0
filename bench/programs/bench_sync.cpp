// bench_sync: the cost of galay's cross-thread Channel, Broadcast and Interval, next to their
// baselines, in one run.
//
//   bench_sync [--rounds 100000] [--messages 2000000] [--capacity 1024] [--producers 1,4]
//              [--blocking-rounds 20000] [--blocking-cpu N] [--cpus 0,1]
//              [--backend auto|io_uring|epoll] [--json]
//              [--no-baselines] [--raw-sync PATH] [--tokio PATH] [--raw-timerfd PATH]
//              [--broadcast-receivers 1,4,16] [--broadcast-messages 1000000]
//              [--interval-ticks 2000] [--interval-period-us 1000] [--cases LIST]
//
// Channel shapes, each on two workers (a thread with its own Scheduler) pinned to two CPUs:
// - ping-pong: worker A sends a number over one Channel<u64>, worker B sends it back over another;
//   the round trip is timed one by one (steady clock) into a log-linear histogram: p50, p99,
//   p99.9. Every reply is checked.
// - throughput: 1 and 4 producer tasks on worker A send 1.1 x `--messages` values in total to
//   one consumer task on worker B, which times the last `--messages` (the first tenth warms up);
//   messages/s. Every value is counted and summed, and a wrong count or sum is an error.
// - heap allocations per message once the channels exist (a counting operator new; warm-up
//   excluded), for both shapes.
// - broadcast: one sender task on worker A sends 1.1 x `--broadcast-messages` values on a
//   Broadcast<u64> of `--capacity` slots to 1, 4 and 16 receiver tasks on worker B
//   (`--broadcast-receivers`); every receiver checks it sees every value in order. Messages/s from
//   the first timed send to the last receiver's last value, messages lost (errc::lagged: must be
//   0, a loss fails the run) and heap allocations per message. The sender keeps within the ring
//   (it waits, yielding, for the receivers a window behind), as the Tokio control does.
//   `galay_runtime`: the same tasks spawned on a 2-worker Runtime that places them;
//   `galay_local`: all of them on one worker, which is where Tokio's multi-thread runtime ends up
//   running them (it runs a woken task on the worker that woke it).
// - interval: an Interval of `--interval-period-us` on a worker pinned to the first CPU, ticked
//   `--interval-ticks` times: p50/p99 of each tick's lateness (resumed minus due), against
//   raw_timerfd (bench/baselines), a blocking read loop on a periodic timerfd on the same CPU.
// - invoke (only when `--cases` names it): on one 2-worker Runtime with pinned workers, a task on
//   worker 0 asks worker 1 for a value with `rt.invoke_on(1, fn)` and waits for it, against the
//   Channel ping-pong between a task on each of the same two workers; `--invoke-pairs` alternating
//   pairs (Channel first) of `--rounds` round trips each after a tenth as many warm-up ones; p50
//   per side, the ratio invoke / Channel per pair (median [min-max]) and heap allocations per call.
// - `--cases` picks the cases (default: pingpong,throughput,blocking,broadcast,interval).
// - `galay_local`: the same ping-pong between two tasks of one worker (no thread crossed), the
//   counterpart of Tokio's multi-thread runtime, which keeps such a pair on one worker.
// - spawn_blocking round trip: a task on a worker pinned to the first CPU awaits
//   `galay::spawn_blocking(fn)` with a trivial fn (returns its argument + 1), one at a time,
//   `--blocking-rounds` times after a tenth as many warm-up ones: p50/p99/p99.9 of the round
//   trip, round trips/s over the measured loop, heap allocations per round trip, and how many
//   threads the blocking pool ran. Each pool thread pins itself to `--blocking-cpu` (default: the
//   second CPU of `--cpus`; -1: not pinned) when it first runs the fn, and so do the baselines'
//   pool threads: left to the kernel, a pool thread sometimes shares the caller's CPU and
//   sometimes not, and a cross-CPU wake-up costs ten times a same-CPU switch on a VM, which
//   swamps what is compared.
// Baselines, measured in the same run by running their programs (no galay code in them):
// - `eventfd` and `moodycamel` (bench/baselines/raw_sync.cpp): two plain threads ping-ponging
//   over eventfd (the floor for a cross-thread wake-up), and moodycamel's
//   BlockingConcurrentQueue with a blocking consumer, in the same shapes; `condvar`: a plain
//   thread handing a trivial job to a pool thread over a mutex + condition variable and waiting
//   for the answer on a condition variable (the floor for a blocking-pool hand-off);
// - `tokio` and `tokio_pinned` (bench/control/tokio_sync, built by bench/studies/sync.py when
//   cargo is installed): tokio::sync::mpsc on a 2-worker multi-thread runtime, and on two
//   current-thread runtimes pinned like ours; tokio::task::spawn_blocking awaited from a task of
//   each (the pinned one: a current-thread runtime on the first CPU, bench_sync's shape). When it
//   is not built, one line says so and the run goes on.
// `--json` prints one object with every figure, ours and the baselines' side by side, plus the
// ratios the targets are stated in. Exit 0 on success, 1 on a runtime failure (a lost or wrong
// message, a baseline that failed), 2 on a usage error.
#include "common/tool_support.hpp"
#include "measure/histogram.hpp"

#include <galay/galay.hpp>

#include <nlohmann/json.hpp>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// Counting allocator: every heap allocation of the process bumps the counter. Not under ASan or
// TSan, which own operator new.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define GALAY_BENCH_COUNTS_ALLOCATIONS 1
#include "common/counting_new.hpp"
using galay::tools::g_allocations;
#endif

namespace {

using namespace galay;
using Clock = std::chrono::steady_clock;

std::uint64_t allocations() {
#ifdef GALAY_BENCH_COUNTS_ALLOCATIONS
    return g_allocations.load(std::memory_order_relaxed);
#else
    return 0;
#endif
}

struct Options {
    std::uint64_t rounds = 100'000;
    std::uint64_t warmup_rounds = 10'000;
    std::uint64_t messages = 2'000'000;
    std::size_t capacity = 1024;
    std::vector<unsigned> producers{1, 4};
    std::uint64_t blocking_rounds = 20'000;
    int blocking_cpu = -2; // -2: the second of `cpus`; -1: not pinned
    std::vector<int> cpus{0, 1};
    Backend backend = Backend::automatic;
    bool json = false;
    bool baselines = true;
    std::string raw_sync;
    std::string tokio;
    std::string raw_timerfd;
    std::vector<unsigned> broadcast_receivers{1, 4, 16};
    std::uint64_t broadcast_messages = 1'000'000;
    std::uint64_t interval_ticks = 2000;
    std::uint64_t interval_period_us = 1000;
    std::vector<std::string> cases{"pingpong", "throughput", "blocking", "broadcast", "interval"};
    unsigned invoke_pairs = 5;
    bool has(const char* c) const {
        return std::find(cases.begin(), cases.end(), c) != cases.end();
    }
};

/// Pin the calling thread to `cpu`; false when the CPU is not allowed here.
bool pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/// Runs `task` on a new thread pinned to `cpu`, with a scheduler of its own.
class Worker {
public:
    Worker(int cpu, const SchedulerOptions& opts, Task<void> task)
        : thread_([this, cpu, opts, t = std::move(task)]() mutable {
            if (!pin_to(cpu)) {
                error_ = "cannot pin a worker to CPU " + std::to_string(cpu);
                return;
            }
            try {
                Scheduler s(opts);
                s.block_on(std::move(t));
            } catch (const std::exception& e) {
                error_ = e.what();
            }
        }) {}
    /// Joins; the worker's error, if any.
    std::string join() {
        thread_.join();
        return error_;
    }

private:
    std::string error_;
    std::thread thread_;
};

struct PingPong {
    tools::LatencyHistogram hist;
    std::uint64_t allocations = 0;
    std::uint64_t errors = 0;
};

/// Ping-pong between two workers (the shape the targets are about), or, with `local`, between two
/// tasks of one worker (what Tokio's multi-thread runtime does when it keeps both on one worker).
PingPong galay_pingpong(const Options& o, const SchedulerOptions& so, bool local = false) {
    PingPong out;
    Channel<std::uint64_t> there(o.capacity), back(o.capacity);
    auto pong = [&]() -> Task<void> {
        for (;;) {
            auto v = co_await there.recv();
            if (!v) co_return; // closed: done
            auto sent = co_await back.send(*v);
            if (!sent) co_return;
        }
    };
    auto ping = [&]() -> Task<void> {
        std::uint64_t before = 0;
        for (std::uint64_t i = 0; i < o.warmup_rounds + o.rounds; ++i) {
            if (i == o.warmup_rounds) before = allocations();
            const auto t0 = Clock::now();
            auto sent = co_await there.send(i);
            if (!sent) {
                ++out.errors;
                break;
            }
            auto v = co_await back.recv();
            const auto t1 = Clock::now();
            if (!v || *v != i) {
                ++out.errors;
                break;
            }
            if (i >= o.warmup_rounds)
                out.hist.record(static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
        }
        out.allocations = allocations() - before;
        there.close();
    };
    if (local) {
        auto both = [&]() -> Task<void> { co_await when_all(pong(), ping()); };
        Worker w(o.cpus[0], so, both());
        if (std::string e = w.join(); !e.empty()) {
            std::fprintf(stderr, "bench_sync: %s\n", e.c_str());
            ++out.errors;
        }
        return out;
    }
    Worker b(o.cpus[1], so, pong());
    Worker a(o.cpus[0], so, ping());
    for (const std::string& e : {a.join(), b.join()})
        if (!e.empty()) {
            std::fprintf(stderr, "bench_sync: %s\n", e.c_str());
            ++out.errors;
        }
    return out;
}

/// Channel ping-pong against invoke_on, between the two workers of one Runtime.
struct InvokeVsChannel {
    std::vector<std::uint64_t> channel_p50, invoke_p50;
    std::vector<double> ratios; // invoke / Channel, per pair
    std::uint64_t calls = 0, allocations = 0, errors = 0;
};

Task<void> channel_pong(Channel<std::uint64_t>* there, Channel<std::uint64_t>* back) {
    for (;;) {
        auto v = co_await there->recv();
        if (!v) co_return;
        auto sent = co_await back->send(*v);
        if (!sent) co_return;
    }
}

/// The ping side: the p50 of `warmup + rounds` round trips (the warm-up not recorded).
Task<std::uint64_t> channel_ping(Channel<std::uint64_t>* there, Channel<std::uint64_t>* back,
                                 std::uint64_t warmup, std::uint64_t rounds) {
    tools::LatencyHistogram hist;
    for (std::uint64_t i = 0; i < warmup + rounds; ++i) {
        const auto t0 = Clock::now();
        auto sent = co_await there->send(i);
        auto v = co_await back->recv();
        const auto t1 = Clock::now();
        if (!sent || !v || *v != i) throw std::runtime_error("channel ping-pong: lost a message");
        if (i >= warmup)
            hist.record(static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
    }
    there->close();
    co_return hist.percentile_ns(0.50);
}

/// invoke_on round trips from this worker to worker 1: the p50; heap allocations into `allocs`.
Task<std::uint64_t> invoke_ping(Runtime* rt, std::uint64_t warmup, std::uint64_t rounds,
                                std::uint64_t* allocs) {
    tools::LatencyHistogram hist;
    std::uint64_t before = 0;
    for (std::uint64_t i = 0; i < warmup + rounds; ++i) {
        if (i == warmup) before = allocations();
        const auto t0 = Clock::now();
        const std::uint64_t v = co_await rt->invoke_on(1, [i] { return i; });
        const auto t1 = Clock::now();
        if (v != i) throw std::runtime_error("invoke_on: wrong value");
        if (i >= warmup)
            hist.record(static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
    }
    *allocs = allocations() - before;
    co_return hist.percentile_ns(0.50);
}

InvokeVsChannel galay_invoke(const Options& o, const SchedulerOptions& so) {
    InvokeVsChannel out;
    RuntimeOptions ro;
    ro.workers = 2;
    ro.scheduler = so;
    ro.pin_workers = true;
    Runtime rt(ro);
    const std::uint64_t warmup = std::max<std::uint64_t>(o.rounds / 10, 1);
    try {
        for (unsigned k = 0; k < o.invoke_pairs; ++k) {
            Channel<std::uint64_t> there(o.capacity), back(o.capacity);
            JoinHandle<void> pong = rt.spawn_on(1, channel_pong(&there, &back));
            const std::uint64_t ch =
                rt.spawn_on(0, channel_ping(&there, &back, warmup, o.rounds)).join();
            back.close();
            pong.join();
            std::uint64_t allocs = 0;
            const std::uint64_t inv =
                rt.spawn_on(0, invoke_ping(&rt, warmup, o.rounds, &allocs)).join();
            out.channel_p50.push_back(ch);
            out.invoke_p50.push_back(inv);
            out.ratios.push_back(ch > 0 ? double(inv) / double(ch) : 0.0);
            out.calls += o.rounds;
            out.allocations += allocs;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_sync: invoke: %s\n", e.what());
        ++out.errors;
    }
    return out;
}

/// The median of `v` (sorted here).
template <class T>
T median_of(std::vector<T> v) {
    if (v.empty()) return T{};
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Throughput {
    unsigned producers = 0;
    std::uint64_t messages = 0;
    double seconds = 0;
    std::uint64_t allocations = 0;
    std::uint64_t errors = 0;
    double per_second() const { return seconds > 0 ? double(messages) / seconds : 0; }
};

/// `producers` tasks on worker A send `warmup + measured` values to one consumer on worker B. The
/// consumer times (and counts allocations over) the last `measured`: the first ones warm the
/// workers, the channel and the cross-thread queues up, and setting up the producer tasks (their
/// frames, when_all's bookkeeping) is not per message.
Throughput galay_throughput(const Options& o, const SchedulerOptions& so, unsigned producers) {
    Throughput out;
    out.producers = producers;
    Channel<std::uint64_t> ch(o.capacity);
    std::atomic<bool> consumer_ready{false};
    const std::uint64_t per = (o.messages + o.messages / 10) / producers;
    const std::uint64_t n = per * producers;
    const std::uint64_t mark = n - std::min(o.messages, n); // the consumer starts timing here
    Clock::time_point start, end;
    std::uint64_t alloc_mark = 0, alloc_end = 0;
    auto consumer = [&]() -> Task<void> {
        std::uint64_t sum = 0, count = 0;
        consumer_ready.store(true, std::memory_order_release);
        while (count < n) {
            if (count == mark) {
                alloc_mark = allocations();
                start = Clock::now();
            }
            auto v = co_await ch.recv();
            if (!v) break;
            sum += *v;
            ++count;
        }
        end = Clock::now();
        alloc_end = allocations();
        // Producer p sends p*per .. p*per+per-1: the sum of 0..n-1.
        if (count != n || sum != n * (n - 1) / 2) ++out.errors;
    };
    auto producer = [&](unsigned p) -> Task<void> {
        for (std::uint64_t i = 0; i < per; ++i) {
            auto sent = co_await ch.send(p * per + i);
            if (!sent) {
                ++out.errors;
                co_return;
            }
        }
    };
    auto producers_task = [&]() -> Task<void> {
        while (!consumer_ready.load(std::memory_order_acquire))
            co_await yield_now();
        // A TaskGroup, not when_all: when_all allocates its result vector when the producers
        // finish, which can be inside the consumer's measured window.
        TaskGroup group;
        for (unsigned p = 0; p < producers; ++p)
            group.spawn(producer(p));
        auto done = co_await group.wait();
        if (!done) ++out.errors;
    };
    Worker b(o.cpus[1], so, consumer());
    Worker a(o.cpus[0], so, producers_task());
    for (const std::string& e : {a.join(), b.join()})
        if (!e.empty()) {
            std::fprintf(stderr, "bench_sync: %s\n", e.c_str());
            ++out.errors;
        }
    out.messages = n - mark;
    out.seconds = std::chrono::duration<double>(end - start).count();
    out.allocations = alloc_end - alloc_mark;
    return out;
}

struct BroadcastRun {
    unsigned receivers = 0;
    std::uint64_t messages = 0; // timed messages (each seen by every receiver)
    double seconds = 0;
    std::uint64_t allocations = 0;
    std::uint64_t lost = 0; // messages a receiver missed (errc::lagged)
    std::uint64_t errors = 0;
    double per_second() const { return seconds > 0 ? double(messages) / seconds : 0; }
};

/// One sender task on worker A sends 0, 1, 2, ... on a Broadcast<u64>; `receivers` tasks on
/// worker B each receive every value, in order. Timed from the sender's first timed message
/// (after a tenth as many warm-up ones) to the last receiver's last message. Flow control, the
/// same in the Tokio control: the ring is split in two windows; before starting a window the
/// sender waits (yielding) until every receiver has finished the window before the previous one,
/// so it is never more than the ring ahead of the slowest receiver and nobody lags.
/// Where the broadcast's tasks run: sender on worker A and receivers on worker B (`pinned`); all
/// spawned on a 2-worker galay::Runtime with pinned workers, which places them on the least-loaded
/// worker (`runtime`); or all on one worker (`local`: what Tokio's multi-thread runtime ends up
/// doing, as it runs a woken task on the worker that woke it).
enum class Placement { pinned, runtime, local };

BroadcastRun galay_broadcast(const Options& o, const SchedulerOptions& so, unsigned receivers,
                             Placement where = Placement::pinned) {
    BroadcastRun out;
    out.receivers = receivers;
    const std::uint64_t window = std::max<std::uint64_t>(1, o.capacity / 2);
    const std::uint64_t mark = o.broadcast_messages / 10;
    const std::uint64_t n = mark + o.broadcast_messages;
    Broadcast<std::uint64_t> bus(2 * window);
    std::vector<Broadcast<std::uint64_t>::Receiver> rxs;
    for (unsigned r = 0; r < receivers; ++r)
        rxs.push_back(bus.subscribe());
    struct alignas(64) Progress {
        std::atomic<std::uint64_t> received{0}; // updated at the end of each window
    };
    std::vector<Progress> progress(receivers);
    auto slowest = [&] {
        std::uint64_t m = n;
        for (const Progress& p : progress)
            m = std::min(m, p.received.load(std::memory_order_acquire));
        return m;
    };
    std::atomic<bool> failed{false};
    std::vector<Clock::time_point> ends(receivers);
    Clock::time_point start;
    std::uint64_t alloc_mark = 0;
    std::atomic<std::uint64_t> lost{0}, errors{0};
    auto receiver = [&](Broadcast<std::uint64_t>::Receiver rx, unsigned id) -> Task<void> {
        std::uint64_t next = 0;
        while (next < n) {
            auto v = co_await rx.recv();
            if (!v) {
                if (v.error() == errc::lagged) {
                    lost += rx.missed();
                    next += rx.missed();
                    continue;
                }
                ++errors;
                failed = true;
                co_return;
            }
            if (*v != next) {
                ++errors;
                failed = true;
                co_return;
            }
            if (++next % window == 0) progress[id].received.store(next, std::memory_order_release);
        }
        ends[id] = Clock::now();
    };
    auto receivers_task = [&]() -> Task<void> {
        TaskGroup group;
        for (unsigned r = 0; r < receivers; ++r)
            group.spawn(receiver(std::move(rxs[r]), r));
        auto done = co_await group.wait();
        if (!done) ++errors;
    };
    auto sender = [&]() -> Task<void> {
        for (std::uint64_t i = 0; i < n; ++i) {
            if (i == mark) {
                alloc_mark = allocations();
                start = Clock::now();
            }
            if (i % window == 0 && i >= 2 * window) {
                const std::uint64_t need = (i / window - 1) * window;
                while (slowest() < need) {
                    if (failed.load(std::memory_order_relaxed)) co_return;
                    co_await yield_now();
                }
            }
            auto sent = bus.send(i);
            if (!sent) {
                ++errors;
                co_return;
            }
        }
    };
    if (where == Placement::local) {
        auto both = [&]() -> Task<void> { co_await when_all(receivers_task(), sender()); };
        Worker a(o.cpus[0], so, both());
        if (std::string e = a.join(); !e.empty()) {
            std::fprintf(stderr, "bench_sync: %s\n", e.c_str());
            ++errors;
        }
    } else if (where == Placement::runtime) {
        try {
            Runtime rt({.workers = 2, .scheduler = so, .pin_workers = true});
            std::vector<JoinHandle<void>> handles;
            for (unsigned r = 0; r < receivers; ++r)
                handles.push_back(rt.spawn(receiver(std::move(rxs[r]), r)));
            handles.push_back(rt.spawn(sender()));
            for (auto& h : handles)
                h.join();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_sync: %s\n", e.what());
            ++errors;
        }
    } else {
        Worker b(o.cpus[1], so, receivers_task());
        Worker a(o.cpus[0], so, sender());
        for (const std::string& e : {a.join(), b.join()})
            if (!e.empty()) {
                std::fprintf(stderr, "bench_sync: %s\n", e.c_str());
                ++errors;
            }
    }
    const std::uint64_t alloc_end = allocations();
    Clock::time_point end = start;
    for (const auto& e : ends)
        end = std::max(end, e);
    out.messages = n - mark;
    out.seconds = std::chrono::duration<double>(end - start).count();
    out.allocations = alloc_end - alloc_mark;
    out.lost = lost.load();
    out.errors = errors.load() + out.lost; // a lost message is a failed run of this shape
    return out;
}

/// Tick lateness of an Interval on a worker pinned to the first CPU: each tick's resume time
/// minus the instant it was due, after a twentieth as many warm-up ticks (raw_timerfd measures a
/// periodic timerfd the same way).
struct IntervalRun {
    tools::LatencyHistogram hist;
    std::uint64_t errors = 0;
};

IntervalRun galay_interval(const Options& o, const SchedulerOptions& so) {
    IntervalRun out;
    const std::uint64_t warmup = o.interval_ticks / 20;
    auto ticker = [&]() -> Task<void> {
        Interval every(std::chrono::microseconds(o.interval_period_us));
        for (std::uint64_t i = 0; i < warmup + o.interval_ticks; ++i) {
            auto due = co_await every.tick();
            const auto now = Clock::now();
            if (!due) {
                ++out.errors;
                co_return;
            }
            if (i >= warmup)
                out.hist.record(static_cast<std::uint64_t>(std::max<std::int64_t>(
                    0, std::chrono::duration_cast<std::chrono::nanoseconds>(now - *due).count())));
        }
    };
    Worker a(o.cpus[0], so, ticker());
    if (std::string e = a.join(); !e.empty()) {
        std::fprintf(stderr, "bench_sync: %s\n", e.c_str());
        ++out.errors;
    }
    return out;
}

struct BlockingRoundTrips {
    tools::LatencyHistogram hist;
    double seconds = 0; // the measured loop, timing included
    std::uint64_t allocations = 0;
    unsigned pool_threads = 0;
    std::uint64_t errors = 0;
};

/// Pins the calling thread to `cpu` (unless -1) the first time it is asked to on this thread.
void pin_once(int cpu) {
    thread_local int pinned = -1;
    if (cpu < 0 || pinned == cpu) return;
    pin_to(cpu);
    pinned = cpu;
}

/// A task on a worker pinned to the first CPU awaits spawn_blocking(trivial fn), one at a time.
BlockingRoundTrips galay_spawn_blocking(const Options& o, const SchedulerOptions& so) {
    BlockingRoundTrips out;
    const std::uint64_t warmup = o.blocking_rounds / 10;
    auto caller = [&]() -> Task<void> {
        Clock::time_point start = Clock::now();
        std::uint64_t before = 0;
        for (std::uint64_t i = 0; i < warmup + o.blocking_rounds; ++i) {
            if (i == warmup) {
                before = allocations();
                start = Clock::now();
            }
            const auto t0 = Clock::now();
            auto r = co_await spawn_blocking([i, cpu = o.blocking_cpu] {
                pin_once(cpu);
                return i + 1;
            });
            const auto t1 = Clock::now();
            if (!r || *r != i + 1) {
                ++out.errors;
                break;
            }
            if (i >= warmup)
                out.hist.record(static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
        }
        out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        out.allocations = allocations() - before;
        out.pool_threads = detail::blocking_stats().threads;
    };
    Worker a(o.cpus[0], so, caller());
    if (std::string e = a.join(); !e.empty()) {
        std::fprintf(stderr, "bench_sync: %s\n", e.c_str());
        ++out.errors;
    }
    return out;
}

/// Run a baseline or control program; the JSON object it prints.
std::optional<nlohmann::json> run_program(const std::string& cmd, const char* name) {
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) {
        std::fprintf(stderr, "bench_sync: cannot run %s: %s\n", name, cmd.c_str());
        return std::nullopt;
    }
    std::string out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
        out.append(buf, n);
    const int status = ::pclose(p);
    if (status != 0) {
        std::fprintf(stderr, "bench_sync: %s failed (status %d): %s\n", name, status, cmd.c_str());
        return std::nullopt;
    }
    try {
        return nlohmann::json::parse(out);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_sync: %s printed no JSON object: %s\n", name, e.what());
        return std::nullopt;
    }
}

std::string exe_dir() {
    std::error_code ec;
    auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : p.parent_path().string();
}

std::string join(const std::vector<unsigned>& v) {
    std::string s;
    for (unsigned x : v)
        s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
}

nlohmann::json pingpong_json(const PingPong& p) {
    return {{"round_trips", p.hist.count()},
            {"p50_ns", p.hist.percentile_ns(0.50)},
            {"p99_ns", p.hist.percentile_ns(0.99)},
            {"p999_ns", p.hist.percentile_ns(0.999)},
            {"mean_ns", p.hist.mean_ns()},
            {"min_ns", p.hist.min_ns()},
            {"max_ns", p.hist.max_ns()}};
}

nlohmann::json blocking_json(const BlockingRoundTrips& b) {
    return {{"round_trips", b.hist.count()},
            {"p50_ns", b.hist.percentile_ns(0.50)},
            {"p99_ns", b.hist.percentile_ns(0.99)},
            {"p999_ns", b.hist.percentile_ns(0.999)},
            {"mean_ns", b.hist.mean_ns()},
            {"min_ns", b.hist.min_ns()},
            {"max_ns", b.hist.max_ns()},
            {"round_trips_per_second", b.seconds > 0 ? double(b.hist.count()) / b.seconds : 0.0},
            {"pool_threads", b.pool_threads}};
}

/// a / b of two JSON numbers at `path` in objects a and b, or null.
nlohmann::json ratio(const nlohmann::json& a, const nlohmann::json& b,
                     const nlohmann::json::json_pointer& path) {
    if (!a.is_object() || !b.is_object() || !a.contains(path) || !b.contains(path)) return nullptr;
    const auto& x = a.at(path);
    const auto& y = b.at(path);
    if (!x.is_number() || !y.is_number() || y.get<double>() == 0) return nullptr;
    return x.get<double>() / y.get<double>();
}

void print_text(const nlohmann::json& j) {
    std::printf("bench_sync: Channel<u64> across two workers (CPUs %s), backend %s, capacity %s\n",
                j["config"]["cpus"].dump().c_str(),
                j["config"]["backend"].get<std::string>().c_str(),
                j["config"]["capacity"].dump().c_str());
    std::printf("\n%-14s %12s %12s %12s %14s %14s\n", "ping-pong", "p50 ns", "p99 ns", "p99.9 ns",
                "mean ns", "allocs/msg");
    for (const char* name :
         {"galay", "galay_local", "eventfd", "moodycamel", "tokio", "tokio_pinned"}) {
        if (!j.contains(name) || !j[name].is_object() || !j[name].contains("pingpong")) continue;
        const auto& p = j[name]["pingpong"];
        std::string allocs = "-";
        if (j[name].contains("allocations_per_message") &&
            j[name]["allocations_per_message"].contains("pingpong") &&
            !j[name]["allocations_per_message"]["pingpong"].is_null()) {
            allocs = tools::fixed(j[name]["allocations_per_message"]["pingpong"].get<double>(), 4);
        }
        std::printf("%-14s %12llu %12llu %12llu %14.0f %14s\n", name,
                    static_cast<unsigned long long>(p["p50_ns"].get<std::uint64_t>()),
                    static_cast<unsigned long long>(p["p99_ns"].get<std::uint64_t>()),
                    static_cast<unsigned long long>(p["p999_ns"].get<std::uint64_t>()),
                    p["mean_ns"].get<double>(), allocs.c_str());
    }
    if (j.contains("galay") && j["galay"].contains("invoke")) {
        const auto& iv = j["galay"]["invoke"];
        std::printf("\ninvoke_on round trip vs Channel ping-pong, same two workers (%s pairs of "
                    "%s rounds)\n%-6s %16s %16s %10s\n",
                    iv["pairs"].dump().c_str(), iv["rounds"].dump().c_str(), "pair",
                    "Channel p50 ns", "invoke p50 ns", "ratio");
        for (std::size_t k = 0; k < iv["ratios"].size(); ++k)
            std::printf(
                "%-6zu %16llu %16llu %10.3f\n", k + 1,
                static_cast<unsigned long long>(iv["channel_p50_ns"][k].get<std::uint64_t>()),
                static_cast<unsigned long long>(iv["invoke_p50_ns"][k].get<std::uint64_t>()),
                iv["ratios"][k].get<double>());
        if (iv.contains("ratio_median"))
            std::printf("ratio invoke / Channel: %.3fx [%.3f-%.3f]; allocations per call: %s\n",
                        iv["ratio_median"].get<double>(), iv["ratio_min"].get<double>(),
                        iv["ratio_max"].get<double>(), iv["allocations_per_call"].dump().c_str());
    }
    std::printf("\n%-14s %10s %16s %14s\n", "throughput", "producers", "messages/s", "allocs/msg");
    for (const char* name : {"galay", "moodycamel", "tokio", "tokio_pinned"}) {
        if (!j.contains(name) || !j[name].is_object() || !j[name].contains("throughput")) continue;
        for (const auto& t : j[name]["throughput"]) {
            std::string allocs = "-";
            if (t.contains("allocations_per_message") && !t["allocations_per_message"].is_null()) {
                allocs = tools::fixed(t["allocations_per_message"].get<double>(), 4);
            }
            std::printf("%-14s %10u %16s %14s\n", name, t["producers"].get<unsigned>(),
                        tools::with_commas(
                            static_cast<std::uint64_t>(t["messages_per_second"].get<double>()))
                            .c_str(),
                        allocs.c_str());
        }
    }
    std::printf("\n%-14s %12s %12s %12s %14s %14s\n", "spawn_blocking", "p50 ns", "p99 ns",
                "p99.9 ns", "round trips/s", "allocs/trip");
    for (const char* name : {"galay", "condvar", "tokio", "tokio_pinned"}) {
        if (!j.contains(name) || !j[name].is_object() || !j[name].contains("spawn_blocking"))
            continue;
        const auto& b = j[name]["spawn_blocking"];
        std::string allocs = "-";
        if (b.contains("allocations_per_round_trip") &&
            !b["allocations_per_round_trip"].is_null()) {
            allocs = tools::fixed(b["allocations_per_round_trip"].get<double>(), 4);
        }
        std::printf("%-14s %12llu %12llu %12llu %14s %14s\n", name,
                    static_cast<unsigned long long>(b["p50_ns"].get<std::uint64_t>()),
                    static_cast<unsigned long long>(b["p99_ns"].get<std::uint64_t>()),
                    static_cast<unsigned long long>(b["p999_ns"].get<std::uint64_t>()),
                    tools::with_commas(
                        static_cast<std::uint64_t>(b["round_trips_per_second"].get<double>()))
                        .c_str(),
                    allocs.c_str());
    }
    std::printf("\n%-14s %10s %16s %8s %14s\n", "broadcast", "receivers", "messages/s", "lost",
                "allocs/msg");
    for (const char* name : {"galay", "galay_runtime", "galay_local", "tokio", "tokio_pinned"}) {
        if (!j.contains(name) || !j[name].is_object() || !j[name].contains("broadcast")) continue;
        for (const auto& b : j[name]["broadcast"]) {
            std::string allocs = "-";
            if (b.contains("allocations_per_message") && !b["allocations_per_message"].is_null())
                allocs = tools::fixed(b["allocations_per_message"].get<double>(), 4);
            std::printf("%-14s %10u %16s %8llu %14s\n", name, b["receivers"].get<unsigned>(),
                        tools::with_commas(
                            static_cast<std::uint64_t>(b["messages_per_second"].get<double>()))
                            .c_str(),
                        static_cast<unsigned long long>(b["lost"].get<std::uint64_t>()),
                        allocs.c_str());
        }
    }
    std::printf("\n%-14s %12s %12s %12s %12s\n", "interval", "p50 late ns", "p99 late ns",
                "p99.9 ns", "max ns");
    for (const char* name : {"galay", "timerfd"}) {
        if (!j.contains(name) || !j[name].is_object() || !j[name].contains("interval")) continue;
        const auto& t = j[name]["interval"];
        std::printf("%-14s %12llu %12llu %12llu %12llu\n", name,
                    static_cast<unsigned long long>(t["p50_ns"].get<std::uint64_t>()),
                    static_cast<unsigned long long>(t["p99_ns"].get<std::uint64_t>()),
                    static_cast<unsigned long long>(t["p999_ns"].get<std::uint64_t>()),
                    static_cast<unsigned long long>(t["max_ns"].get<std::uint64_t>()));
    }
    if (j.contains("notes"))
        for (const auto& n : j["notes"])
            std::printf("\nnote: %s", n.get<std::string>().c_str());
    std::printf("\n\nratios (ours / baseline; p50: lower is better, throughput and rate: "
                "higher):\n");
    for (const auto& [k, v] : j["ratios"].items())
        if (!v.is_null()) std::printf("  %-36s %.3f\n", k.c_str(), v.get<double>());
}

/// galay's figures for the channel cases into `ours` (and j["galay_local"]); returns the errors.
std::uint64_t measure_galay_channel(const Options& o, const SchedulerOptions& so, nlohmann::json& j,
                                    nlohmann::json& ours) {
    std::uint64_t errors = 0;
    if (o.has("pingpong")) {
        PingPong pp = galay_pingpong(o, so);
        errors += pp.errors;
        ours["pingpong"] = pingpong_json(pp);
#ifdef GALAY_BENCH_COUNTS_ALLOCATIONS
        // Two messages per round trip.
        ours["allocations_per_message"]["pingpong"] =
            pp.hist.count() ? double(pp.allocations) / double(2 * pp.hist.count()) : 0.0;
#else
        ours["allocations_per_message"]["pingpong"] = nullptr;
#endif
        PingPong local = galay_pingpong(o, so, true);
        errors += local.errors;
        j["galay_local"]["pingpong"] = pingpong_json(local);
    }
    if (o.has("throughput")) {
        ours["throughput"] = nlohmann::json::array();
        for (unsigned p : o.producers) {
            Throughput t = galay_throughput(o, so, p);
            errors += t.errors;
            nlohmann::json tj = {{"producers", p},
                                 {"messages", t.messages},
                                 {"seconds", t.seconds},
                                 {"messages_per_second", t.per_second()}};
#ifdef GALAY_BENCH_COUNTS_ALLOCATIONS
            tj["allocations_per_message"] =
                t.messages ? double(t.allocations) / double(t.messages) : 0.0;
#else
            tj["allocations_per_message"] = nullptr;
#endif
            ours["throughput"].push_back(tj);
        }
    }
    return errors;
}

/// galay's own figures into j["galay"] (and j["galay_local"]); returns the errors counted.
std::uint64_t measure_galay(const Options& o, const SchedulerOptions& so, nlohmann::json& j) {
    nlohmann::json ours = nlohmann::json::object();
#ifndef GALAY_BENCH_COUNTS_ALLOCATIONS
    j["notes"].push_back("allocations are not counted under ASan/TSan");
#endif
    std::uint64_t errors = measure_galay_channel(o, so, j, ours);
    if (o.has("blocking")) {
        BlockingRoundTrips sb = galay_spawn_blocking(o, so);
        errors += sb.errors;
        ours["spawn_blocking"] = blocking_json(sb);
#ifdef GALAY_BENCH_COUNTS_ALLOCATIONS
        ours["spawn_blocking"]["allocations_per_round_trip"] =
            sb.hist.count() ? double(sb.allocations) / double(sb.hist.count()) : 0.0;
#else
        ours["spawn_blocking"]["allocations_per_round_trip"] = nullptr;
#endif
    }
    if (o.has("broadcast")) {
        for (auto [name, where] : {std::pair{"galay_runtime", Placement::runtime},
                                   std::pair{"galay_local", Placement::local}}) {
            nlohmann::json rows = nlohmann::json::array();
            for (unsigned r : o.broadcast_receivers) {
                BroadcastRun b = galay_broadcast(o, so, r, where);
                errors += b.errors;
                rows.push_back({{"receivers", r},
                                {"messages", b.messages},
                                {"seconds", b.seconds},
                                {"messages_per_second", b.per_second()},
                                {"lost", b.lost}});
            }
            j[name]["broadcast"] = rows;
        }
        ours["broadcast"] = nlohmann::json::array();
        for (unsigned r : o.broadcast_receivers) {
            BroadcastRun b = galay_broadcast(o, so, r);
            errors += b.errors;
            nlohmann::json bj = {{"receivers", r},
                                 {"messages", b.messages},
                                 {"seconds", b.seconds},
                                 {"messages_per_second", b.per_second()},
                                 {"lost", b.lost}};
#ifdef GALAY_BENCH_COUNTS_ALLOCATIONS
            bj["allocations_per_message"] =
                b.messages ? double(b.allocations) / double(b.messages) : 0.0;
#else
            bj["allocations_per_message"] = nullptr;
#endif
            ours["broadcast"].push_back(bj);
        }
    }
    if (o.has("invoke")) {
        InvokeVsChannel iv = galay_invoke(o, so);
        errors += iv.errors;
        nlohmann::json ij = {{"pairs", iv.ratios.size()},
                             {"rounds", o.rounds},
                             {"channel_p50_ns", iv.channel_p50},
                             {"invoke_p50_ns", iv.invoke_p50},
                             {"ratios", iv.ratios}};
        if (!iv.ratios.empty()) {
            ij["ratio_median"] = median_of(iv.ratios);
            ij["ratio_min"] = *std::min_element(iv.ratios.begin(), iv.ratios.end());
            ij["ratio_max"] = *std::max_element(iv.ratios.begin(), iv.ratios.end());
        }
#ifdef GALAY_BENCH_COUNTS_ALLOCATIONS
        ij["allocations_per_call"] = iv.calls ? double(iv.allocations) / double(iv.calls) : 0.0;
#else
        ij["allocations_per_call"] = nullptr;
#endif
        ours["invoke"] = ij;
    }
    if (o.has("interval")) {
        IntervalRun iv = galay_interval(o, so);
        errors += iv.errors;
        ours["interval"] = {{"ticks", iv.hist.count()},
                            {"period_us", o.interval_period_us},
                            {"p50_ns", iv.hist.percentile_ns(0.50)},
                            {"p99_ns", iv.hist.percentile_ns(0.99)},
                            {"p999_ns", iv.hist.percentile_ns(0.999)},
                            {"mean_ns", iv.hist.mean_ns()},
                            {"max_ns", iv.hist.max_ns()}};
    }
    if (errors != 0) ours["errors"] = errors;
    j["galay"] = ours;
    return errors;
}

/// With --baselines: raw_sync's baselines and the Tokio control group into j; returns the errors.
std::uint64_t measure_baselines(const Options& o, nlohmann::json& j) {
    std::uint64_t errors = 0;
    if (o.baselines && o.has("interval")) {
        std::ostringstream args;
        args << " --json --ticks " << o.interval_ticks << " --warmup-ticks "
             << o.interval_ticks / 20 << " --period-us " << o.interval_period_us << " --cpu "
             << o.cpus[0];
        const std::string raw = o.raw_timerfd.empty() ? exe_dir() + "/raw_timerfd" : o.raw_timerfd;
        if (auto r = run_program(raw + args.str(), "raw_timerfd"))
            j["timerfd"] = (*r)["timerfd"];
        else
            ++errors;
    }
    if (o.baselines) {
        std::ostringstream args;
        args << " --json --rounds " << o.rounds << " --warmup-rounds " << o.warmup_rounds
             << " --messages " << o.messages << " --capacity " << o.capacity << " --producers "
             << join(o.producers) << " --blocking-rounds " << o.blocking_rounds
             << " --blocking-cpu " << o.blocking_cpu << " --cpus " << o.cpus[0] << "," << o.cpus[1];
        const bool channel_cases = o.has("pingpong") || o.has("throughput") || o.has("blocking");
        const std::string raw = o.raw_sync.empty() ? exe_dir() + "/raw_sync" : o.raw_sync;
        if (channel_cases) {
            if (auto r = run_program(raw + args.str(), "raw_sync")) {
                for (const char* name : {"eventfd", "moodycamel", "condvar"})
                    if (r->contains(name)) j[name] = (*r)[name];
            } else {
                ++errors;
            }
        }
        std::string cases;
        for (const std::string& c : o.cases)
            if (c != "interval" && c != "invoke") cases += (cases.empty() ? "" : ",") + c;
        args << " --broadcast-receivers " << join(o.broadcast_receivers) << " --broadcast-messages "
             << o.broadcast_messages << " --cases " << cases;
        if (cases.empty()) return errors;
        std::string tokio = o.tokio;
#ifdef GALAY_SOURCE_DIR
        if (tokio.empty())
            tokio = std::string(GALAY_SOURCE_DIR) +
                    "/bench/control/tokio_sync/target/release/tokio_sync";
#endif
        if (!tokio.empty() && ::access(tokio.c_str(), X_OK) == 0) {
            if (auto r = run_program(tokio + args.str(), "tokio_sync")) {
                for (const char* name : {"tokio", "tokio_pinned"})
                    if (r->contains(name)) j[name] = (*r)[name];
            } else {
                ++errors;
            }
        } else {
            const std::string note =
                "tokio: not measured, bench/control/tokio_sync is not built (bench/studies/sync.py "
                "builds it with cargo when cargo is installed)";
            j["notes"].push_back(note);
            if (!o.json) std::fprintf(stderr, "bench_sync: %s\n", note.c_str());
        }
    }
    return errors;
}

/// galay's figures over each baseline's, into j["ratios"].
void add_ratios(const Options& o, nlohmann::json& j) {
    namespace jp = nlohmann;
    const auto p50 = jp::json::json_pointer("/pingpong/p50_ns");
    j["ratios"] = {
        {"pingpong_p50_vs_eventfd", ratio(j["galay"], j.value("eventfd", jp::json()), p50)},
        {"pingpong_p50_vs_moodycamel", ratio(j["galay"], j.value("moodycamel", jp::json()), p50)},
        {"pingpong_p50_vs_tokio", ratio(j["galay"], j.value("tokio", jp::json()), p50)},
        {"pingpong_p50_vs_tokio_pinned",
         ratio(j["galay"], j.value("tokio_pinned", jp::json()), p50)},
        {"pingpong_p50_local_vs_tokio", ratio(j["galay_local"], j.value("tokio", jp::json()), p50)},
    };
    const auto sb_p50 = jp::json::json_pointer("/spawn_blocking/p50_ns");
    const auto sb_rate = jp::json::json_pointer("/spawn_blocking/round_trips_per_second");
    for (const char* name : {"condvar", "tokio", "tokio_pinned"}) {
        j["ratios"][std::string("spawn_blocking_p50_vs_") + name] =
            ratio(j["galay"], j.value(name, jp::json()), sb_p50);
        j["ratios"][std::string("spawn_blocking_rate_vs_") + name] =
            ratio(j["galay"], j.value(name, jp::json()), sb_rate);
    }
    for (std::size_t i = 0; i < o.broadcast_receivers.size(); ++i) {
        const auto path =
            jp::json::json_pointer("/broadcast/" + std::to_string(i) + "/messages_per_second");
        const std::string suffix = "_" + std::to_string(o.broadcast_receivers[i]) + "r";
        for (const char* name : {"tokio", "tokio_pinned"})
            j["ratios"]["broadcast" + suffix + "_vs_" + name] =
                ratio(j["galay"], j.value(name, jp::json()), path);
        for (const char* name : {"galay_runtime", "galay_local"})
            j["ratios"]["broadcast" + suffix + "_" + std::string(name).substr(6) + "_vs_tokio"] =
                ratio(j.value(name, jp::json()), j.value("tokio", jp::json()), path);
    }
    for (const char* pct : {"p50_ns", "p99_ns"})
        j["ratios"][std::string("interval_") + pct + "_vs_timerfd"] =
            ratio(j["galay"], j.value("timerfd", jp::json()),
                  jp::json::json_pointer(std::string("/interval/") + pct));
    for (std::size_t i = 0; i < o.producers.size(); ++i) {
        const auto path =
            jp::json::json_pointer("/throughput/" + std::to_string(i) + "/messages_per_second");
        const std::string suffix = "_" + std::to_string(o.producers[i]) + "p";
        for (const char* name : {"moodycamel", "tokio", "tokio_pinned"})
            j["ratios"]["throughput" + suffix + "_vs_" + name] =
                ratio(j["galay"], j.value(name, jp::json()), path);
    }
}

int run(const Options& o) {
    SchedulerOptions so{.backend = o.backend};
    Result<Backend> resolved = resolve_backend(o.backend);
    if (!resolved) {
        std::fprintf(stderr, "bench_sync: %s\n", resolved.error().message().c_str());
        return 1;
    }
    so.backend = *resolved;
    nlohmann::json j;
    j["config"] = {{"rounds", o.rounds},
                   {"warmup_rounds", o.warmup_rounds},
                   {"messages", o.messages},
                   {"capacity", o.capacity},
                   {"producers", o.producers},
                   {"blocking_rounds", o.blocking_rounds},
                   {"blocking_cpu", o.blocking_cpu},
                   {"cpus", o.cpus},
                   {"broadcast_receivers", o.broadcast_receivers},
                   {"broadcast_messages", o.broadcast_messages},
                   {"interval_ticks", o.interval_ticks},
                   {"interval_period_us", o.interval_period_us},
                   {"cases", o.cases},
                   {"backend", backend_name(*resolved)}};
    j["notes"] = nlohmann::json::array();
    std::uint64_t errors = measure_galay(o, so, j);
    errors += measure_baselines(o, j);
    add_ratios(o, j);
    if (errors != 0) j["errors"] = errors;

    if (o.json)
        std::printf("%s\n", j.dump(2).c_str());
    else
        print_text(j);
    if (errors != 0) {
        std::fprintf(stderr, "bench_sync: %llu error(s) (see above): exit code 1\n",
                     static_cast<unsigned long long>(errors));
        return 1;
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    std::string producers = "1,4", cpus = "0,1";
    cli::App app{"bench_sync: galay Channel across two workers and spawn_blocking vs eventfd, "
                 "moodycamel, a condvar pool and Tokio"};
    tools::add_backend_flag(app, &o.backend);
    app.add_option("--rounds", o.rounds, "measured ping-pong round trips")->capture_default_str();
    app.add_option("--warmup-rounds", o.warmup_rounds, "round trips before measuring")
        ->capture_default_str();
    app.add_option("--messages", o.messages, "messages per throughput run")->capture_default_str();
    app.add_option("--capacity", o.capacity, "channel capacity")
        ->capture_default_str()
        ->check(cli::PositiveNumber);
    app.add_option("--producers", producers, "producer counts for the throughput runs")
        ->capture_default_str();
    app.add_option("--blocking-rounds", o.blocking_rounds,
                   "measured spawn_blocking round trips (a tenth as many warm up first)")
        ->capture_default_str();
    app.add_option("--blocking-cpu", o.blocking_cpu,
                   "the CPU blocking-pool threads pin themselves to (default: the second of "
                   "--cpus; -1: not pinned)");
    app.add_option("--cpus", cpus, "the two CPUs the workers are pinned to")->capture_default_str();
    app.add_flag("--json", o.json, "print one JSON object instead of the text report");
    bool no_baselines = false;
    app.add_flag("--no-baselines", no_baselines, "measure galay only");
    app.add_option("--raw-sync", o.raw_sync, "the raw_sync baseline (default: next to bench_sync)");
    app.add_option("--tokio", o.tokio, "the tokio_sync control program");
    app.add_option("--raw-timerfd", o.raw_timerfd,
                   "the raw_timerfd baseline (default: next to bench_sync)");
    std::string receivers = "1,4,16", cases = "pingpong,throughput,blocking,broadcast,interval";
    app.add_option("--broadcast-receivers", receivers, "receiver counts for the broadcast runs")
        ->capture_default_str();
    app.add_option("--broadcast-messages", o.broadcast_messages,
                   "timed messages per broadcast run (a tenth as many warm up first)")
        ->capture_default_str();
    app.add_option("--interval-ticks", o.interval_ticks,
                   "measured interval ticks (a twentieth as many warm up first)")
        ->capture_default_str();
    app.add_option("--interval-period-us", o.interval_period_us, "interval period, microseconds")
        ->capture_default_str();
    app.add_option("--cases", cases,
                   "which cases to run (comma-separated; invoke runs only when named)")
        ->capture_default_str();
    app.add_option("--invoke-pairs", o.invoke_pairs,
                   "invoke: alternating pairs of Channel ping-pong and invoke_on runs")
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "bench_sync")) return *code;
    try {
        auto parse_list = [](const std::string& s, auto& out, const char* what) {
            out.clear();
            std::stringstream ss(s);
            std::string item;
            while (std::getline(ss, item, ',')) {
                std::size_t used = 0;
                long v = -1;
                try {
                    v = std::stol(item, &used);
                } catch (...) {
                }
                if (used != item.size() || v < 0)
                    throw cli::ValidationError(what, "'" + s + "' is not a list of numbers");
                out.push_back(static_cast<std::remove_reference_t<decltype(out[0])>>(v));
            }
        };
        parse_list(producers, o.producers, "--producers");
        parse_list(cpus, o.cpus, "--cpus");
        parse_list(receivers, o.broadcast_receivers, "--broadcast-receivers");
        for (unsigned r : o.broadcast_receivers)
            if (r == 0) throw cli::ValidationError("--broadcast-receivers", "counts must be >= 1");
        o.cases.clear();
        std::stringstream cs(cases);
        for (std::string c; std::getline(cs, c, ',');) {
            static const std::vector<std::string> known{"pingpong",  "throughput", "blocking",
                                                        "broadcast", "interval",   "invoke"};
            if (std::find(known.begin(), known.end(), c) == known.end())
                throw cli::ValidationError("--cases", "unknown case '" + c +
                                                          "' (pingpong, throughput, blocking, "
                                                          "broadcast, interval, invoke)");
            o.cases.push_back(c);
        }
        if (o.broadcast_messages == 0 || o.interval_ticks == 0 || o.interval_period_us == 0)
            throw cli::ValidationError("--broadcast-messages/--interval-ticks/--interval-period-us",
                                       "must be >= 1");
        if (o.invoke_pairs == 0) throw cli::ValidationError("--invoke-pairs", "must be >= 1");
        if (o.cpus.size() != 2) throw cli::ValidationError("--cpus", "needs two CPUs, e.g. 0,1");
        for (unsigned p : o.producers)
            if (p == 0) throw cli::ValidationError("--producers", "counts must be >= 1");
        if (o.rounds == 0 || o.messages == 0 || o.blocking_rounds == 0)
            throw cli::ValidationError("--rounds/--messages/--blocking-rounds", "must be >= 1");
        cpu_set_t allowed;
        if (o.blocking_cpu == -2) o.blocking_cpu = o.cpus[1];
        if (o.blocking_cpu < -1)
            throw cli::ValidationError("--blocking-cpu", "a CPU number, or -1 for not pinned");
        std::vector<int> used = o.cpus;
        if (o.blocking_cpu >= 0) used.push_back(o.blocking_cpu);
        if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
            for (int c : used)
                if (c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed))
                    throw cli::ValidationError("--cpus", "CPU " + std::to_string(c) +
                                                             " is not available to this process");
    } catch (const cli::ParseError& e) {
        return tools::print_exit(tools::usage_error("bench_sync", e.what()));
    }
    o.baselines = !no_baselines;
    return run(o);
}
