// What every tool's command line shares (no galay code here: aio_bench uses it too).
//
//   Exit codes, the same in every tool: 0 success, 1 runtime failure (I/O error, verification
//   failure, unreachable peer, not enough memory), 2 usage error (a bad flag or value).
//
//   Parsing never prints and never exits: a tool's `parse_*_args(args)` returns its options or a
//   CliExit (help text with code 0, one error line with code 2), which `main` prints. That is
//   what lets a fuzz target (fuzz/*_fuzz.cpp) run every tool's parser in a loop.
//
//   Seconds and other floating-point values go through one validator that refuses nan, inf,
//   denormals and values that would be 0 ns once converted (so a limit never silently becomes
//   "no limit").
//
//   Memory a run needs is multiplied with overflow checks (checked_mul) and compared with what
//   the machine has (memory_limit_bytes) before anything is allocated.
#pragma once

#include "measure/format.hpp" // human_bytes, and every other number format

#include <CLI/CLI.hpp>

#include <cstdint>
#include <expected>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace galay::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

/// Why a parse produced no options: --help (code 0, `message` is the help text for stdout) or a
/// usage error (code 2, `message` is one line for stderr, ending in a newline).
struct CliExit {
    int code = kExitUsage;
    std::string message;
};

template <class T>
using CliResult = std::expected<T, CliExit>;

/// argv[1], ..., argv[argc - 1].
std::vector<std::string> args_from(int argc, const char* const* argv);

/// A usage error of `tool`: "tool: error: what (see --help)\n", code 2.
CliExit usage_error(const std::string& tool, const std::string& what);

/// Parse `args` (in command-line order) with `app`. Returns nothing on success; --help gives
/// {0, help text}; every CLI11 error (its codes 104-114) gives a usage error (code 2).
std::optional<CliExit> parse_args(CLI::App& app, std::vector<std::string> args,
                                  const std::string& tool);

/// Print `e` (help on stdout, an error on stderr) and return its exit code.
int print_exit(const CliExit& e);

/// The problem with `v` as a number of seconds in [lo, hi], in words, or nullopt when it is fine:
/// not a number, infinite, denormal, outside the range, or above 0 but below 1 ns (it would be
/// 0 ns, which several options read as "no limit").
std::optional<std::string> seconds_problem(long double v, double lo, double hi);
/// seconds_problem as a CLI11 validator: `->check(tools::seconds(0.1, 86400))`.
CLI::Validator seconds(double lo, double hi);
/// A finite, normal (or zero) number in [lo, hi], e.g. a percentage.
CLI::Validator finite_range(double lo, double hi);

/// The product of `factors`, or nullopt when it does not fit in 64 bits.
std::optional<std::uint64_t> checked_mul(std::initializer_list<std::uint64_t> factors);
/// The sum, or nullopt on overflow.
std::optional<std::uint64_t> checked_add(std::initializer_list<std::uint64_t> terms);

/// The memory a run may plan to use: physical RAM, or RLIMIT_AS / RLIMIT_DATA when lower.
std::uint64_t memory_limit_bytes();

/// Nullopt when `need` bytes (nullopt: more than 2^64) fit in memory_limit_bytes(); otherwise
/// the usage error "<tool>: error: <what> needs N of memory but this machine has M; lower <hint>".
std::optional<CliExit> check_memory(const std::string& tool, std::optional<std::uint64_t> need,
                                    const std::string& what, const std::string& hint);

} // namespace galay::tools
