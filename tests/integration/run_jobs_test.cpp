// examples/run_jobs as a process, on every backend: several shell commands at once, each with a
// time limit and an output limit; what it prints for each ending (exit code, timeout, too much
// output); that -j N runs N at once and no more (two commands that meet at a FIFO finish with
// -j 2 and cannot with -j 1); and its bad arguments.
#include "support/backends.hpp"
#include "support/process.hpp"

#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
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
             {{}, "run_jobs: error: commands is required (see --help)\n"},
             {{"-j", "0", "true"}, "run_jobs: error: -j: '0' is outside 1 .. 4096 (see --help)\n"},
             {{"--timeout", "5x", "true"},
              "run_jobs: error: --timeout: '5x' is not a number of seconds (see --help)\n"},
             {{"--timeout", "9223372037", "true"},
              "run_jobs: error: --timeout: 9.22337e+09 is outside 0.001 .. 86400 seconds (see "
              "--help)\n"},
             {{"--max-output", "18446744073709551617", "true"},
              "run_jobs: error: --max-output: '18446744073709551617' is outside 1 .. 1073741824 "
              "(see --help)\n"},
             {{"--frobnicate", "true"},
              "run_jobs: error: --frobnicate: unknown option (see "
              "--help)\n"}}) {
        const ProcessResult r = run_jobs(args);
        EXPECT_EQ(r.exit_code, 2) << says;
        EXPECT_EQ(r.err, says);
        EXPECT_EQ(r.out, "");
    }
    const ProcessResult help = run_process({RUN_JOBS_BIN, "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_TRUE(has(help.out, "run_jobs")) << help.out;
    EXPECT_EQ(help.err, "");
}

namespace {

/// Whether process `pid` is still alive and not on its way out: not a zombie, no SIGKILL pending
/// (a killed process may need a moment to be scheduled and die; its reaper is not us).
bool lives_on(const std::filesystem::path& proc_dir) {
    std::ifstream f(proc_dir / "status");
    std::string line;
    bool alive = false;
    while (std::getline(f, line)) {
        if (line.starts_with("State:"))
            alive = line.find('Z') == std::string::npos && line.find('X') == std::string::npos;
        if (line.starts_with("SigPnd:") || line.starts_with("ShdPnd:")) {
            const unsigned long long pending = std::stoull(line.substr(7), nullptr, 16);
            if (pending & (1ull << (SIGKILL - 1))) return false;
        }
    }
    return alive;
}

/// The live processes whose process group is `pgid` (from /proc/<pid>/stat), as "pid (comm)".
std::vector<std::string> group_members(pid_t pgid) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream f(e.path() / "stat");
        std::string stat;
        if (!std::getline(f, stat)) continue;
        // pid (comm) state ppid pgrp ...: comm may hold spaces and ')', so read after the last.
        const auto close = stat.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 1));
        std::string state;
        long ppid = 0, pgrp = 0;
        rest >> state >> ppid >> pgrp;
        if (pgrp == pgid && lives_on(e.path())) out.push_back(stat.substr(0, close + 1));
    }
    return out;
}

/// The first command's shell printed its pid (`echo $$`, the line after "[1] $ ..."): that is its
/// group's id. Nothing of the group may be left alive.
void expect_group_gone(const ProcessResult& r) {
    const auto nl = r.out.find('\n');
    ASSERT_NE(nl, std::string::npos) << r.out;
    const pid_t pgid = std::stoi(r.out.substr(nl + 1, r.out.find('\n', nl + 1) - nl - 1));
    ASSERT_GT(pgid, 1);
    const std::vector<std::string> left = group_members(pgid);
    EXPECT_TRUE(left.empty()) << left.size() << " left, first: " << left.front();
}

} // namespace

// A shell that starts background processes and exits 0 at once is "exit 0", not "timed out ...
// killed" (its background processes hold the output pipe until they are killed), and none of
// them is left running under PID 1: each job is a process group, the shell's exit ends the job
// and its group is killed.
TEST_P(RunJobsTest, AShellThatExitsAtOnceIsExitZeroAndLeavesNothingBehind) {
    const ProcessResult r = run_jobs({"--timeout", "30", "sleep 100 & sleep 100 & echo $$"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "[1] exit 0 in ")) << r.out;
    EXPECT_FALSE(has(r.out, "timed out")) << r.out;
    expect_group_gone(r);
}

// A timed-out job takes its whole group with it, not only the shell.
TEST_P(RunJobsTest, ATimeoutKillsTheWholeGroup) {
    const ProcessResult r = run_jobs({"--timeout", "0.5", "sleep 100 & sleep 100 & echo $$; wait"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "[1] timed out after 0.5 s: killed")) << r.out;
    EXPECT_FALSE(has(r.out, "[1] exit")) << r.out;
    expect_group_gone(r);
}

GALAY_INSTANTIATE_BACKENDS(RunJobsTest);
