// raw_spawn: the floor for spawning children, which galay's process::Command (bench_local spawn)
// and Tokio's process::Command (bench/control/tokio_spawn) are measured against.
//
//   raw_spawn PROGRAM SECS [CONCURRENCY]
//       posix_spawn(PROGRAM) and waitpid, CONCURRENCY children at a time (default 1), for SECS
//       seconds; every child must exit 0. Prints one JSON object:
//       {"spawns", "secs", "per_sec", "cpu_us_per_spawn"}
//
// No galay code: it is the yardstick (no pipes, no pidfd, stdio inherited, as the others run it).
#include "galay_cli.hpp"
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern char** environ;

namespace {

double cpu_s() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string program;
    double secs = 0;
    long conc = 1;
    cli::App app{"Spawn PROGRAM with posix_spawn and reap it, again and again, for SECS seconds "
                 "(the baseline for bench_local spawn).",
                 "raw_spawn"};
    app.add_option("PROGRAM", program, "the program to run (no arguments)")
        ->required()
        ->check(tools::non_empty());
    app.add_option("SECS", secs, "seconds to run")->required()->check(tools::seconds(0.001, 86400));
    app.add_option("CONCURRENCY", conc, "children running at once")
        ->check(tools::whole(1, 4096))
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "raw_spawn")) return *code;
    char* child_argv[] = {program.data(), nullptr};
    const auto start = std::chrono::steady_clock::now();
    const auto until = start + std::chrono::duration<double>(secs);
    const double c0 = cpu_s();
    unsigned long spawns = 0;
    long running = 0;
    auto spawn_one = [&] {
        pid_t pid = 0;
        const int rc = ::posix_spawn(&pid, program.c_str(), nullptr, nullptr, child_argv, environ);
        if (rc != 0) {
            std::fprintf(stderr, "raw_spawn: %s: %s\n", program.c_str(), std::strerror(rc));
            std::exit(1);
        }
        ++running;
    };
    while (running < conc)
        spawn_one();
    while (running > 0) {
        int status = 0;
        if (::waitpid(-1, &status, 0) < 0) {
            std::fprintf(stderr, "raw_spawn: waitpid: %s\n", std::strerror(errno));
            return 1;
        }
        --running;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::fprintf(stderr, "raw_spawn: %s did not exit 0\n", program.c_str());
            return 1;
        }
        ++spawns;
        if (std::chrono::steady_clock::now() < until) spawn_one();
    }
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = cpu_s() - c0;
    std::printf(
        "{\"spawns\": %lu, \"secs\": %.6f, \"per_sec\": %.1f, \"cpu_us_per_spawn\": %.3f}\n",
        spawns, took, static_cast<double>(spawns) / took, cpu / static_cast<double>(spawns) * 1e6);
    return 0;
}
