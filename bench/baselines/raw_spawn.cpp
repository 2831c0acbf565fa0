// raw_spawn: the floor for spawning children, which galay's process::Command (bench_local spawn)
// and Tokio's process::Command (bench/control/tokio_spawn) are measured against.
//
//   raw_spawn PROGRAM SECS [CONCURRENCY]
//       posix_spawn(PROGRAM) and waitpid, CONCURRENCY children at a time (default 1), for SECS
//       seconds; every child must exit 0. Prints one JSON object:
//       {"spawns", "secs", "per_sec", "cpu_us_per_spawn"}
//
// No galay code: it is the yardstick (no pipes, no pidfd, stdio inherited, as the others run it).
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
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

int usage(const char* why) {
    std::fprintf(stderr, "raw_spawn: %s\nusage: raw_spawn PROGRAM SECS [CONCURRENCY]\n", why);
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4) return usage("PROGRAM and SECS are required");
    char* end = nullptr;
    const double secs = std::strtod(argv[2], &end);
    if (end == argv[2] || *end != '\0' || secs <= 0) return usage("SECS must be a positive number");
    long conc = 1;
    if (argc == 4) {
        conc = std::strtol(argv[3], &end, 10);
        if (end == argv[3] || *end != '\0' || conc < 1 || conc > 4096)
            return usage("CONCURRENCY must be 1..4096");
    }
    char* child_argv[] = {argv[1], nullptr};
    const auto start = std::chrono::steady_clock::now();
    const auto until = start + std::chrono::duration<double>(secs);
    const double c0 = cpu_s();
    unsigned long spawns = 0;
    long running = 0;
    auto spawn_one = [&] {
        pid_t pid = 0;
        const int rc = ::posix_spawn(&pid, argv[1], nullptr, nullptr, child_argv, environ);
        if (rc != 0) {
            std::fprintf(stderr, "raw_spawn: %s: %s\n", argv[1], std::strerror(rc));
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
            std::fprintf(stderr, "raw_spawn: %s did not exit 0\n", argv[1]);
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
