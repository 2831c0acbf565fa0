#include "report.hpp"

#include "measure/format.hpp"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace aiob {

namespace {

namespace tools = galay::tools;

uint64_t ios_done(const Results& r) {
    return r.total_ops() + r.errors;
}

struct Pct {
    const char* name; // "p50"
    const char* key;  // JSON key
    double p;
};
constexpr Pct kPcts[] = {
    {"p50", "p50", 50}, {"p95", "p95", 95}, {"p99", "p99", 99}, {"p99.9", "p99.9", 99.9}};

nlohmann::json lat_json(const LatencyHistogram& h) {
    nlohmann::json j;
    j["samples"] = h.count();
    j["mean"] = h.mean_ns();
    j["min"] = h.min_ns();
    j["max"] = h.max_ns();
    j["stddev"] = h.stddev_ns();
    for (auto& p : kPcts)
        j[p.key] = h.fio_percentile(p.p);
    return j;
}

// One figure of a result, for the text report, the JSON and the comparison.
struct Figure {
    std::string label; // text label
    std::string key;   // JSON key in "diff_pct"
    std::string unit;
    std::optional<double> value;
    std::string missing; // why value is empty
    int decimals = 2;
};

// The CPU figures (-M): per I/O over all benchmark threads.
std::vector<Figure> cpu_figures(const Results& r) {
    std::vector<Figure> f;
    const double n = double(ios_done(r));
    const CounterValues& c = r.counters;
    auto per_io = [&](unsigned k) -> std::optional<double> {
        if (!c.value[k] || n == 0) return std::nullopt;
        return double(*c.value[k]) / n;
    };
    auto why = [&](unsigned k) { return "not available (" + c.error[k] + ")"; };
    f.push_back({"instructions", "instructions_per_io", "per I/O", per_io(kInstructions),
                 why(kInstructions), 1});
    f.push_back({"cycles", "cycles_per_io", "per I/O", per_io(kCycles), why(kCycles), 1});
    f.push_back({"branches", "branches_per_io", "per I/O", per_io(kBranches), why(kBranches), 1});
    std::optional<double> miss;
    if (c.value[kBranches] && c.value[kBranchMisses] && *c.value[kBranches])
        miss = 100.0 * double(*c.value[kBranchMisses]) / double(*c.value[kBranches]);
    f.push_back({"branch-misses", "branch_miss_pct", "% of branches", miss,
                 c.value[kBranchMisses] ? why(kBranches) : why(kBranchMisses), 2});
    std::optional<double> ipc;
    if (c.value[kInstructions] && c.value[kCycles] && *c.value[kCycles])
        ipc = double(*c.value[kInstructions]) / double(*c.value[kCycles]);
    f.push_back({"IPC", "ipc", "instructions per cycle", ipc,
                 "not available (needs instructions and cycles)", 3});
    f.push_back({"task-clock", "task_clock_ns_per_io", "ns per I/O", per_io(kTaskClock),
                 why(kTaskClock), 1});
    f.push_back({"context switches", "context_switches_per_io", "per I/O", per_io(kContextSwitches),
                 why(kContextSwitches), 4});
    std::optional<double> util;
    if (c.value[kTaskClock] && r.elapsed_s > 0)
        util = 100.0 * double(*c.value[kTaskClock]) / 1e9 / r.elapsed_s;
    f.push_back({"CPU utilisation", "thread_cpu_util_pct",
                 "% of one core (benchmark threads: task-clock / wall time)", util, why(kTaskClock),
                 1});
    return f;
}

// CPU of the whole process from getrusage (always measured).
std::vector<Figure> process_figures(const Results& r) {
    const double n = double(ios_done(r));
    const double cpu = r.proc_user_s + r.proc_sys_s;
    std::vector<Figure> f;
    f.push_back({"process CPU", "process_cpu_ns_per_io", "ns per I/O (user+sys, whole process)",
                 n ? std::optional<double>(cpu * 1e9 / n) : std::nullopt, "no I/O", 1});
    f.push_back({"process CPU utilisation", "process_cpu_util_pct", "% of one core",
                 r.elapsed_s > 0 ? std::optional<double>(100.0 * cpu / r.elapsed_s) : std::nullopt,
                 "no time", 1});
    return f;
}

std::vector<Figure> main_figures(const Results& r) {
    std::vector<Figure> f;
    const LatencyHistogram h = r.all_lat();
    f.push_back({"IOPS", "iops", "", tools::per_second(r.total_ops(), r.elapsed_s), "", 1});
    f.push_back({"Bandwidth", "bandwidth_mib_s", "MiB/s",
                 tools::mib(tools::per_second(r.total_bytes(), r.elapsed_s)), "", 2});
    f.push_back({"Latency mean", "lat_mean_us", "us", h.mean_ns() / 1e3, "", 2});
    for (auto& p : kPcts)
        f.push_back({std::string("Latency ") + p.name, std::string("lat_") + p.key + "_us", "us",
                     h.fio_percentile(p.p) / 1e3, "", 2});
    return f;
}

} // namespace

