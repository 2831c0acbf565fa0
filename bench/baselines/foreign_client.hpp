// What the PostgreSQL and libcurl comparison clients (raw_pg, pg_threads, curl_multi_loop,
// curl_threads) share: the command line's error and help rules, the clocks of the measured
// window (wall time, and this process's CPU time from getrusage, every thread included), and
// the report: one JSON object with --json, else one human line.
#pragma once

#include "galay_cli.hpp"

#include "galay_cli.hpp"
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace foreign {

/// Parses the command line with the shared parser (galay_cli.hpp): nullopt to go on, else the
/// exit code (0 after --help on stdout; 2 after one line `<tool>: error: <what> (see --help)` on
/// stderr).
inline std::optional<int> parse(cli::App& app, int argc, char** argv, const char* tool) {
    return galay::tools::parse_command_line(app, argc, argv, tool);
}

/// A usage error found after parsing (a combination of flags): one line, exit code 2.
inline int usage_error(const char* tool, const std::string& what) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", tool, what.c_str());
    return 2;
}

inline double wall_s() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// User + system CPU seconds of this process (all its threads) so far.
inline double cpu_s() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/// The clocks and a count at one instant; two of them bound the measured window.
struct Mark {
    double wall = 0, cpu = 0;
    std::uint64_t count = 0;
    static Mark now(std::uint64_t count) { return {wall_s(), cpu_s(), count}; }
};

/// The window's figures under `unit` ("queries", "requests"): count, seconds, rate, client CPU
/// and CPU per unit in microseconds. Nothing divides by zero: a window with no completion has
/// no CPU per unit (null).
inline void put_window(nlohmann::json& j, const char* unit, const Mark& from, const Mark& to) {
    const std::uint64_t n = to.count - from.count;
    const double secs = to.wall - from.wall, cpu = to.cpu - from.cpu;
    j[unit] = n;
    j["seconds"] = secs;
    j[std::string(unit) + "_per_s"] = secs > 0 ? static_cast<double>(n) / secs : 0.0;
    j["client_cpu_s"] = cpu;
    const std::string per =
        std::string("client_cpu_us_per_") + (unit[0] == 'q' ? "query" : "request");
    if (n > 0)
        j[per] = cpu * 1e6 / static_cast<double>(n);
    else
        j[per] = nullptr;
}

/// Prints the report: `j` as one line of JSON, or `human`.
inline void print(const nlohmann::json& j, bool json, const std::string& human) {
    if (json)
        std::printf("%s\n", j.dump().c_str());
    else
        std::printf("%s\n", human.c_str());
    std::fflush(stdout);
}

} // namespace foreign
