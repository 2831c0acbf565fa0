// Runs shell commands as child processes, several at once, each with a time limit, and prints
// what each one wrote as it finishes.
//   ./run_jobs [-j N] [--timeout SECS] [--max-output BYTES] [--backend B] COMMAND...
//   ./run_jobs -j 2 --timeout 5 'make -C a' 'make -C b' 'sleep 100'
// Each COMMAND runs under /bin/sh -c, with stdin from /dev/null and stdout and stderr collected
// (at most --max-output bytes each, default 1 MiB); at most N run at once (default 4). A command
// still running after --timeout seconds (default 10), or writing more than the limit, is killed
// and reaped. For each command, in the order they finish:
//   [2] $ make -C b
//   ...its stdout, then its stderr...
//   [2] exit 0 in 1.93 s          (or: exit 3, signal 9, timed out after 5 s: killed, ...)
// Exit code: 0 when every command exited 0, 1 when one did not (or could not start), 2 for a
// bad argument.
#include <galay/galay.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Options {
    std::size_t jobs = 4;
    std::chrono::seconds timeout{10};
    std::size_t max_output = 1 << 20;
    galay::Backend backend = galay::Backend::automatic;
    std::vector<std::string> commands;
};

/// What a job's last line says.
std::string verdict(const galay::Result<galay::process::Output>& r, const Options& opt,
                    double secs) {
    char took[32];
    std::snprintf(took, sizeof took, " in %.2f s", secs);
    if (r) return r->status.to_string() + took;
    if (r.error() == std::errc::timed_out)
        return "timed out after " + std::to_string(opt.timeout.count()) + " s: killed";
    if (r.error() == galay::errc::output_too_large)
        return "wrote more than " + std::to_string(opt.max_output) + " bytes: killed";
    return "could not run: " + r.error().message();
}

void print(std::size_t index, const std::string& command,
           const galay::Result<galay::process::Output>& r, const std::string& last) {
    std::printf("[%zu] $ %s\n", index, command.c_str());
    if (r) {
        std::fwrite(r->out.data(), 1, r->out.size(), stdout);
        std::fwrite(r->err.data(), 1, r->err.size(), stdout);
        if (!r->out.empty() && r->out.back() != '\n' && r->err.empty()) std::putchar('\n');
        if (!r->err.empty() && r->err.back() != '\n') std::putchar('\n');
    }
    std::printf("[%zu] %s\n", index, last.c_str());
    std::fflush(stdout);
}

/// Run one command when a slot is free; true when it exited 0.
galay::Task<bool> job(std::size_t index, const Options& opt, galay::Semaphore& slots) {
    const auto got = co_await slots.acquire();
    if (!got) co_return false;
    const std::string& command = opt.commands[index - 1];
    galay::process::Command cmd("/bin/sh");
    cmd.arg("-c").arg(command);
    const auto start = std::chrono::steady_clock::now();
    // The timeout cancels output(), which kills and reaps the child.
    const galay::Result<galay::process::Output> r =
        co_await galay::timeout(opt.timeout, cmd.output(opt.max_output));
    slots.release();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    print(index, command, r, verdict(r, opt, took.count()));
    co_return r && r->status.success();
}

galay::Task<int> run(const Options& opt) {
    galay::Semaphore slots(opt.jobs);
    std::vector<galay::Task<bool>> jobs;
    for (std::size_t i = 1; i <= opt.commands.size(); ++i)
        jobs.push_back(job(i, opt, slots));
    const std::vector<bool> ok = co_await galay::when_all(std::move(jobs));
    std::size_t failed = 0;
    for (const bool b : ok)
        failed += b ? 0 : 1;
    if (failed != 0) std::fprintf(stderr, "run_jobs: %zu of %zu failed\n", failed, ok.size());
    co_return failed == 0 ? 0 : 1;
}

std::optional<unsigned long> parse_uint(std::string_view s, unsigned long min, unsigned long max) {
    unsigned long v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v < min || v > max)
        return std::nullopt;
    return v;
}

int usage(const std::string& why) {
    std::fprintf(stderr,
                 "run_jobs: %s\nusage: run_jobs [-j N] [--timeout SECS] [--max-output BYTES] "
                 "[--backend io_uring|epoll|auto] COMMAND...\n",
                 why.c_str());
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        const bool takes_value =
            a == "-j" || a == "--timeout" || a == "--max-output" || a == "--backend";
        if (takes_value && i + 1 >= argc) return usage(std::string(a) + " needs a value");
        if (a == "-j") {
            auto n = parse_uint(argv[++i], 1, 4096);
            if (!n) return usage("-j: a whole number of jobs, 1..4096");
            opt.jobs = *n;
        } else if (a == "--timeout") {
            auto n = parse_uint(argv[++i], 1, 86400);
            if (!n) return usage("--timeout: whole seconds, 1..86400");
            opt.timeout = std::chrono::seconds(*n);
        } else if (a == "--max-output") {
            auto n = parse_uint(argv[++i], 1, 1ul << 30);
            if (!n) return usage("--max-output: bytes, 1..1073741824");
            opt.max_output = *n;
        } else if (a == "--backend") {
            auto b = galay::parse_backend(argv[++i]);
            if (!b) return usage("--backend: io_uring, epoll or auto");
            opt.backend = *b;
        } else if (a == "--") {
            for (++i; i < argc; ++i)
                opt.commands.emplace_back(argv[i]);
        } else if (a.starts_with("-")) {
            return usage("unknown option '" + std::string(a) + "'");
        } else {
            opt.commands.emplace_back(a);
        }
    }
    if (opt.commands.empty()) return usage("no COMMAND to run");
    try {
        galay::SchedulerOptions so;
        so.backend = opt.backend;
        return galay::block_on(run(opt), so);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "run_jobs: %s\n", e.what());
        return 1;
    }
}
