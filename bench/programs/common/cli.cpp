#include "common/cli.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace galay::tools {

std::vector<std::string> args_from(int argc, const char* const* argv) {
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i)
        args.emplace_back(argv[i]);
    return args;
}

CliExit usage_error(const std::string& tool, const std::string& what) {
    return {kExitUsage, tool + ": error: " + what + " (see --help)\n"};
}

std::optional<CliExit> parse_args(CLI::App& app, std::vector<std::string> args,
                                  const std::string& tool) {
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
        std::string what = e.what();
        std::replace(what.begin(), what.end(), '\n', ' ');
        return usage_error(tool, what);
    }
    return std::nullopt;
}

int print_exit(const CliExit& e) {
    std::fputs(e.message.c_str(), e.code == kExitOk ? stdout : stderr);
    return e.code;
}

namespace {

/// CLI11 converts a floating-point option through strtold and then narrows it: the validator
/// sees the long double, so that "1e-400" (0 as a double) is seen for what it is.
std::optional<long double> to_number(const std::string& s) {
    long double v = 0;
    if (!CLI::detail::lexical_cast(s, v)) return std::nullopt;
    return v;
}

} // namespace

namespace {

/// nan, inf, and magnitudes a double holds only as a denormal or 0.
std::optional<std::string> not_a_plain_number(long double v) {
    if (std::isnan(v)) return "not a number";
    if (std::isinf(v)) return "infinite";
    if (v != 0 && std::fabs(v) < std::numeric_limits<double>::min())
        return general(double(v)) + " is denormal (or 0 once stored)";
    return std::nullopt;
}

} // namespace

std::optional<std::string> seconds_problem(long double v, double lo, double hi) {
    if (auto p = not_a_plain_number(v)) return p;
    const double d = static_cast<double>(v); // the value the option holds
    if (d < lo || d > hi)
        return general(d) + " is outside " + general(lo) + " .. " + general(hi) + " seconds";
    if (d > 0 && d < 1e-9) return general(d) + " s is below 1 ns (it would be 0)";
    return std::nullopt;
}

CLI::Validator seconds(double lo, double hi) {
    return CLI::Validator(
        [lo, hi](std::string& s) -> std::string {
            auto v = to_number(s);
            if (!v) return "'" + s + "' is not a number of seconds";
            auto problem = seconds_problem(*v, lo, hi);
            return problem ? *problem : std::string();
        },
        "SECONDS in [" + general(lo) + " - " + general(hi) + "]");
}

CLI::Validator finite_range(double lo, double hi) {
    return CLI::Validator(
        [lo, hi](std::string& s) -> std::string {
            auto v = to_number(s);
            if (!v) return "'" + s + "' is not a number";
            if (auto p = not_a_plain_number(*v)) return "'" + s + "' is " + *p;
            const double d = static_cast<double>(*v);
            if (d < lo || d > hi)
                return general(d) + " is outside " + general(lo) + " .. " + general(hi);
            return {};
        },
        "NUMBER in [" + general(lo) + " - " + general(hi) + "]");
}

std::optional<std::uint64_t> checked_mul(std::initializer_list<std::uint64_t> factors) {
    std::uint64_t r = 1;
    for (std::uint64_t f : factors)
        if (__builtin_mul_overflow(r, f, &r)) return std::nullopt;
    return r;
}

std::optional<std::uint64_t> checked_add(std::initializer_list<std::uint64_t> terms) {
    std::uint64_t r = 0;
    for (std::uint64_t t : terms)
        if (__builtin_add_overflow(r, t, &r)) return std::nullopt;
    return r;
}

std::uint64_t memory_limit_bytes() {
    std::uint64_t limit = std::numeric_limits<std::uint64_t>::max();
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        limit = checked_mul({std::uint64_t(pages), std::uint64_t(page)}).value_or(limit);
    for (int res : {RLIMIT_AS, RLIMIT_DATA}) {
        rlimit rl{};
        if (::getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            limit = std::min<std::uint64_t>(limit, rl.rlim_cur);
    }
    return limit;
}

std::optional<CliExit> check_memory(const std::string& tool, std::optional<std::uint64_t> need,
                                    const std::string& what, const std::string& hint) {
    const std::uint64_t limit = memory_limit_bytes();
    if (need && *need <= limit) return std::nullopt;
    const std::string amount = need ? human_bytes(*need) : "more than 16 EiB";
    return CliExit{kExitUsage, tool + ": error: " + what + " needs " + amount +
                                   " of memory but this machine allows " + human_bytes(limit) +
                                   "; lower " + hint + "\n"};
}

} // namespace galay::tools
