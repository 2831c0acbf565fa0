// The command line every program in bin/ shares: CLI11, one exit-code convention, strict numbers.
//
//   Exit codes, the same in every program: 0 success (and --help), 1 runtime failure (I/O error,
//   verification failure, unreachable peer, not enough memory), 2 usage error (a bad flag or
//   value).
//
//   --help prints the usage on stdout and exits 0; a usage error is one line on stderr,
//   `<tool>: error: <flag>: <problem> (see --help)`, exit 2.
//
//   Parsing never prints and never exits: parse_args returns nothing or a CliExit (help text with
//   code 0, one error line with code 2), which `main` prints. That is what lets a fuzz target
//   (fuzz/*_fuzz.cpp) run a program's parser in a loop.
//
//   Numbers are strict everywhere: parse_args gives every integer option that has no validator
//   of ours whole() over its type's range, and every floating-point one finite_range() over all
//   finite values, so `5x`, ` 5`, `0x10`, `010` (CLI11 alone reads it as octal 8), `-1` for a
//   count, 2^64 and `1e999` are refused before CLI11 converts them. An option with a range says
//   so with whole(lo, hi), seconds(lo, hi) or finite_range(lo, hi).
//
//   No galay code here: the baselines link it too.
//
//       CLI::App app{"TCP echo server", "echo_server"};
//       std::uint16_t port = 9000;
//       app.add_option("port", port, "TCP port (0: any free port)")->check(tools::whole(0, 65535));
//       if (auto exit = tools::parse_args(app, tools::args_from(argc, argv), "echo_server"))
//           return tools::print_exit(*exit);
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
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

/// Parse `args` (in command-line order) with `app`, after giving its numeric options the strict
/// validators (see the top of this file). Returns nothing on success; --help gives {0, help
/// text}; every CLI11 error gives a usage error (code 2), an unknown option or extra argument
/// first (it is the likelier mistake when something else is also missing).
std::optional<CliExit> parse_args(CLI::App& app, std::vector<std::string> args,
                                  const std::string& tool);

/// parse_args on argv, printing what it returns: nullopt to go on, else the exit code.
std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv,
                                      const std::string& tool);

/// Print `e` (help on stdout, an error on stderr) and return its exit code.
int print_exit(const CliExit& e);

/// `text` as a whole number in [lo, hi]: decimal digits only (a leading '-' where lo < 0), no
/// spaces, no sign on a non-negative range, no overflow. Nullopt otherwise. For numbers that do
/// not come through CLI11: URL fields, environment variables.
std::optional<long long> parse_whole(std::string_view text, long long lo, long long hi);

/// The problem with `text` as a whole number in [lo, hi], in words, or nullopt when it is fine.
std::optional<std::string> whole_problem(std::string_view text, std::int64_t lo, std::uint64_t hi);
/// whole_problem as a CLI11 validator: `->check(tools::whole(1, 4096))`. It also rewrites the
/// value in plain decimal (`007` becomes `7`) so that CLI11's own conversion cannot read it in
/// another base.
CLI::Validator whole(std::int64_t lo, std::uint64_t hi);

/// The problem with `v` as a number of seconds in [lo, hi], in words, or nullopt when it is fine:
/// not a number, infinite, denormal, outside the range, or above 0 but below 1 ns (it would be
/// 0 ns, which several options read as "no limit").
std::optional<std::string> seconds_problem(long double v, double lo, double hi);
/// seconds_problem as a CLI11 validator: `->check(tools::seconds(0.1, 86400))`. The text must
/// be a plain decimal number (`5`, `0.25`, `1e-3`).
CLI::Validator seconds(double lo, double hi);
/// A finite, normal (or zero) number in [lo, hi], e.g. a percentage, in plain decimal.
CLI::Validator finite_range(double lo, double hi);
/// A value that is not the empty string (a path, a name: '' is never a silent default).
CLI::Validator non_empty();

/// `seconds` (checked by seconds() with an upper bound of at most ~292 years) as a duration;
/// values outside the nanosecond clock's range saturate instead of wrapping.
std::chrono::nanoseconds to_duration(double seconds) noexcept;

} // namespace galay::tools
