// Runs shell commands as child processes, several at once, each with a time limit, and prints
// what each one wrote as it finishes.
//   ./run_jobs [-j N] [--timeout SECS] [--max-output BYTES] [--backend B] COMMAND...
//   ./run_jobs -j 2 --timeout 5 'make -C a' 'make -C b' 'sleep 100'
// Each COMMAND runs under /bin/sh -c in a process group of its own, with stdin from /dev/null
// and stdout and stderr collected (at most --max-output bytes each, default 1 MiB); at most N
// run at once (default 4). A job ends when its shell does: whatever the shell left running in
// its group (`sleep 100 &`) is then killed, so that nothing outlives run_jobs and a background
// process holding the output pipe cannot keep the job waiting. A shell still running after
// --timeout seconds (default 10), or writing more than the limit, is killed with its whole
// group. For each command, in the order they finish:
//   [2] $ make -C b
//   ...its stdout, then its stderr...
//   [2] exit 0 in 1.93 s          (or: exit 3, signal 9, timed out after 5 s: killed, ...)
// and ", its background processes killed" when the shell left some behind. (A process that
// leaves the group, with setsid say, is beyond the reach of a group kill.)
// Exit code: 0 when every command exited 0, 1 when one did not (or could not start), 2 for a
// bad argument.
#include "galay_cli_backend.hpp"

#include <galay/galay.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

struct Options {
    std::size_t jobs = 4;
    double timeout = 10;
    std::size_t max_output = 1 << 20;
    galay::Backend backend = galay::Backend::automatic;
    std::vector<std::string> commands;
};

/// How one job went.
struct Outcome {
    std::optional<galay::process::ExitStatus> status; // the shell's, once reaped
    bool timed_out = false;                           // the shell still ran at the deadline
    bool too_much = false;                            // it wrote more than --max-output
    bool leftovers = false;                           // its group outlived the shell
    std::string out, err;
    std::string error; // could not run, or could not wait
};

/// Kill every process of the group `pgid` (its leader included, while it is unreaped).
void kill_group(pid_t pgid) {
    (void)::kill(-pgid, SIGKILL);
}

/// Read `from` into `into` until EOF (every writer gone), the deadline or more than `limit`
/// bytes (then the whole group is killed, which ends the other reads too).
galay::Task<void> collect(galay::PipeReader& from, std::string& into, Outcome& o, std::size_t limit,
                          pid_t pgid, std::chrono::steady_clock::time_point deadline) {
    char chunk[16384];
    for (;;) {
        const galay::Result<std::size_t> n =
            co_await from.read(std::span(chunk, sizeof chunk)).deadline(deadline);
        if (!n || *n == 0) co_return; // (a timeout is the watcher's to report)
        if (into.size() + *n > limit) {
            o.too_much = true;
            kill_group(pgid);
            co_return;
        }
        into.append(chunk, *n);
    }
}

/// Wait for the shell until the deadline; then its group goes: killed with it when it is still
/// running, killed after it when it has ended (its background processes).
galay::Task<void> watch(galay::process::Child& shell, Outcome& o,
                        std::chrono::steady_clock::time_point deadline) {
    const pid_t pgid = shell.id();
    galay::Result<galay::process::ExitStatus> st = co_await shell.wait().deadline(deadline);
    if (!st && st.error() == std::errc::timed_out) {
        o.timed_out = true;
        kill_group(pgid); // (the shell is not reaped yet: its pid is still the group's)
        st = co_await shell.wait();
    } else if (st) {
        // The group outlives its leader while a member runs, and its id cannot be reused
        // meanwhile: a signal to it reaches only what the shell left behind.
        o.leftovers = ::kill(-pgid, 0) == 0;
        if (o.leftovers) kill_group(pgid);
    }
    if (st)
        o.status = *st;
    else
        o.error = "wait: " + st.error().message();
}