void print_header(std::FILE* out, const Config& cfg, const Target& t, uint64_t seed) {
    std::string eng = cfg.compare ? "libaio vs io_uring" : std::string(to_string(cfg.engine));
    std::fprintf(out, "aio_bench 1.0: %s, %s, bs %u, iodepth %u, %u thread%s", eng.c_str(),
                 std::string(to_string(cfg.pattern)).c_str(), cfg.block_size, cfg.depth,
                 cfg.threads, cfg.threads == 1 ? "" : "s");
    if (cfg.runtime_ns()) std::fprintf(out, ", %g s", cfg.runtime_s);
    if (cfg.ios) std::fprintf(out, ", %llu I/Os", static_cast<unsigned long long>(cfg.ios));
    if (cfg.pattern == Pattern::rand_rw) std::fprintf(out, ", %u%% reads", cfg.rwmix_read);
    if (cfg.depth > 1)
        std::fprintf(out, ", submit batch %u, complete batch %u", cfg.submit_batch,
                     cfg.complete_batch);
    std::fprintf(out, "%s%s%s%s%s\n", cfg.direct ? ", direct" : ", buffered",
                 cfg.poll != PollMode::none
                     ? (std::string(", poll ") + std::string(to_string(cfg.poll))).c_str()
                     : "",
                 cfg.fixedbufs ? ", fixedbufs" : "", cfg.registerfiles ? ", registerfiles" : "",
                 cfg.verify ? ", verify" : "");
    std::fprintf(out, "target %s: %s on %s, %s, %llu of %llu bytes used%s\n", t.path.c_str(),
                 t.block_device ? "block device" : "file", t.device.c_str(),
                 t.created ? (t.keep ? "created (kept)" : "created (removed at exit)") : "existing",
                 static_cast<unsigned long long>(t.size),
                 static_cast<unsigned long long>(t.file_size),
                 t.created && t.fill_seconds > 0 ? ", filled with data first" : "");
    std::fprintf(out, "seed %llu\n", static_cast<unsigned long long>(seed));
    if (!cfg.direct && (cfg.compare || cfg.engine == EngineKind::libaio))
        std::fprintf(out, "note: without --direct, libaio does buffered I/O synchronously inside "
                          "io_submit (the queue depth is effectively 1); io_uring does not\n");
    std::fflush(out);
}

void print_live(std::FILE* out, const char* prefix, const SecondSample& s) {
    std::fprintf(out,
                 "%s[%7.2fs] read %9.0f IOPS %9.2f MiB/s | write %9.0f IOPS %9.2f MiB/s | "
                 "lat mean %9.2f us\n",
                 prefix, s.t_s, tools::per_second(s.read_ops, s.interval_s),
                 tools::mib(tools::per_second(s.read_bytes, s.interval_s)),
                 tools::per_second(s.write_ops, s.interval_s),
                 tools::mib(tools::per_second(s.write_bytes, s.interval_s)), s.lat_mean_ns / 1e3);
    std::fflush(out);
}

