// raw_sync: cross-thread hand-offs with no galay code, in bench_sync's shapes; the baselines
// bench_sync runs in the same invocation.
//
//   raw_sync [--rounds 100000] [--warmup-rounds 10000] [--messages 2000000] [--producers 1,4]
//            [--blocking-rounds 20000] [--blocking-cpu N] [--cpus 0,1] [--json]
//
// - eventfd: two plain threads pinned to two CPUs ping-pong a count over two blocking eventfds
//   (write wakes the other thread's read): the floor for waking a thread that sleeps in the
//   kernel. Round trips timed one by one into the same log-linear histogram bench_sync uses.
// - moodycamel: BlockingConcurrentQueue<u64>, the same ping-pong (wait_dequeue on each side), and
//   throughput: 1 and 4 producer threads pinned to the first CPU, one consumer thread on the
//   second doing one blocking wait_dequeue per message and timing the last `--messages` of
//   1.1 x `--messages` (the first tenth warms up). The queue is unbounded (moodycamel has no
//   bounded blocking mode); its consumer spins briefly before it sleeps on a futex.
// - condvar: the floor for a blocking-pool hand-off (bench_sync's spawn_blocking round trip). A
//   plain thread pinned to the first CPU hands a trivial job (return its argument + 1) to a pool
//   thread pinned to `--blocking-cpu` (default the second CPU, -1 not pinned: as bench_sync pins
//   galay's and Tokio's pool threads) through a mutex-protected FIFO
//   and a condition variable, and waits for the answer on a condition variable; one job at a time,
//   `--blocking-rounds` timed after a tenth as many warm-up ones; round trips/s over the measured
//   loop. The job lives on the caller's stack (no allocation).
// Every reply and every received value is checked (count and sum); a mismatch exits 1.
#include "measure/histogram.hpp"

#include "galay_cli.hpp"

#include "galay_cli.hpp"
#include <concurrentqueue/blockingconcurrentqueue.h>
#include <nlohmann/json.hpp>

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using galay::tools::LatencyHistogram;

struct Options {
    std::uint64_t rounds = 100'000;
    std::uint64_t warmup_rounds = 10'000;
    std::uint64_t messages = 2'000'000;
    std::vector<unsigned> producers{1, 4};
    std::uint64_t blocking_rounds = 20'000;
    int blocking_cpu = -2; // -2: the second of `cpus`; -1: not pinned
    int cpus[2] = {0, 1};
    bool json = false;
};

std::atomic<std::uint64_t> g_errors{0};

void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        std::fprintf(stderr, "raw_sync: cannot pin to CPU %d\n", cpu);
        std::exit(2);
    }
}

std::uint64_t ns_since(Clock::time_point t0) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

nlohmann::json pingpong_json(const LatencyHistogram& h) {
    return {{"round_trips", h.count()},
            {"p50_ns", h.percentile_ns(0.50)},
            {"p99_ns", h.percentile_ns(0.99)},
            {"p999_ns", h.percentile_ns(0.999)},
            {"mean_ns", h.mean_ns()},
            {"min_ns", h.min_ns()},
            {"max_ns", h.max_ns()}};
}

void must_write(int fd, std::uint64_t v) {
    if (::write(fd, &v, sizeof v) != sizeof v) {
        std::perror("raw_sync: eventfd write");
        std::exit(1);
    }
}
std::uint64_t must_read(int fd) {
    std::uint64_t v = 0;
    ssize_t n;
    do {
        n = ::read(fd, &v, sizeof v);
    } while (n < 0 && errno == EINTR);
    if (n != sizeof v) {
        std::perror("raw_sync: eventfd read");
        std::exit(1);
    }
    return v;
}

LatencyHistogram eventfd_pingpong(const Options& o) {
    constexpr std::uint64_t kPing = 1, kStop = 2;
    const int to_b = ::eventfd(0, EFD_CLOEXEC), to_a = ::eventfd(0, EFD_CLOEXEC);
    if (to_b < 0 || to_a < 0) {
        std::perror("raw_sync: eventfd");
        std::exit(1);
    }
    LatencyHistogram h;
    std::thread b([&] {
        pin_to(o.cpus[1]);
        while (must_read(to_b) == kPing)
            must_write(to_a, kPing);
    });
    std::thread a([&] {
        pin_to(o.cpus[0]);
        for (std::uint64_t i = 0; i < o.warmup_rounds + o.rounds; ++i) {
            const auto t0 = Clock::now();
            must_write(to_b, kPing);
            if (must_read(to_a) != kPing) ++g_errors;
            const std::uint64_t ns = ns_since(t0);
            if (i >= o.warmup_rounds) h.record(ns);
        }
        must_write(to_b, kStop);
    });
    a.join();
    b.join();
    ::close(to_a);
    ::close(to_b);
    return h;
}