galay::Task<Outcome> run_one(const std::string& command, const Options& opt) {
    Outcome o;
    galay::process::Command cmd("/bin/sh");
    cmd.arg("-c").arg(command);
    cmd.set_stdin(galay::process::Stdio::null)
        .set_stdout(galay::process::Stdio::piped)
        .set_stderr(galay::process::Stdio::piped)
        .process_group(0);
    auto shell = cmd.spawn();
    if (!shell) {
        o.error = "could not run: " + shell.error().message();
        co_return o;
    }
    const auto deadline = std::chrono::steady_clock::now() + galay::tools::to_duration(opt.timeout);
    const pid_t pgid = shell->id();
    co_await galay::when_all(
        collect(shell->stdout_pipe(), o.out, o, opt.max_output, pgid, deadline),
        collect(shell->stderr_pipe(), o.err, o, opt.max_output, pgid, deadline),
        watch(*shell, o, deadline));
    co_return o;
}

/// What a job's last line says.
std::string verdict(const Outcome& o, const Options& opt, double secs) {
    if (!o.error.empty()) return o.error;
    if (o.timed_out) {
        char text[64];
        std::snprintf(text, sizeof text, "timed out after %g s: killed", opt.timeout);
        return text;
    }
    if (o.too_much) return "wrote more than " + std::to_string(opt.max_output) + " bytes: killed";
    char took[32];
    std::snprintf(took, sizeof took, " in %.2f s", secs);
    return o.status->to_string() + took + (o.leftovers ? ", its background processes killed" : "");
}

void print(std::size_t index, const std::string& command, const Outcome& o,
           const std::string& last) {
    std::printf("[%zu] $ %s\n", index, command.c_str());
    // (What a job that was killed wrote before it is there too: it says how far it got.)
    std::fwrite(o.out.data(), 1, o.out.size(), stdout);
    std::fwrite(o.err.data(), 1, o.err.size(), stdout);
    if (!o.out.empty() && o.out.back() != '\n' && o.err.empty()) std::putchar('\n');
    if (!o.err.empty() && o.err.back() != '\n') std::putchar('\n');
    std::printf("[%zu] %s\n", index, last.c_str());
    std::fflush(stdout);
}

/// Run one command when a slot is free; true when it exited 0.
galay::Task<bool> job(std::size_t index, const Options& opt, galay::Semaphore& slots) {
    const auto got = co_await slots.acquire();
    if (!got) co_return false;
    const std::string& command = opt.commands[index - 1];
    const auto start = std::chrono::steady_clock::now();
    const Outcome o = co_await run_one(command, opt);
    slots.release();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    print(index, command, o, verdict(o, opt, took.count()));
    co_return o.error.empty() && !o.timed_out && !o.too_much && o.status->success();
}

galay::Task<int> run(const Options& opt) {
    galay::Semaphore slots(opt.jobs);
    std::vector<galay::Task<bool>> jobs;
    for (std::size_t i = 1; i <= opt.commands.size(); ++i)
        jobs.push_back(job(i, opt, slots));
    const std::vector<bool> ok = co_await galay::when_all(std::move(jobs));
    std::size_t failed = 0;
    for (const bool b : ok)
        failed += b ? 0 : 1;
    if (failed != 0) std::fprintf(stderr, "run_jobs: %zu of %zu failed\n", failed, ok.size());
    co_return failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    Options opt;
    cli::App app{"Run shell commands, several at once, each with a time limit; print what each "
                 "wrote as it finishes.",
                 "run_jobs"};
    app.add_option("-j", opt.jobs, "how many commands run at once")
        ->check(tools::whole(1, 4096))
        ->capture_default_str();
    app.add_option("--timeout", opt.timeout,
                   "seconds each command may run (then it and its process group are killed)")
        ->check(tools::seconds(0.001, 86400))
        ->capture_default_str();
    app.add_option("--max-output", opt.max_output,
                   "bytes of stdout and of stderr kept per command (more: killed)")
        ->check(tools::whole(1, 1 << 30))
        ->capture_default_str();
    tools::add_backend_flag(app, &opt.backend);
    app.add_option("commands", opt.commands, "shell commands (each run by /bin/sh -c)")->required();
    if (auto code = tools::parse_command_line(app, argc, argv, "run_jobs")) return *code;
    try {
        galay::SchedulerOptions so;
        so.backend = opt.backend;
        return galay::block_on(run(opt), so);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "run_jobs: %s\n", e.what());
        return 1;
    }
}