void print_text(std::FILE* out, const Config& cfg, const Results& r) {
    auto ull = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    std::fprintf(out, "\n=== Results (%s) ===\n", std::string(to_string(r.engine)).c_str());
    std::fprintf(out, "Total time:          %.6f s%s\n", r.elapsed_s,
                 r.interrupted ? " (interrupted)" : "");
    std::fprintf(out, "Total ops:           %llu\n", ull(r.total_ops()));
    std::fprintf(out, "Read ops:            %llu\n", ull(r.read.ops));
    std::fprintf(out, "Write ops:           %llu\n", ull(r.write.ops));
    std::fprintf(out, "Total bytes:         %llu (%.2f MiB)\n", ull(r.total_bytes()),
                 tools::mib(r.total_bytes()));
    std::fprintf(out, "Read bytes:          %llu (%.2f MiB)\n", ull(r.read.bytes),
                 tools::mib(r.read.bytes));
    std::fprintf(out, "Write bytes:         %llu (%.2f MiB)\n", ull(r.write.bytes),
                 tools::mib(r.write.bytes));
    std::fprintf(out, "Errors:              %llu\n", ull(r.errors));
    if (cfg.verify)
        std::fprintf(out, "Verify errors:       %llu (%llu blocks read and checked%s)\n",
                     ull(r.verify_errors), ull(r.read.ops),
                     r.stale_check ? ", generations of blocks written in this run too" : "");
    std::fprintf(out, "\n");
    for (auto& f : main_figures(r)) {
        std::string label = f.label == "IOPS"        ? "Average IOPS"
                            : f.label == "Bandwidth" ? "Average bandwidth"
                                                     : f.label;
        std::fprintf(out, "%-20s %s%s%s\n", (label + ":").c_str(),
                     tools::fixed(*f.value, f.decimals).c_str(), f.unit.empty() ? "" : " ",
                     f.unit.c_str());
    }
    std::fprintf(out, "(latency: submit to completion, per I/O, like fio's lat)\n");
    if (r.read.ops && r.write.ops) {
        for (const auto* d : {&r.read, &r.write}) {
            std::fprintf(out, "%-6s %llu ops, %.1f IOPS, %.2f MiB/s, latency mean %.2f",
                         d == &r.read ? "Read:" : "Write:", ull(d->ops),
                         tools::per_second(d->ops, r.elapsed_s),
                         tools::mib(tools::per_second(d->bytes, r.elapsed_s)),
                         d->lat.mean_ns() / 1e3);
            for (auto& p : kPcts)
                std::fprintf(out, " %s %.2f", p.name, d->lat.fio_percentile(p.p) / 1e3);
            std::fprintf(out, " us\n");
        }
    }
    if (cfg.cpu_counters) {
        std::fprintf(out, "\n=== CPU per I/O (benchmark threads, %s) ===\n",
                     r.counters.kernel_counted ? "user+kernel" : "user mode only");
        for (auto& f : cpu_figures(r)) {
            if (f.value)
                std::fprintf(out, "%-20s %s %s\n", (f.label + ":").c_str(),
                             tools::fixed(*f.value, f.decimals).c_str(), f.unit.c_str());
            else
                std::fprintf(out, "%-20s %s\n", (f.label + ":").c_str(), f.missing.c_str());
        }
        auto pf = process_figures(r);
        std::fprintf(out,
                     "%-20s %s ns per I/O, %s%% of one core (user %.3f s, sys %.3f s; whole "
                     "process incl. io_uring kernel workers)\n",
                     "process CPU:", pf[0].value ? tools::fixed(*pf[0].value, 1).c_str() : "-",
                     pf[1].value ? tools::fixed(*pf[1].value, 1).c_str() : "-", r.proc_user_s,
                     r.proc_sys_s);
    }
    std::fprintf(out, "=================\n");
    std::fflush(out);
}

void print_errors(std::FILE* err, const Results& r) {
    // After a fatal error (e.g. IOPOLL refused) the failed I/Os all say the same thing: the fatal
    // message alone is the clear one-line answer.
    if (r.fatal.empty())
        for (auto& e : r.error_samples)
            std::fprintf(err, "aio_bench: I/O error at offset %llu: %s\n",
                         static_cast<unsigned long long>(e.offset), e.what.c_str());
    if (r.fatal.empty() && r.errors > r.error_samples.size())
        std::fprintf(err, "aio_bench: %llu more I/O errors not shown\n",
                     static_cast<unsigned long long>(r.errors - r.error_samples.size()));
    for (auto& e : r.verify_samples)
        std::fprintf(err, "aio_bench: verify error at offset %llu: %s\n",
                     static_cast<unsigned long long>(e.offset), e.what.c_str());
    if (r.verify_errors > r.verify_samples.size())
        std::fprintf(err, "aio_bench: %llu more verify errors not shown\n",
                     static_cast<unsigned long long>(r.verify_errors - r.verify_samples.size()));
    std::fflush(err);
}

