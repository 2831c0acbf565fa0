// examples/run_jobs as a process, on every backend: several shell commands at once, each with a
// time limit and an output limit; what it prints for each ending (exit code, timeout, too much
// output); that -j N runs N at once and no more (two commands that meet at a FIFO finish with
// -j 2 and cannot with -j 1); and its bad arguments.
#include "support/backends.hpp"
#include "support/process.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace galay;
using namespace galay::test;

namespace {

class RunJobsTest : public BackendTest {
protected:
    ProcessResult run_jobs(std::vector<std::string> args) const {
        args.insert(args.begin(), {RUN_JOBS_BIN, "--backend", backend_name(GetParam())});
        return run_process(std::move(args), std::chrono::seconds(60));
    }
};

bool has(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

} // namespace

TEST_P(RunJobsTest, ReportsEachCommandsOutputAndHowItEnded) {
    const ProcessResult r = run_jobs({"-j", "5", "--timeout", "1", "--max-output", "1000",
                                      "echo one", "echo two >&2; exit 3", "exec sleep 1000",
                                      "exec yes", "exec /nonexistent/program"});
    EXPECT_TRUE(r.exited);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "[1] $ echo one\none\n[1] exit 0 in ")) << r.out;
    EXPECT_TRUE(has(r.out, "[2] $ echo two >&2; exit 3\ntwo\n[2] exit 3 in ")) << r.out;
    EXPECT_TRUE(has(r.out, "[3] timed out after 1 s: killed")) << r.out;
    EXPECT_TRUE(has(r.out, "[4] wrote more than 1000 bytes: killed")) << r.out;
    EXPECT_TRUE(has(r.out, "[5] exit 127 in ")) << r.out; // sh: not found
    EXPECT_TRUE(has(r.err, "run_jobs: 4 of 5 failed")) << r.err;
}

TEST_P(RunJobsTest, RunsNAtOnceAndNoMore) {
    const auto dir =
        std::filesystem::temp_directory_path() /
        ("galay-run-jobs-" + std::to_string(::getpid()) + "-" + backend_name(GetParam()));
    std::filesystem::create_directories(dir);
    const std::string fifo = (dir / "meet").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // Opening a FIFO waits for the other end: each command finishes only if the other runs.
    // `exec`: the shell becomes cat, so the kill at the time limit ends cat, not only its shell.
    const std::string writer = "echo met > " + fifo, reader = "exec cat " + fifo;
    const ProcessResult both = run_jobs({"-j", "2", "--timeout", "30", writer, reader});
    EXPECT_EQ(both.exit_code, 0) << both.out << both.err;
    EXPECT_TRUE(has(both.out, "$ " + reader + "\nmet\n")) << both.out;
    const ProcessResult one = run_jobs({"-j", "1", "--timeout", "1", writer, reader});
    EXPECT_EQ(one.exit_code, 1) << one.out << one.err;
    EXPECT_TRUE(has(one.out, "[1] timed out after 1 s: killed")) << one.out;
    std::filesystem::remove_all(dir);
}

TEST_P(RunJobsTest, BadArgumentsAreClearErrors) {
    for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{}, "no COMMAND to run"},
             {{"-j", "0", "true"}, "-j: a whole number"},
             {{"--timeout"}, "--timeout needs a value"},
             {{"--frobnicate", "true"}, "unknown option '--frobnicate'"}}) {
        const ProcessResult r = run_jobs(args);
        EXPECT_EQ(r.exit_code, 2) << says;
        EXPECT_TRUE(has(r.err, says)) << r.err;
        EXPECT_TRUE(has(r.err, "usage: run_jobs")) << r.err;
    }
}

GALAY_INSTANTIATE_BACKENDS(RunJobsTest);
