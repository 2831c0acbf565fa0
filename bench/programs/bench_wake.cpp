// bench_wake: the cost of waking a sleeping worker from another worker, eventfd against
// IORING_OP_MSG_RING, measured in one run, alternating.
//   bench_wake --pairs 5 --rounds 20000 --pin
//
// A coroutine hops between the two workers of a Runtime (each hop is a Scheduler::post to the
// other worker, which sleeps in the kernel until woken), so one round trip is two cross-thread
// wake-ups. Each run times every round trip (steady clock) and reports the median, p99 and the
// mean, plus the process CPU time per round trip. Runs alternate eventfd / msg_ring (A B A B ...,
// each in a fresh Runtime); the verdict is the median ratio msg_ring / eventfd with its min-max
// spread over the pairs. On epoll both modes are the eventfd (a control).
#include "common/tool_support.hpp"

#include <galay/galay.hpp>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

using namespace galay;
using Clock = std::chrono::steady_clock;

/// Continue on another scheduler (the coroutine itself moves: fine here, it does no I/O).
struct Hop {
    Scheduler* to;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) const { to->post(h); }
    void await_resume() const noexcept {}
};

Task<void> ping_pong(Scheduler* here, Scheduler* there, int warmup, int rounds,
                     std::vector<double>* rtt_us) {
    for (int i = 0; i < warmup; ++i) {
        co_await Hop{there};
        co_await Hop{here};
    }
    rtt_us->reserve(static_cast<std::size_t>(rounds));
    for (int i = 0; i < rounds; ++i) {
        const auto t0 = Clock::now();
        co_await Hop{there};
        co_await Hop{here};
        rtt_us->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    // (ends where it started, on worker 0, which owns the task)
}

double cpu_seconds() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct RunResult {
    double p50 = 0, p99 = 0, mean = 0, cpu_us = 0;
};

double percentile(std::vector<double>& v, double p) {
    const auto k = static_cast<std::size_t>(p * double(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
    return v[k];
}

RunResult run_once(Backend backend, bool msg_ring, bool pin, int warmup, int rounds) {
    RuntimeOptions o;
    o.workers = 2;
    o.pin_workers = pin;
    o.scheduler.backend = backend;
    o.scheduler.msg_ring_wake = msg_ring;
    Runtime rt(o);
    std::vector<double> rtt;
    const double cpu0 = cpu_seconds();
    rt.spawn_on(0, ping_pong(&rt.scheduler(0), &rt.scheduler(1), warmup, rounds, &rtt)).join();
    const double cpu1 = cpu_seconds();
    RunResult r;
    double sum = 0;
    for (double x : rtt)
        sum += x;
    r.mean = sum / double(rtt.size());
    r.cpu_us = (cpu1 - cpu0) * 1e6 / double(rounds + warmup);
    r.p99 = percentile(rtt, 0.99);
    r.p50 = percentile(rtt, 0.50);
    return r;
}

} // namespace

int main(int argc, char** argv) {
    cli::App app{"Cross-worker wake-up: eventfd vs IORING_OP_MSG_RING"};
    tools::PairedRuns runs;
    Backend backend = Backend::io_uring;
    tools::add_paired_run_flags(app, &runs, "alternating eventfd / msg_ring runs",
                                "pin worker 0 and 1 to the first two CPUs");
    tools::add_backend_flag(app, &backend);
    if (auto code = tools::parse_command_line(app, argc, argv, "bench_wake")) return *code;

    nlohmann::json out;
    std::vector<double> ratios_p50, ratios_mean, ratios_cpu;
    try {
        for (int p = 0; p < runs.pairs; ++p) {
            RunResult a = run_once(backend, false, runs.pin, runs.warmup, runs.rounds);
            RunResult b = run_once(backend, true, runs.pin, runs.warmup, runs.rounds);
            ratios_p50.push_back(b.p50 / a.p50);
            ratios_mean.push_back(b.mean / a.mean);
            ratios_cpu.push_back(b.cpu_us / a.cpu_us);
            out["runs"].push_back({{"pair", p},
                                   {"eventfd",
                                    {{"p50_us", a.p50},
                                     {"p99_us", a.p99},
                                     {"mean_us", a.mean},
                                     {"cpu_us", a.cpu_us}}},
                                   {"msg_ring",
                                    {{"p50_us", b.p50},
                                     {"p99_us", b.p99},
                                     {"mean_us", b.mean},
                                     {"cpu_us", b.cpu_us}}}});
            if (!runs.json)
                std::printf("pair %d  round trip p50/p99/mean (us), CPU per round trip (us):  "
                            "eventfd %.2f/%.2f/%.2f cpu %.2f   msg_ring %.2f/%.2f/%.2f cpu "
                            "%.2f\n",
                            p, a.p50, a.p99, a.mean, a.cpu_us, b.p50, b.p99, b.mean, b.cpu_us);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_wake: %s\n", e.what());
        return 1;
    }
    out["backend"] = backend_name(backend);
    out["rounds"] = runs.rounds;
    out["pairs"] = runs.pairs;
    out["ratio_msg_ring_over_eventfd"] = {{"p50", tools::spread_of(ratios_p50)},
                                          {"mean", tools::spread_of(ratios_mean)},
                                          {"cpu", tools::spread_of(ratios_cpu)}};
    if (runs.json) {
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        auto line = [](const char* what, const nlohmann::json& s) {
            std::printf("msg_ring / eventfd, %-28s %.3fx [%.3f-%.3f]\n", what,
                        s["median"].get<double>(), s["min"].get<double>(), s["max"].get<double>());
        };
        line("round-trip p50:", out["ratio_msg_ring_over_eventfd"]["p50"]);
        line("round-trip mean:", out["ratio_msg_ring_over_eventfd"]["mean"]);
        line("CPU per round trip:", out["ratio_msg_ring_over_eventfd"]["cpu"]);
    }
    return 0;
}