nlohmann::json config_json(const Config& cfg, const Target& t, uint64_t seed) {
    nlohmann::json c;
    c["file"] = cfg.file;
    c["engine"] = cfg.compare ? "compare" : std::string(to_string(cfg.engine));
    c["pattern"] = std::string(to_string(cfg.pattern));
    c["block_size"] = cfg.block_size;
    c["iodepth"] = cfg.depth;
    c["threads"] = cfg.threads;
    c["runtime_s"] = cfg.runtime_ns() ? nlohmann::json(cfg.runtime_s) : nlohmann::json(nullptr);
    c["ios"] = cfg.ios ? nlohmann::json(cfg.ios) : nlohmann::json(nullptr);
    c["direct"] = cfg.direct;
    c["poll"] = std::string(to_string(cfg.poll));
    c["verify"] = cfg.verify;
    c["rwmix_read"] =
        cfg.pattern == Pattern::rand_rw ? nlohmann::json(cfg.rwmix_read) : nlohmann::json(nullptr);
    c["cpu_counters"] = cfg.cpu_counters;
    c["submit_batch"] = cfg.submit_batch;
    c["complete_batch"] = cfg.complete_batch;
    c["fixedbufs"] = cfg.fixedbufs;
    c["registerfiles"] = cfg.registerfiles;
    c["seed"] = seed;
    nlohmann::json tj;
    tj["path"] = t.path;
    tj["created"] = t.created;
    tj["kept"] = t.created && t.keep;
    tj["block_device"] = t.block_device;
    tj["device"] = t.device;
    tj["fs_type"] = t.fs_type;
    tj["file_size"] = t.file_size;
    tj["size"] = t.size;
    tj["dio_align"] = t.dio_align;
    c["target"] = tj;
    return c;
}

nlohmann::json results_json(const Config& cfg, const Results& r) {
    nlohmann::json j;
    j["engine"] = std::string(to_string(r.engine));
    j["time_s"] = r.elapsed_s;
    j["ops"] = {{"total", r.total_ops()}, {"read", r.read.ops}, {"write", r.write.ops}};
    j["bytes"] = {{"total", r.total_bytes()}, {"read", r.read.bytes}, {"write", r.write.bytes}};
    j["errors"] = r.errors;
    j["verify_errors"] = r.verify_errors;
    j["iops"] = tools::per_second(r.total_ops(), r.elapsed_s);
    j["bandwidth_mib_s"] = tools::mib(tools::per_second(r.total_bytes(), r.elapsed_s));
    j["latency_ns"] = lat_json(r.all_lat());
    for (const auto* d : {&r.read, &r.write}) {
        nlohmann::json dj;
        dj["ops"] = d->ops;
        dj["bytes"] = d->bytes;
        dj["iops"] = tools::per_second(d->ops, r.elapsed_s);
        dj["bandwidth_mib_s"] = tools::mib(tools::per_second(d->bytes, r.elapsed_s));
        dj["latency_ns"] = lat_json(d->lat);
        j[d == &r.read ? "read" : "write"] = dj;
    }
    nlohmann::json cpu;
    for (auto& f : process_figures(r))
        cpu[f.key] = f.value ? nlohmann::json(*f.value) : nullptr;
    cpu["process_user_s"] = r.proc_user_s;
    cpu["process_sys_s"] = r.proc_sys_s;
    cpu["voluntary_context_switches"] = r.vol_ctxsw;
    cpu["involuntary_context_switches"] = r.invol_ctxsw;
    if (r.cpu_measured) {
        nlohmann::json unavailable = nlohmann::json::object();
        for (auto& f : cpu_figures(r)) {
            cpu[f.key] = f.value ? nlohmann::json(*f.value) : nullptr;
            if (!f.value) unavailable[f.key] = f.missing;
        }
        cpu["unavailable"] = unavailable;
        cpu["kernel_counted"] = r.counters.kernel_counted;
    }
    j["cpu"] = cpu;
    auto samples = [](const std::vector<ErrorSample>& v) {
        nlohmann::json a = nlohmann::json::array();
        for (auto& e : v)
            a.push_back({{"offset", e.offset}, {"error", e.what}});
        return a;
    };
    j["error_samples"] = samples(r.error_samples);
    j["verify_error_samples"] = samples(r.verify_samples);
    j["fatal"] = r.fatal.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.fatal);
    j["interrupted"] = r.interrupted;
    if (cfg.per_second) {
        nlohmann::json ps = nlohmann::json::array();
        for (auto& s : r.per_second)
            ps.push_back(
                {{"t_s", s.t_s},
                 {"read_iops", tools::per_second(s.read_ops, s.interval_s)},
                 {"write_iops", tools::per_second(s.write_ops, s.interval_s)},
                 {"read_mib_s", tools::mib(tools::per_second(s.read_bytes, s.interval_s))},
                 {"write_mib_s", tools::mib(tools::per_second(s.write_bytes, s.interval_s))},
                 {"lat_mean_ns", s.lat_mean_ns}});
        j["per_second"] = ps;
    }
    return j;
}

