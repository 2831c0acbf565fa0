// The shared command line: parse_args, the strict number validators, the exit-code convention.
#include "galay_cli.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace galay::tools {

namespace {

/// `v` as printf's %g: what the messages show of a bound or a value.
std::string general(long double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%Lg", v);
    return buf;
}

std::string in_quotes(std::string_view s) {
    return "'" + std::string(s) + "'";
}

/// `text` as a number in plain decimal notation: an optional '-', digits with at most one '.',
/// at least one digit, an optional exponent. strtold alone also takes leading spaces, '+',
/// hexadecimal, "inf" and "nan"; none of those is a number a user means.
std::optional<long double> plain_decimal(std::string_view text) {
    std::size_t i = 0, digits = 0;
    if (i < text.size() && text[i] == '-') ++i;
    bool dot = false;
    for (; i < text.size(); ++i) {
        const char c = text[i];
        if (c >= '0' && c <= '9') {
            ++digits;
        } else if (c == '.' && !dot) {
            dot = true;
        } else {
            break;
        }
    }
    if (digits == 0) return std::nullopt;
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        ++i;
        if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
        const std::size_t exp_start = i;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9')
            ++i;
        if (i == exp_start) return std::nullopt;
    }
    if (i != text.size()) return std::nullopt;
    // (ERANGE, for an overflow to inf or an underflow to 0 or a denormal, is not looked at:
    // not_a_plain_number and the range checks say what is wrong with the value.)
    const std::string copy(text);
    char* end = nullptr;
    const long double v = std::strtold(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size()) return std::nullopt;
    return v;
}

/// nan, inf, and magnitudes a double holds only as a denormal or 0.
std::optional<std::string> not_a_plain_number(long double v) {
    if (std::isnan(v)) return "not a number";
    if (std::isinf(v) || std::fabs(v) > std::numeric_limits<double>::max())
        return "too large to be a number here";
    if (v != 0 && std::fabs(v) < std::numeric_limits<double>::min())
        return general(v) + " is denormal (or 0 once stored)";
    return std::nullopt;
}

/// Whether CLI11 names `opt`'s type `base` ("INT", "UINT", "FLOAT"), alone or followed by the
/// descriptions of its validators.
bool type_is(const CLI::Option* opt, std::string_view base) {
    const std::string name = opt->get_type_name();
    return name.starts_with(base) &&
           (name.size() == base.size() || name[base.size()] == ':' || name[base.size()] == ' ');
}

constexpr const char* kStrict = "galay-strict"; // the name every validator of ours carries

bool has_strict_validator(CLI::Option* opt) {
    try {
        (void)opt->get_validator(kStrict);
        return true;
    } catch (const CLI::OptionNotFound&) {
        return false;
    }
}

/// Give every numeric option of `app` and its subcommands a strict validator unless it has one.
void harden(CLI::App& app) {
    for (CLI::Option* opt : app.get_options()) {
        if (opt->get_items_expected_max() == 0 || has_strict_validator(opt)) continue;
        if (type_is(opt, "UINT"))
            opt->check(whole(0, std::numeric_limits<std::uint64_t>::max()).get());
        else if (type_is(opt, "INT"))
            opt->check(whole(std::numeric_limits<std::int64_t>::min(),
                             std::numeric_limits<std::int64_t>::max())
                           .get());
        else if (type_is(opt, "FLOAT"))
            opt->check(finite_range(-std::numeric_limits<double>::max(),
                                    std::numeric_limits<double>::max())
                           .get());
    }
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
        harden(*sub);
}

/// The first argument nothing took, as "<arg>: <problem>", or nullopt.
std::optional<std::string> first_extra(const std::vector<std::string>& extras) {
    if (extras.empty()) return std::nullopt;
    const std::string& a = extras.front();
    std::string what = a.starts_with('-') && a.size() > 1 ? a + ": unknown option"
                                                          : in_quotes(a) + ": unexpected argument";
    if (extras.size() > 1)
        what += " (and " + std::to_string(extras.size() - 1) + " more argument" +
                (extras.size() > 2 ? "s" : "") + " nothing takes)";
    return what;
}

} // namespace

std::vector<std::string> args_from(int argc, const char* const* argv) {
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i)
        args.emplace_back(argv[i]);
    return args;
}

CliExit usage_error(const std::string& tool, const std::string& what) {
    return {kExitUsage, tool + ": error: " + what + " (see --help)\n"};
}

std::optional<CliExit> parse_args(cli::App& program, std::vector<std::string> args,
                                  const std::string& tool) {
    CLI::App& app = program.get();
    harden(app);
    std::reverse(args.begin(), args.end()); // CLI11's vector form takes the last argument first
    try {
        app.parse(args);
    } catch (const CLI::CallForHelp&) {
        return CliExit{kExitOk, app.help()};
    } catch (const CLI::CallForAllHelp&) {
        return CliExit{kExitOk, app.help("", CLI::AppFormatMode::All)};
    } catch (const CLI::CallForVersion&) {
        return CliExit{kExitOk, app.version() + "\n"};
    } catch (const CLI::ParseError& e) {
        if (auto extra = first_extra(app.remaining(true))) return usage_error(tool, *extra);
        std::string what = e.what();
        std::replace(what.begin(), what.end(), '\n', ' ');
        return usage_error(tool, what);
    } catch (const cli::ParseError& e) { // thrown by a program's own option callback
        if (auto extra = first_extra(app.remaining(true))) return usage_error(tool, *extra);
        return usage_error(tool, e.what());
    }
    return std::nullopt;
}

