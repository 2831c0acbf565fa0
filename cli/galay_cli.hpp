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
//   CLI11 itself stays behind this header (cli::App, cli::Option, cli::Validator forward to it
//   from galay_cli.cpp): CLI11 is header-only, and compiling it cost every program about 6 s of
//   CPU, most of a build's time for the small ones.
//
//   No galay code here: the baselines link it too.
//
//       cli::App app{"TCP echo server", "echo_server"};
//       std::uint16_t port = 9000;
//       app.add_option("port", port, "TCP port (0: any free port)")->check(tools::whole(0, 65535));
//       if (auto exit = tools::parse_args(app, tools::args_from(argc, argv), "echo_server"))
//           return tools::print_exit(*exit);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
class Option;
class Validator;
} // namespace CLI

namespace galay::tools::cli {

/// A check (and possibly a rewrite) of an option's text: returns "" when the text is fine, else
/// what is wrong with it. `description` is shown in --help; `name` identifies it.
class Validator {
public:
    Validator(std::function<std::string(std::string&)> check, std::string description = {},
              std::string name = {});
    /// CLI11's validator (galay_cli.cpp's side).
    const CLI::Validator& get() const { return *v_; }
    explicit Validator(std::shared_ptr<const CLI::Validator> v)
        : v_(std::move(v)) {}

private:
    std::shared_ptr<const CLI::Validator> v_;
};

/// A number of type T in [lo, hi] (CLI11's Range: int, long, long long, their unsigned forms and
/// double).
template <class T>
Validator Range(T lo, T hi);
/// One of `members`.
Validator IsMember(std::vector<std::string> members);
extern const Validator PositiveNumber;
extern const Validator NonNegativeNumber;
extern const Validator ExistingDirectory;
extern const Validator ExistingFile;

/// A usage error a program finds itself (a value the validators cannot judge alone): parse_args
/// and the programs that check after parsing report it as one line, "name: message".
class ParseError : public std::runtime_error {
public:
    ParseError(const std::string& name, const std::string& message)
        : std::runtime_error(name + ": " + message) {}
    explicit ParseError(const std::string& message)
        : std::runtime_error(message) {}
};
class ValidationError : public ParseError {
public:
    using ParseError::ParseError;
};

/// One option of an App (CLI11's Option); the methods return `this` so that they chain.
class Option {
public:
    explicit Option(CLI::Option* o)
        : o_(o) {}
    Option* check(const Validator& v);
    Option* transform(const Validator& v);
    Option* capture_default_str();
    Option* required(bool value = true);
    Option* excludes(Option* other);
    Option* needs(Option* other);
    Option* expected(int n);
    Option* type_name(std::string name);
    /// "" hides the option from --help.
    Option* group(std::string name);
    Option* default_str(std::string text);
    Option* delimiter(char c);
    Option* take_last();
    /// How many times the option was given.
    std::size_t count() const;
    explicit operator bool() const { return count() > 0; }
    CLI::Option* get() const { return o_; }

private:
    CLI::Option* o_;
};

/// A command line (CLI11's App), or one of its subcommands.
class App {
public:
    explicit App(std::string description = {}, std::string name = {});
    ~App();
    App(const App&) = delete;
    App& operator=(const App&) = delete;

    /// `variable` gets the value; T is a number, bool, std::string or a vector of them (the
    /// types galay_cli.cpp instantiates).
    template <class T>
    Option* add_option(std::string name, T& variable, std::string description = {});
    template <class T>
    Option* add_option_function(std::string name, std::function<void(const T&)> f,
                                std::string description = {});
    Option* add_flag(std::string name, std::string description = {});
    Option* add_flag_callback(std::string name, std::function<void()> f,
                              std::string description = {});
    template <class T>
    Option* add_flag(std::string name, T& variable, std::string description = {});
    App* add_subcommand(std::string name, std::string description = {});
    App* require_subcommand(int n);
    App* require_subcommand(std::size_t min, std::size_t max);
    Option* set_help_flag(std::string name = {}, std::string description = {});
    Option* set_version_flag(std::string name, std::string version);
    /// The width of the option column in --help.
    App* column_width(std::size_t width);
    bool parsed() const;
    /// Whether this (sub)command was on the command line.
    explicit operator bool() const { return parsed(); }
    std::size_t count(std::string option_name) const;
    CLI::App& get() { return *app_; }

private:
    explicit App(CLI::App* subcommand);
    Option* keep(CLI::Option* o);

    std::unique_ptr<CLI::App> owned_;
    CLI::App* app_;
    std::deque<Option> options_;
    std::deque<std::unique_ptr<App>> subcommands_;
};

} // namespace galay::tools::cli

namespace cli = galay::tools::cli;

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
std::optional<CliExit> parse_args(cli::App& app, std::vector<std::string> args,
                                  const std::string& tool);

/// parse_args on argv, printing what it returns: nullopt to go on, else the exit code.
std::optional<int> parse_command_line(cli::App& app, int argc, const char* const* argv,
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
cli::Validator whole(std::int64_t lo, std::uint64_t hi);

/// The problem with `v` as a number of seconds in [lo, hi], in words, or nullopt when it is fine:
/// not a number, infinite, denormal, outside the range, or above 0 but below 1 ns (it would be
/// 0 ns, which several options read as "no limit").
std::optional<std::string> seconds_problem(long double v, double lo, double hi);
/// seconds_problem as a CLI11 validator: `->check(tools::seconds(0.1, 86400))`. The text must
/// be a plain decimal number (`5`, `0.25`, `1e-3`).
cli::Validator seconds(double lo, double hi);
/// A finite, normal (or zero) number in [lo, hi], e.g. a percentage, in plain decimal.
cli::Validator finite_range(double lo, double hi);
/// A value that is not the empty string (a path, a name: '' is never a silent default).
cli::Validator non_empty();

/// `seconds` (checked by seconds() with an upper bound of at most ~292 years) as a duration;
/// values outside the nanosecond clock's range saturate instead of wrapping.
std::chrono::nanoseconds to_duration(double seconds) noexcept;

} // namespace galay::tools