LatencyHistogram moodycamel_pingpong(const Options& o) {
    constexpr std::uint64_t kStop = ~std::uint64_t{0};
    moodycamel::BlockingConcurrentQueue<std::uint64_t> to_b, to_a;
    LatencyHistogram h;
    std::thread b([&] {
        pin_to(o.cpus[1]);
        std::uint64_t v;
        for (;;) {
            to_b.wait_dequeue(v);
            if (v == kStop) return;
            to_a.enqueue(v);
        }
    });
    std::thread a([&] {
        pin_to(o.cpus[0]);
        for (std::uint64_t i = 0; i < o.warmup_rounds + o.rounds; ++i) {
            const auto t0 = Clock::now();
            to_b.enqueue(i);
            std::uint64_t v;
            to_a.wait_dequeue(v);
            const std::uint64_t ns = ns_since(t0);
            if (v != i) ++g_errors;
            if (i >= o.warmup_rounds) h.record(ns);
        }
        to_b.enqueue(kStop);
    });
    a.join();
    b.join();
    return h;
}

/// `producers` threads on the first CPU send 1.1 x `messages` values to one consumer on the
/// second, which times the last `messages` (as bench_sync does). Messages per second.
double moodycamel_throughput(const Options& o, unsigned producers) {
    moodycamel::BlockingConcurrentQueue<std::uint64_t> q;
    const std::uint64_t per = (o.messages + o.messages / 10) / producers, n = per * producers;
    const std::uint64_t mark = n - std::min(o.messages, n);
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    Clock::time_point start, end;
    std::thread consumer([&] {
        pin_to(o.cpus[1]);
        ++ready;
        std::uint64_t sum = 0, v;
        for (std::uint64_t i = 0; i < n; ++i) {
            if (i == mark) start = Clock::now();
            q.wait_dequeue(v);
            sum += v;
        }
        end = Clock::now();
        if (sum != n * (n - 1) / 2) ++g_errors;
    });
    std::vector<std::thread> ps;
    for (unsigned p = 0; p < producers; ++p)
        ps.emplace_back([&, p] {
            pin_to(o.cpus[0]);
            moodycamel::ProducerToken token(q);
            ++ready;
            while (!go.load(std::memory_order_acquire))
                std::this_thread::yield();
            for (std::uint64_t i = 0; i < per; ++i)
                q.enqueue(token, p * per + i);
        });
    while (ready.load() != producers + 1)
        std::this_thread::yield();
    go.store(true, std::memory_order_release);
    for (auto& t : ps)
        t.join();
    consumer.join();
    return double(n - mark) / std::chrono::duration<double>(end - start).count();
}

struct BlockingRoundTrips {
    LatencyHistogram hist;
    double seconds = 0;
};

