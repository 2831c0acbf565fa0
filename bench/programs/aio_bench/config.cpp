#include "config.hpp"

#include "common/cli.hpp"

#include "galay_cli.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <tuple>

namespace aiob {

std::string_view to_string(EngineKind e) {
    return e == EngineKind::libaio ? "libaio" : "io_uring";
}

std::string_view to_string(Pattern p) {
    switch (p) {
    case Pattern::rand_read:
        return "rand_read";
    case Pattern::rand_write:
        return "rand_write";
    case Pattern::rand_rw:
        return "rand_rw";
    case Pattern::seq_read:
        return "seq_read";
    case Pattern::seq_write:
        return "seq_write";
    }
    return "?";
}

std::string_view to_string(PollMode m) {
    switch (m) {
    case PollMode::none:
        return "none";
    case PollMode::iopoll:
        return "iopoll";
    case PollMode::sqpoll:
        return "sqpoll";
    }
    return "?";
}

uint64_t Config::runtime_ns() const {
    if (ios != 0 && !runtime_set) return 0;
    // parse_args refuses anything below 1 ns; never let rounding turn a limit into "none" (0).
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(runtime_s * 1e9)));
}

std::optional<uint64_t> parse_size(std::string_view s) {
    if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc{}) return std::nullopt;
    std::string rest(ptr, s.data() + s.size());
    for (auto& c : rest)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    unsigned shift = 0;
    if (!rest.empty()) {
        switch (rest.front()) {
        case 'k':
            shift = 10;
            break;
        case 'm':
            shift = 20;
            break;
        case 'g':
            shift = 30;
            break;
        case 't':
            shift = 40;
            break;
        default:
            return std::nullopt;
        }
        std::string_view suffix = std::string_view(rest).substr(1);
        if (!(suffix.empty() || suffix == "b" || suffix == "ib")) return std::nullopt;
    }
    if (shift != 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
    return value << shift;
}

namespace {

std::unexpected<UsageError> usage(std::string msg) {
    return std::unexpected(UsageError{std::move(msg), 2});
}

std::optional<uint64_t> parse_uint(std::string_view s) {
    if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || ptr != s.data() + s.size()) return std::nullopt;
    return v;
}

std::optional<double> parse_seconds(std::string_view s) {
    if (!s.empty() && s.back() == 's') s.remove_suffix(1);
    if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '.'))
        return std::nullopt;
    // strtod, not std::from_chars: libc++ 16 has no floating-point from_chars. The tools never
    // call setlocale, so the decimal point is '.'.
    const std::string text(s);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text.c_str(), &end);
    if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

} // namespace