std::optional<int> parse_command_line(cli::App& app, int argc, const char* const* argv,
                                      const std::string& tool) {
    if (auto exit = parse_args(app, args_from(argc, argv), tool)) return print_exit(*exit);
    return std::nullopt;
}

int print_exit(const CliExit& e) {
    std::fputs(e.message.c_str(), e.code == kExitOk ? stdout : stderr);
    std::fflush(e.code == kExitOk ? stdout : stderr);
    return e.code;
}

std::optional<std::string> whole_problem(std::string_view text, std::int64_t lo, std::uint64_t hi) {
    const bool negative = text.starts_with('-');
    std::string_view digits = negative ? text.substr(1) : text;
    const bool all_digits =
        !digits.empty() &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    const std::string range = std::to_string(lo) + " .. " + std::to_string(hi);
    if (!all_digits) return in_quotes(text) + " is not a whole number (expected " + range + ")";
    std::uint64_t magnitude = 0;
    const auto ec = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude).ec;
    const bool too_big = ec == std::errc::result_out_of_range;
    if (negative) {
        // -magnitude >= lo, computed without overflow.
        const std::uint64_t floor = lo < 0 ? std::uint64_t(0) - std::uint64_t(lo) : 0;
        if (too_big || (magnitude != 0 && (lo >= 0 || magnitude > floor)))
            return text.size() > 30 ? in_quotes(text.substr(0, 30)) + "... is outside " + range
                                    : in_quotes(text) + " is outside " + range;
        return std::nullopt;
    }
    if (too_big || magnitude > hi || (lo > 0 && magnitude < std::uint64_t(lo)))
        return text.size() > 30 ? in_quotes(text.substr(0, 30)) + "... is outside " + range
                                : in_quotes(text) + " is outside " + range;
    return std::nullopt;
}

std::optional<long long> parse_whole(std::string_view text, long long lo, long long hi) {
    const std::string_view digits = text.starts_with('-') ? text.substr(1) : text;
    if (digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    long long v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || end != text.data() + text.size() || v < lo || v > hi)
        return std::nullopt;
    return v;
}

cli::Validator whole(std::int64_t lo, std::uint64_t hi) {
    return cli::Validator(
        [lo, hi](std::string& s) -> std::string {
            if (auto problem = whole_problem(s, lo, hi)) return *problem;
            // In plain decimal from here: CLI11 converts with base 0 ("010" would be 8).
            if (s.starts_with('-')) {
                long long v = 0;
                std::from_chars(s.data(), s.data() + s.size(), v);
                s = std::to_string(v);
            } else {
                std::uint64_t v = 0;
                std::from_chars(s.data(), s.data() + s.size(), v);
                s = std::to_string(v);
            }
            return {};
        },
        // (A bound that is the type's own is not worth a word in --help.)
        lo == std::numeric_limits<std::int64_t>::min() || (lo == 0 && hi == ~std::uint64_t(0))
            ? std::string()
            : "in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]",
        kStrict);
}

std::optional<std::string> seconds_problem(long double v, double lo, double hi) {
    if (auto p = not_a_plain_number(v)) return p;
    const double d = static_cast<double>(v); // the value the option holds
    if (d < lo || d > hi)
        return general(d) + " is outside " + general(lo) + " .. " + general(hi) + " seconds";
    if (d > 0 && d < 1e-9) return general(d) + " s is below 1 ns (it would be 0)";
    return std::nullopt;
}

cli::Validator seconds(double lo, double hi) {
    return cli::Validator(
        [lo, hi](std::string& s) -> std::string {
            auto v = plain_decimal(s);
            if (!v) return in_quotes(s) + " is not a number of seconds";
            auto problem = seconds_problem(*v, lo, hi);
            return problem ? *problem : std::string();
        },
        "SECONDS in [" + general(lo) + " - " + general(hi) + "]", kStrict);
}

cli::Validator finite_range(double lo, double hi) {
    return cli::Validator(
        [lo, hi](std::string& s) -> std::string {
            auto v = plain_decimal(s);
            if (!v) return in_quotes(s) + " is not a number";
            if (auto p = not_a_plain_number(*v)) return in_quotes(s) + " is " + *p;
            const double d = static_cast<double>(*v);
            if (d < lo || d > hi)
                return general(d) + " is outside " + general(lo) + " .. " + general(hi);
            return {};
        },
        lo == -std::numeric_limits<double>::max()
            ? std::string()
            : "in [" + general(lo) + " - " + general(hi) + "]",
        kStrict);
}

cli::Validator non_empty() {
    return cli::Validator(
        [](std::string& s) -> std::string { return s.empty() ? "must not be empty" : ""; }, "",
        "galay-non-empty");
}

std::chrono::nanoseconds to_duration(double seconds) noexcept {
    using ns = std::chrono::nanoseconds;
    const long double limit = static_cast<long double>(std::numeric_limits<ns::rep>::max()) / 1e9L;
    if (!(seconds > 0)) return ns(0);
    if (seconds >= limit) return ns::max();
    return ns(static_cast<ns::rep>(static_cast<long double>(seconds) * 1e9L));
}

} // namespace galay::tools
