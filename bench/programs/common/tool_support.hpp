// Small things every benchmark tool needs: a --backend flag, raising the fd limit, reading a
// process's CPU time, waiting for Ctrl-C in a coroutine. (Command lines, exit codes and memory
// checks: common/cli.hpp; signals: common/signals.hpp; numbers, bytes and times:
// measure/format.hpp.)
#pragma once

#include "common/cli.hpp"
#include "common/signals.hpp"
#include "galay_cli_backend.hpp" // add_backend_flag
#include "measure/format.hpp"

#include <galay/runtime.hpp>
#include <galay/task.hpp>

#include "galay_cli.hpp"
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace galay::tools {

/// The command line of a tool that alternates two modes A and B in pairs of runs (bench_wake,
/// bench_asyncfd): --pairs, --rounds (timed round trips per run), --warmup (untimed ones first),
/// --pin (`pin_help` says where each side runs), --json. The fields hold the defaults.
struct PairedRuns {
    int pairs = 5;
    int rounds = 20000;
    int warmup = 2000;
    bool pin = false;
    bool json = false;
};
void add_paired_run_flags(cli::App& app, PairedRuns* runs, const char* pairs_help,
                          const char* pin_help);

/// A ratio's spread over the pairs: {"median", "min", "max"}.
nlohmann::json spread_of(std::vector<double> ratios);

/// Adds `--idle-spin US` (SchedulerOptions::idle_spin in microseconds, 0 = off, at most 10 s) to
/// `app`; `applies_to` ends its help ("the client and the server it starts", say).
void add_idle_spin_flag(cli::App& app, unsigned* us, const char* applies_to);

/// Make sure at least `needed` file descriptors can be open. Raises the soft limit (and the hard
/// limit when privileged). On failure prints what is needed and what is allowed, returns false.
bool ensure_fd_limit(std::uint64_t needed, const char* tool);

/// Raise the soft fd limit to the hard limit, quietly (servers: accept reports EMFILE itself).
void raise_fd_limit_to_max();

/// Start `sched` on `backend`. When it cannot start (io_uring missing or refused, say), print
/// "<tool>: <why>" and return false: the tool then exits 1.
bool start_scheduler(std::optional<Scheduler>& sched, Backend backend, const char* tool);

/// "<tool>: N error(s) (see above): exit code 1" on stderr, for a run that counted errors.
void print_error_count(const char* tool, std::uint64_t errors);

/// utime+stime of process `pid` in seconds (from /proc/<pid>/stat), or nullopt.
std::optional<double> process_cpu_seconds(int pid);

/// Completes when SIGINT/SIGTERM asks the tool to stop (install_stop_handlers must have run);
/// cancellable, e.g. the loser of a when_any. Returns the signal (0 when cancelled).
Task<int> wait_for_stop_signal();

/// Resident set size of `pid` in bytes (VmRSS), or nullopt.
std::optional<std::uint64_t> process_rss_bytes(int pid);

} // namespace galay::tools
