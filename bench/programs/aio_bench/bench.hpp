// The benchmark run: one thread per -t, each with its own engine, keeping exactly -q I/Os in
// flight.
//
// Loop per thread (like fio with iodepth=q, iodepth_batch_complete_min=1):
//   prep q I/Os; then repeat { stamp the submit time of the fresh batch; submit it and wait for at
//   least one completion (one syscall on io_uring, io_submit + io_getevents on libaio); take the
//   completion time; account each completion; re-issue one I/O per completed slot }.
// Latency = completion time - submit time, both read once per batch with clock_gettime
// (CLOCK_MONOTONIC, vDSO): it spans the submit syscall and the wait, i.e. fio's "lat" (slat+clat).
// The run stops issuing at the deadline (-r), after --ios I/Os, on SIGINT/SIGTERM or on a fatal
// error, and then drains what is in flight; elapsed time runs from the common start to the last
// thread's drain.
#pragma once

#include "config.hpp"
#include "measure/histogram.hpp"
#include "perf_counters.hpp"
#include "target.hpp"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace aiob {

using galay::tools::LatencyHistogram;

struct DirStats {
    uint64_t ops = 0;
    uint64_t bytes = 0;
    LatencyHistogram lat;
    void merge(const DirStats& o) {
        ops += o.ops;
        bytes += o.bytes;
        lat.merge(o.lat);
    }
};

struct SecondSample {
    double t_s = 0; // end of the interval, seconds since start
    double interval_s = 0;
    uint64_t read_ops = 0, write_ops = 0, read_bytes = 0, write_bytes = 0;
    double lat_mean_ns = 0;
};

struct ErrorSample {
    uint64_t offset = 0;
    std::string what;
};

struct Results {
    EngineKind engine = EngineKind::libaio;
    double elapsed_s = 0;
    DirStats read, write;
    uint64_t errors = 0;                                    // failed or short I/Os
    uint64_t verify_errors = 0;                             // blocks read back wrong
    std::vector<ErrorSample> error_samples, verify_samples; // the first few of each
    std::string fatal;                                      // the run was aborted
    bool stale_check = false; // --verify also checked generations of blocks written in this run
    bool interrupted = false;

    bool cpu_measured = false;
    CounterValues counters; // sum over the benchmark threads
    double proc_user_s = 0; // getrusage(RUSAGE_SELF) over the run: whole process,
    double proc_sys_s = 0;  // including io_uring kernel workers
    uint64_t vol_ctxsw = 0, invol_ctxsw = 0;

    std::vector<SecondSample> per_second;

    uint64_t total_ops() const { return read.ops + write.ops; }
    uint64_t total_bytes() const { return read.bytes + write.bytes; }
    LatencyHistogram all_lat() const {
        LatencyHistogram h = read.lat;
        h.merge(write.lat);
        return h;
    }
};

// Set by the SIGINT/SIGTERM handler: stop issuing, drain, report.
extern std::atomic<bool> g_interrupted;

// Checks the per-thread layout (regions for sequential patterns and --verify) against the target;
// returns an error message for exit code 1.
std::string check_layout(const Config& cfg, const Target& t);

// live_line: called from the main thread once per second with the last interval (for --per-second
// text output); may be empty.
using LiveFn = void (*)(const SecondSample&, void* user);
Results run_benchmark(const Config& cfg, EngineKind engine, const Target& t, uint64_t seed,
                      LiveFn live = nullptr, void* live_user = nullptr);

/// Why this build cannot run `engine` (CMake left its library out: GALAY_WITH_AIO=OFF or
/// GALAY_WITH_URING=OFF), or null when it can.
const char* engine_missing(EngineKind engine) noexcept;

} // namespace aiob
