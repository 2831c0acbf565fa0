#include "tool_support.hpp"

#include <galay/net/tcp.hpp>
#include <galay/time/sleep.hpp>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace galay::tools {

void add_paired_run_flags(cli::App& app, PairedRuns* runs, const char* pairs_help,
                          const char* pin_help) {
    app.add_option("--pairs", runs->pairs, pairs_help)
        ->check(cli::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--rounds", runs->rounds, "timed round trips per run")
        ->check(cli::Range(10, 100'000'000))
        ->capture_default_str();
    app.add_option("--warmup", runs->warmup, "untimed round trips first")
        ->check(cli::Range(0, 100'000'000))
        ->capture_default_str();
    app.add_flag("--pin", runs->pin, pin_help);
    app.add_flag("--json", runs->json, "print one JSON object");
}

nlohmann::json spread_of(std::vector<double> ratios) {
    std::sort(ratios.begin(), ratios.end());
    return nlohmann::json{
        {"median", ratios[ratios.size() / 2]}, {"min", ratios.front()}, {"max", ratios.back()}};
}

void add_idle_spin_flag(cli::App& app, unsigned* us, const char* applies_to) {
    app.add_option("--idle-spin", *us,
                   std::string("poll up to this many microseconds before sleeping "
                               "(SchedulerOptions::idle_spin; 0: off): ") +
                       applies_to)
        ->check(whole(0, 10'000'000))
        ->capture_default_str();
}

bool ensure_fd_limit(std::uint64_t needed, const char* tool) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return true;
    if (rl.rlim_cur >= needed) return true;
    rlimit want = rl;
    want.rlim_cur = needed;
    if (want.rlim_max < needed) want.rlim_max = needed; // needs CAP_SYS_RESOURCE
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) return true;
    const int err = errno;
    if (rl.rlim_max > rl.rlim_cur) { // at least take what the hard limit allows
        rl.rlim_cur = rl.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    std::fprintf(stderr,
                 "%s: needs %llu file descriptors but RLIMIT_NOFILE allows %llu (hard limit "
                 "%llu; raising it failed: %s). Run `ulimit -n %llu` as root or lower -c.\n",
                 tool, static_cast<unsigned long long>(needed),
                 static_cast<unsigned long long>(rl.rlim_cur),
                 static_cast<unsigned long long>(rl.rlim_max), std::strerror(err),
                 static_cast<unsigned long long>(needed));
    return false;
}

void raise_fd_limit_to_max() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
}

bool start_scheduler(std::optional<Scheduler>& sched, Backend backend, const char* tool) {
    try {
        sched.emplace(SchedulerOptions{.backend = backend});
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", tool, e.what());
        return false;
    }
    return true;
}

void print_error_count(const char* tool, std::uint64_t errors) {
    std::fprintf(stderr, "%s: %s error%s (see above): exit code 1\n", tool,
                 with_commas(errors).c_str(), errors == 1 ? "" : "s");
}

std::optional<double> process_cpu_seconds(int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(f, line)) return std::nullopt;
    // The command name (field 2) may contain spaces: parse after the last ')'.
    auto close = line.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    return double(utime + stime) / double(::sysconf(_SC_CLK_TCK));
}

Task<int> wait_for_stop_signal() {
    if (stop_signal() != 0) co_return stop_signal();
    const int fd = stop_fd() >= 0 ? ::dup(stop_fd()) : -1;
    if (fd < 0) { // no way to be woken: look now and then
        // (Not `if (!co_await sleep(..)) co_return 0;`: GCC 12 miscompiles a co_await in an if
        // condition followed by co_return of a value.)
        for (;;) {
            auto slept = co_await sleep(std::chrono::milliseconds(50));
            if (!slept || stop_signal() != 0) break;
        }
        co_return stop_signal();
    }
    TcpStream wake(fd); // the read end of the handler's socketpair; stays readable once written
    char byte = 0;
    auto r = co_await wake.recv(std::span(&byte, 1), MSG_PEEK);
    co_return r ? stop_signal() : 0;
}

std::optional<std::uint64_t> process_rss_bytes(int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string key;
    while (f >> key) {
        if (key == "VmRSS:") {
            std::uint64_t kb = 0;
            f >> kb;
            return kb * 1024;
        }
        f.ignore(1 << 20, '\n');
    }
    return std::nullopt;
}

} // namespace galay::tools