namespace {

std::vector<Figure> compare_figures(const Config& cfg, const Results& r) {
    auto f = main_figures(r);
    if (cfg.cpu_counters)
        for (auto& x : cpu_figures(r))
            f.push_back(x);
    for (auto& x : process_figures(r))
        f.push_back(x);
    return f;
}

std::optional<double> diff_pct(const Figure& a, const Figure& b) {
    if (!a.value || !b.value || *a.value == 0) return std::nullopt;
    return 100.0 * (*b.value - *a.value) / *a.value;
}

} // namespace

void print_compare(std::FILE* out, const Config& cfg, const Results& a, const Results& b) {
    auto fa = compare_figures(cfg, a), fb = compare_figures(cfg, b);
    std::fprintf(out, "\n=== Engine comparison (diff = io_uring vs libaio) ===\n");
    std::fprintf(out, "%-40s %14s %14s %9s\n", "figure", "libaio", "io_uring", "diff");
    for (size_t i = 0; i < fa.size(); ++i) {
        std::string label = fa[i].label;
        if (!fa[i].unit.empty()) {
            std::string u = fa[i].unit.substr(0, fa[i].unit.find(" ("));
            label += " (" + u + ")";
        }
        auto cell = [](const Figure& f) {
            return f.value ? tools::fixed(*f.value, f.decimals) : std::string("n/a");
        };
        auto d = diff_pct(fa[i], fb[i]);
        std::fprintf(out, "%-40s %14s %14s %9s\n", label.c_str(), cell(fa[i]).c_str(),
                     cell(fb[i]).c_str(), d ? (tools::fixed(*d, 1) + "%").c_str() : "-");
    }
    std::fprintf(out, "%-40s %14llu %14llu\n", "errors", static_cast<unsigned long long>(a.errors),
                 static_cast<unsigned long long>(b.errors));
    if (cfg.verify)
        std::fprintf(out, "%-40s %14llu %14llu\n", "verify errors",
                     static_cast<unsigned long long>(a.verify_errors),
                     static_cast<unsigned long long>(b.verify_errors));
    std::fprintf(out, "%-40s %14.6f %14.6f\n", "time (s)", a.elapsed_s, b.elapsed_s);
    if (cfg.cpu_counters) {
        for (auto& f : fa)
            if (!f.value && !f.missing.empty())
                std::fprintf(out, "%s: %s\n", f.label.c_str(), f.missing.c_str());
    }
    std::fflush(out);
}

nlohmann::json compare_json(const Config& cfg, const Target& t, uint64_t seed, const Results& a,
                            const Results& b) {
    nlohmann::json j;
    j["tool"] = "aio_bench";
    j["version"] = "1.0";
    j["mode"] = "compare";
    j["config"] = config_json(cfg, t, seed);
    j["libaio"] = results_json(cfg, a);
    j["io_uring"] = results_json(cfg, b);
    auto fa = compare_figures(cfg, a), fb = compare_figures(cfg, b);
    nlohmann::json d;
    for (size_t i = 0; i < fa.size(); ++i) {
        auto v = diff_pct(fa[i], fb[i]);
        d[fa[i].key] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    }
    j["diff_pct"] = d;
    return j;
}

} // namespace aiob
