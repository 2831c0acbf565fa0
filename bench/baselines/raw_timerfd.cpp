// raw_timerfd: the floor for a periodic tick with no galay code: a thread pinned to one CPU arms a
// periodic CLOCK_MONOTONIC timerfd and blocks in read(2) on it. Each tick's lateness (the time
// read returned minus the instant the tick was due: first + k * period) goes into the log-linear
// histogram bench_sync uses for galay's Interval, which bench_sync measures the same way and runs
// this program beside.
//
//   raw_timerfd [--ticks 2000] [--warmup-ticks 100] [--period-us 1000] [--cpu 0] [--json]
//
// When read(2) reports more than one expiration (ticks missed), each missed tick counts with
// its own lateness, as an Interval in `burst` mode delivers them. Exit 1 on a system error, 2 on
// a usage error.
#include "measure/histogram.hpp"

#include "galay_cli.hpp"

#include "galay_cli.hpp"
#include <nlohmann/json.hpp>

#include <pthread.h>
#include <sched.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

std::int64_t now_ns() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

timespec to_timespec(std::int64_t ns) {
    return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

int fail(const char* what) {
    std::fprintf(stderr, "raw_timerfd: %s: %s\n", what, std::strerror(errno));
    return 1;
}

} // namespace

int main(int argc, char** argv) {
    std::uint64_t ticks = 2000, warmup = 100, period_us = 1000;
    int cpu = 0;
    bool json = false;
    cli::App app{"raw_timerfd: periodic timerfd tick lateness (bench_sync's interval baseline)"};
    app.add_option("--ticks", ticks, "measured ticks")
        ->capture_default_str()
        ->check(cli::PositiveNumber);
    app.add_option("--warmup-ticks", warmup, "ticks before measuring")->capture_default_str();
    app.add_option("--period-us", period_us, "tick period, microseconds")
        ->capture_default_str()
        ->check(cli::PositiveNumber);
    app.add_option("--cpu", cpu, "the CPU the ticking thread is pinned to")->capture_default_str();
    app.add_flag("--json", json, "print one JSON object");
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "raw_timerfd")) return *code;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        std::fprintf(stderr, "raw_timerfd: error: --cpu: CPU %d is not available (see --help)\n",
                     cpu);
        return 2;
    }
    const int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (fd < 0) return fail("timerfd_create");
    const std::int64_t period = static_cast<std::int64_t>(period_us) * 1000;
    const std::int64_t first = now_ns() + period;
    itimerspec spec{to_timespec(period), to_timespec(first)};
    if (::timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, nullptr) != 0)
        return fail("timerfd_settime");

    galay::tools::LatencyHistogram hist;
    std::uint64_t tick = 0, missed = 0; // tick: the index of the next tick due
    while (tick < warmup + ticks) {
        std::uint64_t expirations = 0;
        if (::read(fd, &expirations, sizeof expirations) != sizeof expirations) {
            if (errno == EINTR) continue;
            return fail("read");
        }
        const std::int64_t now = now_ns();
        if (expirations > 1) missed += expirations - 1;
        for (std::uint64_t i = 0; i < expirations && tick < warmup + ticks; ++i, ++tick) {
            const std::int64_t due = first + static_cast<std::int64_t>(tick) * period;
            if (tick >= warmup) hist.record(static_cast<std::uint64_t>(now > due ? now - due : 0));
        }
    }
    ::close(fd);
    if (json) {
        nlohmann::json j;
        j["timerfd"]["interval"] = {{"ticks", hist.count()},
                                    {"period_us", period_us},
                                    {"missed", missed},
                                    {"p50_ns", hist.percentile_ns(0.50)},
                                    {"p99_ns", hist.percentile_ns(0.99)},
                                    {"p999_ns", hist.percentile_ns(0.999)},
                                    {"mean_ns", hist.mean_ns()},
                                    {"max_ns", hist.max_ns()}};
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("timerfd: %llu ticks of %llu us: lateness p50 %llu ns, p99 %llu ns, max %llu "
                    "ns, %llu missed\n",
                    static_cast<unsigned long long>(hist.count()),
                    static_cast<unsigned long long>(period_us),
                    static_cast<unsigned long long>(hist.percentile_ns(0.50)),
                    static_cast<unsigned long long>(hist.percentile_ns(0.99)),
                    static_cast<unsigned long long>(hist.max_ns()),
                    static_cast<unsigned long long>(missed));
    }
    return 0;
}