/// A plain thread hands one trivial job at a time to a pool thread and waits for the answer.
BlockingRoundTrips condvar_blocking(const Options& o) {
    struct Job {
        std::uint64_t in = 0, out = 0;
        bool done = false;
        std::condition_variable done_cv;
        Job* next = nullptr;
    };
    std::mutex m;
    std::condition_variable work_cv;
    Job* head = nullptr;
    Job* tail = nullptr;
    bool stop = false;
    std::thread pool([&] {
        if (o.blocking_cpu >= 0) pin_to(o.blocking_cpu);
        std::unique_lock lk(m);
        for (;;) {
            work_cv.wait(lk, [&] { return stop || head != nullptr; });
            if (head == nullptr) return; // stop, nothing queued
            Job* j = head;
            head = j->next;
            if (head == nullptr) tail = nullptr;
            lk.unlock();
            j->out = j->in + 1;
            lk.lock();
            j->done = true;
            j->done_cv.notify_one(); // under the lock: the job dies once its caller sees done
        }
    });
    BlockingRoundTrips out;
    std::thread caller([&] {
        pin_to(o.cpus[0]);
        const std::uint64_t warmup = o.blocking_rounds / 10;
        Clock::time_point start = Clock::now();
        for (std::uint64_t i = 0; i < warmup + o.blocking_rounds; ++i) {
            if (i == warmup) start = Clock::now();
            const auto t0 = Clock::now();
            Job j;
            j.in = i;
            {
                std::lock_guard lk(m);
                (tail != nullptr ? tail->next : head) = &j;
                tail = &j;
            }
            work_cv.notify_one();
            {
                std::unique_lock lk(m);
                j.done_cv.wait(lk, [&] { return j.done; });
            }
            const std::uint64_t ns = ns_since(t0);
            if (j.out != i + 1) ++g_errors;
            if (i >= warmup) out.hist.record(ns);
        }
        out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    });
    caller.join();
    {
        std::lock_guard lk(m);
        stop = true;
    }
    work_cv.notify_one();
    pool.join();
    return out;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    std::string producers = "1,4", cpus = "0,1";
    std::size_t capacity = 1024; // accepted for bench_sync's command line; moodycamel is unbounded
    cli::App app{"raw_sync: eventfd and moodycamel cross-thread baselines for bench_sync"};
    app.add_option("--rounds", o.rounds)->capture_default_str();
    app.add_option("--warmup-rounds", o.warmup_rounds)->capture_default_str();
    app.add_option("--messages", o.messages)->capture_default_str();
    app.add_option("--capacity", capacity, "ignored (the queue is unbounded)");
    app.add_option("--producers", producers)->capture_default_str();
    app.add_option("--blocking-rounds", o.blocking_rounds)->capture_default_str();
    app.add_option("--blocking-cpu", o.blocking_cpu,
                   "default: the second of --cpus; -1: not pinned");
    app.add_option("--cpus", cpus)->capture_default_str();
    app.add_flag("--json", o.json);
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "raw_sync")) return *code;
    try {
        o.producers.clear();
        std::stringstream ps(producers);
        for (std::string item; std::getline(ps, item, ',');)
            o.producers.push_back(static_cast<unsigned>(std::stoul(item)));
        if (std::sscanf(cpus.c_str(), "%d,%d", &o.cpus[0], &o.cpus[1]) != 2)
            throw cli::ValidationError("--cpus", "needs two CPUs, e.g. 0,1");
        if (o.blocking_cpu == -2) o.blocking_cpu = o.cpus[1];
        for (unsigned p : o.producers)
            if (p == 0) throw cli::ValidationError("--producers", "counts must be >= 1");
    } catch (const cli::ParseError& e) {
        return galay::tools::print_exit(galay::tools::usage_error("raw_sync", e.what()));
    } catch (const std::exception& e) {
        return galay::tools::print_exit(galay::tools::usage_error(
            "raw_sync", "--producers: '" + producers + "' is not a list of numbers"));
    }

    nlohmann::json j;
    j["eventfd"]["pingpong"] = pingpong_json(eventfd_pingpong(o));
    j["moodycamel"]["pingpong"] = pingpong_json(moodycamel_pingpong(o));
    j["moodycamel"]["throughput"] = nlohmann::json::array();
    for (unsigned p : o.producers)
        j["moodycamel"]["throughput"].push_back(
            {{"producers", p},
             {"messages", o.messages},
             {"messages_per_second", moodycamel_throughput(o, p)}});
    {
        const BlockingRoundTrips b = condvar_blocking(o);
        j["condvar"]["spawn_blocking"] = pingpong_json(b.hist);
        j["condvar"]["spawn_blocking"]["round_trips_per_second"] =
            b.seconds > 0 ? double(b.hist.count()) / b.seconds : 0.0;
    }
    if (g_errors != 0) j["errors"] = g_errors.load();
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        for (const char* name : {"eventfd", "moodycamel"}) {
            const auto& p = j[name]["pingpong"];
            std::printf("%-10s ping-pong p50 %llu ns, p99 %llu ns, p99.9 %llu ns\n", name,
                        static_cast<unsigned long long>(p["p50_ns"].get<std::uint64_t>()),
                        static_cast<unsigned long long>(p["p99_ns"].get<std::uint64_t>()),
                        static_cast<unsigned long long>(p["p999_ns"].get<std::uint64_t>()));
        }
        for (const auto& t : j["moodycamel"]["throughput"])
            std::printf("moodycamel %u producer(s): %.0f messages/s\n",
                        t["producers"].get<unsigned>(), t["messages_per_second"].get<double>());
        const auto& b = j["condvar"]["spawn_blocking"];
        std::printf("condvar    blocking hand-off p50 %llu ns, p99 %llu ns, %.0f round trips/s\n",
                    static_cast<unsigned long long>(b["p50_ns"].get<std::uint64_t>()),
                    static_cast<unsigned long long>(b["p99_ns"].get<std::uint64_t>()),
                    b["round_trips_per_second"].get<double>());
    }
    if (g_errors != 0) {
        std::fprintf(stderr, "raw_sync: %llu wrong message(s): exit code 1\n",
                     static_cast<unsigned long long>(g_errors.load()));
        return 1;
    }
    return 0;
}
