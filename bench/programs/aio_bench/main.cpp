// aio_bench: a fio-like comparison of the libaio and io_uring engines, written directly on libaio
// and liburing (no galay code) so that queue depth, batching and polling are exactly what the flags
// say. See README.md for the flags, the output and the JSON keys.
//
// Exit codes: 0 success; 1 runtime error (target, engine, I/O errors, verify errors); 2 usage
// error. SIGINT/SIGTERM: stop issuing, drain, report, remove a created file, exit as usual; the
// duplicate SIGTERM `timeout` sends is ignored; a second signal removes the created file and
// exits at once (bench/programs/common/signals.hpp).
#include "bench.hpp"
#include "config.hpp"
#include "report.hpp"
#include "target.hpp"

#include "common/signals.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

using namespace aiob;

namespace {

void on_signal() {
    g_interrupted.store(true);
}

/// The file aio_bench is creating and will remove, for a forced exit (a second signal).
char g_created_path[4096];

void remove_created_file() {
    if (g_created_path[0] != '\0') ::unlink(g_created_path); // async-signal-safe
}

void live_text(const SecondSample& s, void* user) {
    print_live(stdout, static_cast<const char*>(user), s);
}

uint64_t make_seed() {
    uint64_t x = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    x ^= static_cast<uint64_t>(getpid()) << 32;
    x = (x ^ (x >> 31)) * 0x9e3779b97f4a7c15ull;
    return (x ^ (x >> 29)) | 1;
}

bool failed(const Results& r) {
    return !r.fatal.empty() || r.errors || r.verify_errors;
}

} // namespace

int main(int argc, char** argv) {
    auto parsed = parse_args(argc, argv);
    if (!parsed) {
        if (parsed.error().exit_code == 0) {
            std::fputs(parsed.error().message.c_str(), stdout);
            return 0;
        }
        std::fprintf(stderr, "aio_bench: error: %s (see --help)\n", parsed.error().message.c_str());
        return parsed.error().exit_code;
    }
    const Config& cfg = *parsed;
    // An engine this build lacks: say so before creating or filling any file.
    for (EngineKind e : {EngineKind::libaio, EngineKind::io_uring}) {
        if ((cfg.compare || cfg.engine == e) && engine_missing(e) != nullptr) {
            std::fprintf(stderr, "aio_bench: error: %s\n", engine_missing(e));
            return 1;
        }
    }
    const uint64_t seed = cfg.seed ? cfg.seed : make_seed();

    // A file that does not exist yet is ours to remove if a second signal forces the exit while
    // it is being created.
    struct stat before {};
    if (!cfg.keep && ::stat(cfg.file.c_str(), &before) != 0 && errno == ENOENT &&
        cfg.file.size() < sizeof g_created_path)
        std::memcpy(g_created_path, cfg.file.c_str(), cfg.file.size() + 1);
    galay::tools::install_stop_handlers(on_signal, remove_created_file);
    // A closed stdout (aio_bench ... | head) must not kill us before a created file is removed.
    signal(SIGPIPE, SIG_IGN);

    auto target = open_target(cfg, seed);
    if (!target || !target->created || target->keep) g_created_path[0] = '\0';
    if (!target) {
        std::fprintf(stderr, "aio_bench: error: %s\n", target.error().c_str());
        return 1;
    }
    if (auto msg = check_layout(cfg, *target); !msg.empty()) {
        std::fprintf(stderr, "aio_bench: error: %s\n", msg.c_str());
        return 1;
    }
    if (!cfg.json) print_header(stdout, cfg, *target, seed); // flushed: the run has started

    LiveFn live = (cfg.per_second && !cfg.json) ? live_text : nullptr;
    if (cfg.compare) {
        char pa[] = "libaio   ", pb[] = "io_uring ";
        Results a = run_benchmark(cfg, EngineKind::libaio, *target, seed, live, pa);
        Results b;
        if (a.fatal.empty() && !g_interrupted.load()) {
            // Same starting point for the second engine (matters for buffered I/O).
            ::posix_fadvise(target->fd, 0, static_cast<off_t>(target->size), POSIX_FADV_DONTNEED);
            b = run_benchmark(cfg, EngineKind::io_uring, *target, seed, live, pb);
        } else {
            b.engine = EngineKind::io_uring;
            b.fatal = "not run: the libaio run failed or was interrupted";
        }
        if (cfg.json)
            std::printf("%s\n", compare_json(cfg, *target, seed, a, b).dump(2).c_str());
        else
            print_compare(stdout, cfg, a, b);
        for (const Results* r : {&a, &b}) {
            print_errors(stderr, *r);
            if (!r->fatal.empty())
                std::fprintf(stderr, "aio_bench: error: %s: %s\n",
                             std::string(to_string(r->engine)).c_str(), r->fatal.c_str());
        }
        return failed(a) || failed(b) ? 1 : 0;
    }

    Results r = run_benchmark(cfg, cfg.engine, *target, seed, live, const_cast<char*>(""));
    if (cfg.json) {
        nlohmann::json j;
        j["tool"] = "aio_bench";
        j["version"] = "1.0";
        j["mode"] = "single";
        j["config"] = config_json(cfg, *target, seed);
        j.update(results_json(cfg, r));
        std::printf("%s\n", j.dump(2).c_str());
    } else if (r.fatal.empty()) {
        print_text(stdout, cfg, r);
    }
    print_errors(stderr, r);
    if (!r.fatal.empty()) std::fprintf(stderr, "aio_bench: error: %s\n", r.fatal.c_str());
    return failed(r) ? 1 : 0;
}
