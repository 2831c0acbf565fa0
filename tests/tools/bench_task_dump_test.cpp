// bench_task_dump as a program: a tiny run on each backend prints one JSON object with a figure
// per dump (time to the last line, the loop hold, the probe's longest gap with and without a
// dump, and the loop's own longest turn with and without), pinned and not; --churn times each of
// its state changes; usage errors exit 2. The binary's path comes from CMake.
#include "support/backends.hpp"
#include "support/process.hpp"

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#ifndef BENCH_TASK_DUMP_PATH
#error "BENCH_TASK_DUMP_PATH must name the bench_task_dump binary"
#endif

namespace {

/// The program with `args` split at spaces.
galay::test::ProcessResult run_tool(const std::string& args) {
    std::vector<std::string> argv{BENCH_TASK_DUMP_PATH};
    std::istringstream words(args);
    for (std::string w; words >> w;)
        argv.push_back(w);
    return galay::test::run_process(argv);
}

} // namespace

class BenchTaskDumpTest : public galay::test::BackendTest {};

TEST_P(BenchTaskDumpTest, TinyRunPrintsEveryFigurePerDump) {
    for (const char* placement : {"--workers 2", "--workers 1 --pin"}) {
        const auto r = run_tool(std::string("--backend ") + galay::backend_name(GetParam()) +
                                " --tasks 300 --dumps 3 --json " + placement);
        ASSERT_EQ(r.exit_code, 0) << placement << ": " << r.out;
        const auto j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j["backend"], galay::backend_name(GetParam()));
        EXPECT_EQ(j["tasks"], 300);
        EXPECT_EQ(j["pinned"], std::string(placement).find("--pin") != std::string::npos);
        // 300 tasks, two spawn sites: the text names two shared stacks, one line per task and
        // one per wait, plus the header lines.
        EXPECT_GE(j["lines"].get<int>(), 600) << r.out;
        for (const char* series :
             {"to_last_line_ms", "task_dump_ms", "max_loop_hold_ms", "probe_gap_with_dump_ms",
              "probe_gap_without_dump_ms", "turn_lengthening_ms", "loop_turn_with_dump_ms",
              "loop_turn_without_dump_ms", "loop_turn_lengthening_ms"}) {
            ASSERT_EQ(j[series].size(), 3u) << series;
        }
        for (std::size_t i = 0; i < 3; ++i) {
            EXPECT_GT(j["to_last_line_ms"][i].get<double>(), 0);
            // The probe sleeps 100 us between resumes: any gap it saw is at least that.
            EXPECT_GE(j["probe_gap_with_dump_ms"][i].get<double>(), 0.1);
            EXPECT_GE(j["probe_gap_without_dump_ms"][i].get<double>(), 0.1);
            // Each window has the probe's 20 resumes, each ending a turn the loop measured.
            if (j["task_dump_bookkeeping"].get<bool>()) {
                EXPECT_GT(j["loop_turn_with_dump_ms"][i].get<double>(), 0);
                EXPECT_GT(j["loop_turn_without_dump_ms"][i].get<double>(), 0);
            }
        }
    }
}

TEST_P(BenchTaskDumpTest, ChurnTimesEachStateChangeAlone) {
    const auto r = run_tool(std::string("--backend ") + galay::backend_name(GetParam()) +
                            " --churn 500 --dumps 2 --json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["backend"], galay::backend_name(GetParam()));
    EXPECT_EQ(j["rounds"], 500);
    for (const char* series : {"channel_round_trip_ns", "await_chain_of_3_ns",
                               "sleep_due_at_once_ns", "yield_now_turn_ns"}) {
        ASSERT_EQ(j[series].size(), 2u) << series;
        for (const auto& ns : j[series])
            EXPECT_GT(ns.get<double>(), 0) << series;
    }
}

TEST_P(BenchTaskDumpTest, UsageErrorsExitTwo) {
    for (const char* args : {"--tasks 0", "--workers 0", "--dumps 0", "--probe-us 5",
                             "--probe-us x", "--no-such-flag", "--churn 0", "--caller rt"})
        EXPECT_EQ(run_tool(args).exit_code, 2) << args;
}

GALAY_INSTANTIATE_BACKENDS(BenchTaskDumpTest);
