// bench_sync as a program: a tiny run on each backend prints one JSON object with our figures and
// the baselines' side by side (Tokio pointed at a missing binary: skipped with a note, exit 0),
// and usage errors exit 2. The binary's path comes from CMake; raw_sync sits next to it.
#include "support/backends.hpp"

#include <nlohmann/json.hpp>

#include <sched.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#ifndef BENCH_SYNC_PATH
#error "BENCH_SYNC_PATH must name the bench_sync binary"
#endif

namespace {

struct ToolRun {
    int exit_code = -1;
    std::string out;
};

ToolRun run_tool(const std::string& args) {
    ToolRun r;
    const std::string cmd = std::string(BENCH_SYNC_PATH) + " " + args + " 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
        r.out.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

/// Two CPUs this process may run on ("0,1"), or the one it has twice.
std::string two_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return "0,0";
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set)) continue;
        if (first < 0) {
            first = c;
            continue;
        }
        return std::to_string(first) + "," + std::to_string(c);
    }
    return std::to_string(first < 0 ? 0 : first) + "," + std::to_string(first < 0 ? 0 : first);
}

} // namespace

class BenchSyncTest : public galay::test::BackendTest {};

TEST_P(BenchSyncTest, TinyRunPrintsEveryFigureSideBySide) {
    const ToolRun r =
        run_tool(std::string("--backend ") + galay::backend_name(GetParam()) +
                 " --rounds 300 --warmup-rounds 30 --messages 20000 --capacity 64" +
                 " --blocking-rounds 200" + " --cpus " + two_cpus() +
                 " --broadcast-messages 3000 --broadcast-receivers 1,4" +
                 " --interval-ticks 40 --interval-period-us 500" + " --tokio /nonexistent --json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["config"]["backend"], galay::backend_name(GetParam()));
    EXPECT_EQ(j["galay"]["pingpong"]["round_trips"], 300);
    EXPECT_GT(j["galay"]["pingpong"]["p50_ns"].get<double>(), 0);
    EXPECT_GE(j["galay"]["pingpong"]["p999_ns"].get<double>(),
              j["galay"]["pingpong"]["p50_ns"].get<double>());
    EXPECT_EQ(j["galay_local"]["pingpong"]["round_trips"], 300);
    ASSERT_EQ(j["galay"]["throughput"].size(), 2u);
    EXPECT_EQ(j["galay"]["throughput"][0]["producers"], 1);
    EXPECT_EQ(j["galay"]["throughput"][1]["producers"], 4);
    EXPECT_EQ(j["galay"]["throughput"][1]["messages"], 20000);
    EXPECT_GT(j["galay"]["throughput"][1]["messages_per_second"].get<double>(), 0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    EXPECT_EQ(j["galay"]["allocations_per_message"]["pingpong"], 0.0);
    EXPECT_EQ(j["galay"]["throughput"][0]["allocations_per_message"], 0.0);
#endif
    // spawn_blocking round trip, ours and the condvar hand-off floor.
    const auto& sb = j["galay"]["spawn_blocking"];
    EXPECT_EQ(sb["round_trips"], 200);
    EXPECT_GT(sb["p50_ns"].get<double>(), 0);
    EXPECT_GE(sb["p99_ns"].get<double>(), sb["p50_ns"].get<double>());
    EXPECT_GT(sb["round_trips_per_second"].get<double>(), 0);
    EXPECT_GE(sb["pool_threads"].get<unsigned>(), 1u);
    EXPECT_TRUE(sb.contains("allocations_per_round_trip"));
    EXPECT_EQ(j["config"]["blocking_rounds"], 200);
    EXPECT_EQ(j["config"]["blocking_cpu"], j["config"]["cpus"][1]); // the pool's CPU by default
    EXPECT_EQ(j["condvar"]["spawn_blocking"]["round_trips"], 200);
    EXPECT_GT(j["condvar"]["spawn_blocking"]["round_trips_per_second"].get<double>(), 0);
    EXPECT_TRUE(j["ratios"]["spawn_blocking_p50_vs_condvar"].is_number());
    EXPECT_TRUE(j["ratios"]["spawn_blocking_rate_vs_condvar"].is_number());
    EXPECT_TRUE(j["ratios"]["spawn_blocking_p50_vs_tokio"].is_null());
    EXPECT_EQ(j["eventfd"]["pingpong"]["round_trips"], 300);
    EXPECT_EQ(j["moodycamel"]["throughput"].size(), 2u);
    EXPECT_TRUE(j["ratios"]["pingpong_p50_vs_eventfd"].is_number());
    EXPECT_TRUE(j["ratios"]["pingpong_p50_vs_tokio"].is_null());
    EXPECT_FALSE(j.contains("tokio"));
    // Broadcast: every placement, every receiver count, nothing lost.
    for (const char* name : {"galay", "galay_runtime", "galay_local"}) {
        const auto& rows = j[name]["broadcast"];
        ASSERT_EQ(rows.size(), 2u) << name;
        EXPECT_EQ(rows[1]["receivers"], 4);
        EXPECT_EQ(rows[1]["messages"], 3000);
        EXPECT_EQ(rows[1]["lost"], 0);
        EXPECT_GT(rows[1]["messages_per_second"].get<double>(), 0);
    }
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    EXPECT_EQ(j["galay"]["broadcast"][0]["allocations_per_message"], 0.0);
#endif
    // Interval lateness, ours and the timerfd loop's.
    EXPECT_EQ(j["galay"]["interval"]["ticks"], 40);
    EXPECT_EQ(j["timerfd"]["interval"]["ticks"], 40);
    EXPECT_GE(j["galay"]["interval"]["p99_ns"].get<double>(),
              j["galay"]["interval"]["p50_ns"].get<double>());
    EXPECT_TRUE(j["ratios"]["interval_p50_ns_vs_timerfd"].is_number());
    ASSERT_FALSE(j["notes"].empty());
    EXPECT_NE(j["notes"].dump().find("tokio: not measured"), std::string::npos);
}

TEST_P(BenchSyncTest, UsageErrorsExitTwo) {
    for (const char* args :
         {"--cpus 0", "--producers 0", "--producers 1,x", "--rounds 0", "--blocking-rounds 0",
          "--blocking-cpu -5", "--capacity 0", "--no-such-flag", "--broadcast-receivers 0",
          "--broadcast-messages 0", "--interval-ticks 0", "--cases nope"})
        EXPECT_EQ(run_tool(args).exit_code, 2) << args;
}

GALAY_INSTANTIATE_BACKENDS(BenchSyncTest);