namespace {

/// The command line's values as text, before they are checked (Config holds the flags CLI11
/// sets directly).
struct RawArgs {
    std::string engine = "libaio", pattern = "rand_read", depth = "32", threads = "1",
                runtime = "30", bs = "4k", size, rwmix, ios, poll_mode, seed, submit_batch,
                complete_batch;
    bool poll = false;
    bool batch = false;
    cli::Option* engine_given = nullptr;  // -e (count() > 0: given)
    cli::Option* runtime_given = nullptr; // -r
};

using Check = std::expected<void, UsageError>;

/// What to run: the target, the engine, the I/O pattern and its shape.
void add_workload_options(cli::App& app, Config& cfg, RawArgs& a) {
    app.add_option("-f,--file", cfg.file,
                   "Target file or block device. Created (and removed at exit unless --keep) if "
                   "missing; existing files and devices are only written with --allow-overwrite")
        ->required();
    a.engine_given = app.add_option("-e,--engine", a.engine, "libaio | io_uring (default libaio)");
    app.add_option("-p,--pattern", a.pattern,
                   "rand_read | rand_write | rand_rw | seq_read | seq_write (default rand_read)");
    app.add_option("-q,--iodepth", a.depth, "I/Os in flight per thread (default 32)");
    app.add_option("-t,--threads", a.threads, "Threads, one engine each (default 1)");
    a.runtime_given =
        app.add_option("-r,--runtime", a.runtime, "Seconds to run (default 30; none with --ios)");
    app.add_option("-b,--block-size", a.bs, "Block size: bytes or 4k/64k/1m (default 4k)");
    app.add_flag("-P,--poll", a.poll,
                 "Polling: io_uring IORING_SETUP_IOPOLL (needs --direct); libaio busy-polls "
                 "io_getevents with a zero timeout. See --poll-mode");
    app.add_option("--poll-mode", a.poll_mode,
                   "iopoll | sqpoll (io_uring IORING_SETUP_SQPOLL); implies -P");
    app.add_flag("-M,--cpu-counters", cfg.cpu_counters,
                 "CPU counters per I/O via perf_event_open (instructions, cycles, branches, "
                 "branch-misses, IPC, task-clock, context switches, CPU utilisation)");
    app.add_flag("--direct", cfg.direct, "Open with O_DIRECT");
    app.add_flag("--verify", cfg.verify,
                 "Stamp every 512-byte sector written (offset, generation, seed, checksum) and "
                 "check every sector read");
    app.add_option("--size", a.size,
                   "Bytes to use (file created with this size; default 256m or whole file)");
    app.add_option("--rwmix", a.rwmix, "Read percentage for rand_rw (default 50)");
}

/// How to report, limits, batching and the io_uring engine options (after the workload's, in
/// this order in --help).
void add_run_options(cli::App& app, Config& cfg, RawArgs& a) {
    app.add_flag("--json", cfg.json, "Print one JSON object instead of the text report");
    app.add_flag("--per-second", cfg.per_second, "Print (or add to JSON) one line per second");
    app.add_flag("--allow-overwrite", cfg.allow_overwrite,
                 "Allow writing to an existing file or block device (destroys its data)");
    app.add_flag("--keep", cfg.keep, "Keep the file aio_bench created");
    app.add_option("--ios", a.ios, "Stop after this many I/Os in total (split across threads)");
    app.add_flag("--compare", cfg.compare,
                 "Run libaio then io_uring with identical parameters and print both side by side");
    app.add_option("--submit-batch", a.submit_batch,
                   "Submit refilled I/Os every N (fio iodepth_batch_submit; default 1, as fio: "
                   "one submit syscall per I/O)");
    app.add_option("--complete-batch", a.complete_batch,
                   "Take at most N completions per wait (fio iodepth_batch_complete_max; "
                   "default 1, as fio)");
    app.add_flag("--batch", a.batch,
                 "Batch fully: --submit-batch and --complete-batch = iodepth (one submit syscall "
                 "per refill, every ready completion per wait)");
    app.add_option("--seed", a.seed, "PRNG seed for offsets and verify stamps (default: clock)");
    app.add_flag("--fixedbufs", cfg.fixedbufs,
                 "io_uring: register the I/O buffers with the ring once and use READ_FIXED/"
                 "WRITE_FIXED (fio's io_uring fixedbufs)");
    app.add_flag("--registerfiles", cfg.registerfiles,
                 "io_uring: register the file with the ring and use IOSQE_FIXED_FILE (fio's "
                 "io_uring registerfiles)");
}

/// The shared parser's verdict (galay_cli.hpp): --help as exit code 0, every parse error as one
/// line, which main prints in the "aio_bench: error: ... (see --help)" frame.
Check run_parser(cli::App& app, int argc, char** argv) {
    auto exit = galay::tools::parse_args(app, galay::tools::args_from(argc, argv), "aio_bench");
    if (!exit) return {};
    if (exit->code == 0) return std::unexpected(UsageError{exit->message, 0});
    const std::string head = "aio_bench: error: ", tail = " (see --help)\n";
    std::string what = exit->message;
    if (what.starts_with(head) && what.ends_with(tail))
        what = what.substr(head.size(), what.size() - head.size() - tail.size());
    return usage(what);
}

Check read_engine_and_pattern(const RawArgs& a, Config& cfg) {
    if (a.engine == "libaio")
        cfg.engine = EngineKind::libaio;
    else if (a.engine == "io_uring" || a.engine == "uring")
        cfg.engine = EngineKind::io_uring;
    else
        return usage("-e/--engine: unknown engine '" + a.engine + "' (libaio or io_uring)");
    if (a.engine_given->count() && cfg.compare)
        return usage("-e/--engine: --compare runs both engines, do not give -e");

    if (a.pattern == "rand_read" || a.pattern == "randread")
        cfg.pattern = Pattern::rand_read;
    else if (a.pattern == "rand_write" || a.pattern == "randwrite")
        cfg.pattern = Pattern::rand_write;
    else if (a.pattern == "rand_rw" || a.pattern == "randrw")
        cfg.pattern = Pattern::rand_rw;
    else if (a.pattern == "seq_read" || a.pattern == "read")
        cfg.pattern = Pattern::seq_read;
    else if (a.pattern == "seq_write" || a.pattern == "write")
        cfg.pattern = Pattern::seq_write;
    else
        return usage("-p/--pattern: unknown pattern '" + a.pattern +
                     "' (rand_read, rand_write, rand_rw, seq_read, seq_write)");
    return {};
}

/// -q, -t, -r and -b: how many I/Os of which size, for how long.
Check read_shape(const RawArgs& a, Config& cfg) {
    auto q = parse_uint(a.depth);
    if (!q || *q == 0 || *q > 32768)
        return usage("-q/--iodepth: '" + a.depth + "' is not an integer in 1..32768");
    cfg.depth = static_cast<unsigned>(*q);

    auto t = parse_uint(a.threads);
    if (!t || *t == 0 || *t > 1024)
        return usage("-t/--threads: '" + a.threads + "' is not an integer in 1..1024");
    cfg.threads = static_cast<unsigned>(*t);

    auto r = parse_seconds(a.runtime);
    if (!r || *r <= 0)
        return usage("-r/--runtime: '" + a.runtime + "' is not a positive number of seconds");
    if (auto problem = galay::tools::seconds_problem(*r, 0, 1e7))
        return usage("-r/--runtime: " + *problem);
    cfg.runtime_s = *r;
    cfg.runtime_set = a.runtime_given->count() > 0;

    auto b = parse_size(a.bs);
    if (!b)
        return usage("-b/--block-size: cannot parse '" + a.bs + "' (bytes, or e.g. 4k, 64k, 1m)");
    if (*b == 0) return usage("-b/--block-size: must not be zero");
    if (*b > (256ull << 20)) return usage("-b/--block-size: '" + a.bs + "' is larger than 256m");
    if (cfg.direct && *b % 512 != 0)
        return usage("-b/--block-size: " + std::to_string(*b) +
                     " is not a multiple of 512, required by --direct");
    cfg.block_size = static_cast<uint32_t>(*b);
    if (static_cast<uint64_t>(cfg.block_size) * cfg.depth * cfg.threads > (8ull << 30))
        return usage("-b/--block-size: block size x iodepth x threads exceeds 8 GiB of buffers");
    return {};
}

/// --size, --rwmix, --ios and --seed.
Check read_limits(const RawArgs& a, Config& cfg) {
    if (!a.size.empty()) {
        auto s = parse_size(a.size);
        if (!s || *s == 0)
            return usage("--size: cannot parse '" + a.size + "' (bytes, or e.g. 512m, 1g)");
        if (*s < cfg.block_size)
            return usage("--size: " + a.size + " is smaller than the block size " +
                         std::to_string(cfg.block_size));
        cfg.size = *s;
    }
    if (!a.rwmix.empty()) {
        auto m = parse_uint(a.rwmix);
        if (!m || *m > 100) return usage("--rwmix: '" + a.rwmix + "' is not a percentage 0..100");
        if (cfg.pattern != Pattern::rand_rw) return usage("--rwmix: only applies to -p rand_rw");
        cfg.rwmix_read = static_cast<unsigned>(*m);
    }
    if (!a.ios.empty()) {
        auto n = parse_uint(a.ios);
        if (!n || *n == 0) return usage("--ios: '" + a.ios + "' is not a positive integer");
        cfg.ios = *n;
    }
    if (!a.seed.empty()) {
        auto s = parse_uint(a.seed);
        if (!s) return usage("--seed: '" + a.seed + "' is not an unsigned integer");
        cfg.seed = *s;
    }
    return {};
}

/// --batch, --submit-batch and --complete-batch.
Check read_batching(const RawArgs& a, Config& cfg) {
    if (a.batch) {
        if (!a.submit_batch.empty() || !a.complete_batch.empty())
            return usage("--batch: give either --batch or --submit-batch/--complete-batch");
        cfg.submit_batch = cfg.complete_batch = cfg.depth;
    }
    for (auto [text, out, flag] :
         {std::tuple{&a.submit_batch, &cfg.submit_batch, "--submit-batch"},
          std::tuple{&a.complete_batch, &cfg.complete_batch, "--complete-batch"}}) {
        if (text->empty()) continue;
        auto n = parse_uint(*text);
        if (!n || *n == 0 || *n > cfg.depth)
            return usage(std::string(flag) + ": '" + *text + "' is not an integer in 1..iodepth (" +
                         std::to_string(cfg.depth) + ")");
        *out = static_cast<unsigned>(*n);
    }
    return {};
}

/// -P/--poll-mode, then the io_uring engine options, which only io_uring runs may use.
Check read_polling_and_engine_options(const RawArgs& a, Config& cfg) {
    if (!a.poll_mode.empty()) {
        if (a.poll_mode == "iopoll")
            cfg.poll = PollMode::iopoll;
        else if (a.poll_mode == "sqpoll")
            cfg.poll = PollMode::sqpoll;
        else
            return usage("--poll-mode: unknown mode '" + a.poll_mode + "' (iopoll or sqpoll)");
    } else if (a.poll) {
        cfg.poll = PollMode::iopoll;
    }
    bool uring_used = cfg.engine == EngineKind::io_uring || cfg.compare;
    if (cfg.poll == PollMode::sqpoll && (cfg.engine != EngineKind::io_uring || cfg.compare))
        return usage("--poll-mode: sqpoll is an io_uring mode; libaio only has -P (busy-poll)");
    if (cfg.poll == PollMode::iopoll && uring_used && !cfg.direct)
        return usage("-P/--poll: io_uring IOPOLL only works with O_DIRECT; add --direct (or use "
                     "--poll-mode sqpoll)");
    for (auto [on, flag] : {std::pair{cfg.fixedbufs, "--fixedbufs"},
                            std::pair{cfg.registerfiles, "--registerfiles"}}) {
        if (!on) continue;
        if (cfg.compare)
            return usage(std::string(flag) + ": an io_uring engine option (as in fio); --compare "
                                             "also runs libaio, which has none: run -e io_uring "
                                             "with and without it instead");
        if (cfg.engine != EngineKind::io_uring)
            return usage(std::string(flag) +
                         ": an io_uring engine option (as in fio), not "
                         "available with -e libaio" +
                         (a.engine_given->count() ? "" : " (the default engine)") +
                         "; add -e io_uring");
    }
    if (cfg.fixedbufs && cfg.depth > 16384)
        return usage("--fixedbufs: registers one buffer per I/O slot and io_uring takes at most "
                     "16384; -q " +
                     std::to_string(cfg.depth) + " is more");
    if (cfg.verify && cfg.block_size % 512 != 0)
        return usage("-b/--block-size: --verify stamps 512-byte sectors; the block size must be "
                     "a multiple of 512");
    return {};
}

} // namespace

std::expected<Config, UsageError> parse_args(int argc, char** argv) {
    Config cfg;
    cli::App app{"aio_bench: fio-like comparison of the libaio and io_uring engines.\n"
                 "Each thread owns one engine and keeps exactly -q I/Os in flight.",
                 "aio_bench"};
    app.set_version_flag("--version", "aio_bench 1.0");
    app.column_width(34);
    RawArgs a;
    add_workload_options(app, cfg, a);
    add_run_options(app, cfg, a);
    // Checked in this order: the first problem is the one reported.
    if (auto c = run_parser(app, argc, argv); !c) return std::unexpected(c.error());
    for (auto read : {read_engine_and_pattern, read_shape, read_limits, read_batching,
                      read_polling_and_engine_options})
        if (auto c = read(a, cfg); !c) return std::unexpected(c.error());
    return cfg;
}

} // namespace aiob
