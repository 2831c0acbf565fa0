// aio_bench configuration: the command line, parsed and validated.
//
// Usage errors (a bad or missing flag) are reported as one line naming the flag and map to exit
// code 2; everything that depends on the target file is checked later (target.cpp, exit code 1).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace aiob {

enum class EngineKind { libaio, io_uring };
enum class Pattern { rand_read, rand_write, rand_rw, seq_read, seq_write };
enum class PollMode { none, iopoll, sqpoll };

std::string_view to_string(EngineKind e);
std::string_view to_string(Pattern p);
std::string_view to_string(PollMode m);

inline bool pattern_writes(Pattern p) {
    return p == Pattern::rand_write || p == Pattern::rand_rw || p == Pattern::seq_write;
}
inline bool pattern_reads(Pattern p) {
    return p == Pattern::rand_read || p == Pattern::rand_rw || p == Pattern::seq_read;
}
inline bool pattern_random(Pattern p) {
    return p == Pattern::rand_read || p == Pattern::rand_write || p == Pattern::rand_rw;
}

constexpr uint64_t kDefaultCreateSize = 256ull << 20;

struct Config {
    std::string file;
    EngineKind engine = EngineKind::libaio;
    Pattern pattern = Pattern::rand_read;
    unsigned depth = 32;
    unsigned threads = 1;
    double runtime_s = 30.0;
    bool runtime_set = false; // -r given explicitly (with --ios and no -r there is no time limit)
    uint32_t block_size = 4096;
    PollMode poll = PollMode::none;
    bool cpu_counters = false;
    bool direct = false;
    bool verify = false;
    uint64_t size = 0; // --size; 0 = not given
    unsigned rwmix_read = 50;
    bool json = false;
    bool per_second = false;
    bool allow_overwrite = false;
    bool keep = false;
    uint64_t ios = 0; // 0 = no I/O count limit
    bool compare = false;
    uint64_t seed = 0; // 0 = derive from the clock
    // Batching, as fio's iodepth_batch_submit and iodepth_batch_complete_max, with fio's defaults:
    // submit_batch: refilled I/Os are submitted every this many (1 = one syscall per I/O);
    // complete_batch: at most this many completions are taken per wait (1 = one at a time).
    // --batch sets both to iodepth: refills go out in one syscall, every ready completion is
    // reaped per wait (less CPU per I/O; on a virtio disk also a burstier queue, see README).
    unsigned submit_batch = 1;
    unsigned complete_batch = 1;
    // io_uring engine options, as fio's io_uring `fixedbufs` and `registerfiles`.
    bool fixedbufs = false;     // registered buffers: READ_FIXED / WRITE_FIXED
    bool registerfiles = false; // registered file: IOSQE_FIXED_FILE

    // The time limit in ns, or 0 for none (count-limited run).
    uint64_t runtime_ns() const;
};

struct UsageError {
    std::string message; // one line, names the flag
    int exit_code = 2;   // 0 for --help / --version (message is then the text to print)
};

// Parses a size: a plain byte count or a number with a binary suffix k/m/g/t (case-insensitive,
// optional trailing "b"/"ib": 4k = 4KiB = 4096). Rejects empty, zero-less garbage, overflow.
std::optional<uint64_t> parse_size(std::string_view s);

std::expected<Config, UsageError> parse_args(int argc, char** argv);

} // namespace aiob
