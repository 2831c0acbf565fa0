// bench_file_io: file I/O benchmark on galay-kernel, with the classic bench_file_io command line.
//
//   bench_file_io -w <workers> -n <ops per worker> -b <block size> -batch <n> -d <dir>
//                 [--backend io_uring|epoll] [--direct] [--prealloc fallocate|zero|none] [--json]
//                 [--fixed]
//
// Each worker (a coroutine; all on one scheduler thread) owns one file in <dir>. Write phase: all
// workers write their n blocks concurrently; read phase: all read them back, and every block is
// compared with what was written (the pattern encodes worker id and block index, so a misplaced
// block is caught too). With -batch N a worker queues N operations in an fs::Batch and submits them
// at once (one io_submit on epoll+libaio, one io_uring_enter on io_uring). The phases are timed
// separately with the steady clock (nanosecond resolution), and IOPS and throughput are computed
// from the exact durations. Every failed or short operation and every mismatching block is an
// error; errors make the exit code 1. Usage errors exit 2. The files are removed at exit (also on
// SIGINT/SIGTERM).
//
// Before the timed write phase each file is preallocated (untimed), by default with fallocate, as
// fio lays out the files of write jobs. `--prealloc none` (or --no-prealloc) makes the timed writes
// extend the files: ext4 and xfs cannot start such O_DIRECT writes without blocking, so
// epoll+libaio redoes them on its thread pool and io_uring on its workers. `--prealloc zero`
// writes the files with zeros first, so the timed writes overwrite written blocks (no
// unwritten-extent conversion at completion).
//
// `--fixed`: each worker's buffers are one fs::FixedBuffer, registered with the io_uring ring, and
// every read and write names a slice of it (IORING_OP_READ_FIXED / WRITE_FIXED). On epoll, and
// for workers whose registration the kernel refuses, the same memory with the plain operations;
// the report says how many workers got registered buffers.
#include "args/bench_file_io.hpp"
#include "common/fs_type.hpp"
#include "common/tool_support.hpp"
#include "measure/histogram.hpp"

#include <galay/galay.hpp>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace galay;
using Clock = std::chrono::steady_clock;

using tools::bench_file_io::Options;

// ---------------------------------------------------------------------------------------------
// Files: names, removal at exit, filesystem facts
// ---------------------------------------------------------------------------------------------

/// The benchmark's files; removed by the destructor and by the SIGINT/SIGTERM handler.
std::vector<std::string> g_paths;

void remove_files() {
    for (const std::string& p : g_paths)
        ::unlink(p.c_str());
}

extern "C" void on_signal(int sig) {
    for (const std::string& p : g_paths) // unlink is async-signal-safe; g_paths is not modified
        ::unlink(p.c_str());             // once the handler is installed
    ::_exit(128 + sig);
}

struct FilesGuard {
    ~FilesGuard() { remove_files(); }
};

// ---------------------------------------------------------------------------------------------
// Block contents
// ---------------------------------------------------------------------------------------------

std::uint64_t mix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/// Block `block` of worker `worker`: 64-bit words that depend on both and on their position.
void fill_block(std::span<std::byte> out, unsigned worker, std::uint64_t block) {
    const std::uint64_t h = mix64(static_cast<std::uint64_t>(worker) << 40 ^ block);
    std::size_t i = 0;
    for (std::uint64_t k = 0; i + 8 <= out.size(); i += 8, ++k) {
        const std::uint64_t v = h + k * 0x9E3779B97F4A7C15ull;
        std::memcpy(out.data() + i, &v, 8);
    }
    for (; i < out.size(); ++i)
        out[i] = static_cast<std::byte>(h >> (8 * (i % 8)));
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

struct Stats {
    std::uint64_t reads = 0, writes = 0;
    std::uint64_t bytes_read = 0, bytes_written = 0;
    std::uint64_t errors = 0;
    unsigned errors_printed = 0;
    tools::LatencyHistogram read_lat, write_lat;

    void error(unsigned worker, std::uint64_t block, const char* what, const std::string& why) {
        ++errors;
        if (errors_printed++ < 10)
            std::fprintf(stderr, "bench_file_io: worker %u block %llu: %s: %s\n", worker,
                         static_cast<unsigned long long>(block), what, why.c_str());
        else if (errors_printed == 11)
            std::fprintf(stderr, "bench_file_io: (further errors are counted, not printed)\n");
    }
};

struct Worker {
    unsigned id = 0;
    fs::File file;
    fs::AlignedBuffer arena;                    // the op buffers, one after the other
    std::optional<fs::FixedBuffer> fixed_arena; // instead of `arena` with --fixed
    std::vector<std::span<std::byte>> bufs;     // one per op in flight, in the arena
    std::vector<fs::FixedSlice> fixed_bufs;     // the same, for the fixed operations (--fixed)
    fs::AlignedBuffer expected;                 // the block a read should return

    detail::FileTransferAwaitable write_all(std::size_t j, std::uint64_t offset) {
        if (!fixed_bufs.empty()) return file.write_all_at(fixed_bufs[j], offset);
        return file.write_all_at(bufs[j], offset);
    }
    detail::FileTransferAwaitable read_exact(std::size_t j, std::uint64_t offset) {
        if (!fixed_bufs.empty()) return file.read_exact_at(fixed_bufs[j], offset);
        return file.read_exact_at(bufs[j], offset);
    }
};

std::uint64_t ns_since(Clock::time_point t) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count());
}

/// One completed write: count it or report it.
void account_write(Stats& st, const Worker& w, std::uint64_t block, const Result<std::size_t>& r,
                   std::size_t want, std::uint64_t lat_ns) {
    if (!r) return st.error(w.id, block, "write", r.error().message());
    if (*r != want) return st.error(w.id, block, "write", "short write");
    ++st.writes;
    st.bytes_written += *r;
    st.write_lat.record(lat_ns);
}

/// One completed read: count it, then compare its block with the expected contents.
void account_read(Stats& st, Worker& w, std::uint64_t block, const Result<std::size_t>& r,
                  std::span<const std::byte> got, std::uint64_t lat_ns) {
    if (!r) return st.error(w.id, block, "read", r.error().message());
    if (*r != got.size()) return st.error(w.id, block, "read", "short read");
    ++st.reads;
    st.bytes_read += *r;
    st.read_lat.record(lat_ns);
    fill_block(w.expected.span(), w.id, block);
    if (std::memcmp(got.data(), w.expected.data(), got.size()) != 0) {
        std::size_t at = 0;
        while (got[at] == w.expected.span()[at])
            ++at;
        st.error(w.id, block, "verify",
                 "data differs from what was written, from byte " + std::to_string(at));
    }
}

Task<void> write_phase(Worker& w, const Options& o, Stats& st) {
    fs::Batch batch(o.batch);
    for (std::uint64_t first = 0; first < o.ops; first += o.batch) {
        const std::size_t k =
            static_cast<std::size_t>(std::min<std::uint64_t>(o.batch, o.ops - first));
        for (std::size_t j = 0; j < k; ++j)
            fill_block(w.bufs[j], w.id, first + j);
        const auto t0 = Clock::now();
        if (o.batch == 1) {
            auto r = co_await w.write_all(0, first * o.block);
            account_write(st, w, first, r, o.block, ns_since(t0));
            continue;
        }
        batch.clear();
        for (std::size_t j = 0; j < k; ++j)
            if (w.fixed_bufs.empty())
                batch.write_all_at(w.file, w.bufs[j], (first + j) * o.block);
            else
                batch.write_all_at(w.file, w.fixed_bufs[j], (first + j) * o.block);
        (void)co_await batch.submit(); // per-op results below
        const std::uint64_t lat = ns_since(t0);
        for (std::size_t j = 0; j < k; ++j)
            account_write(st, w, first + j, batch.result(j), o.block, lat);
    }
}

Task<void> read_phase(Worker& w, const Options& o, Stats& st) {
    fs::Batch batch(o.batch);
    for (std::uint64_t first = 0; first < o.ops; first += o.batch) {
        const std::size_t k =
            static_cast<std::size_t>(std::min<std::uint64_t>(o.batch, o.ops - first));
        // Poison the buffers: a read that reports success without filling them must not pass
        // verification with the bytes of an earlier block.
        for (std::size_t j = 0; j < k; ++j)
            std::memset(w.bufs[j].data(), 0xA5, w.bufs[j].size());
        const auto t0 = Clock::now();
        if (o.batch == 1) {
            auto r = co_await w.read_exact(0, first * o.block);
            account_read(st, w, first, r, w.bufs[0], ns_since(t0));
            continue;
        }
        batch.clear();
        for (std::size_t j = 0; j < k; ++j)
            if (w.fixed_bufs.empty())
                batch.read_exact_at(w.file, w.bufs[j], (first + j) * o.block);
            else
                batch.read_exact_at(w.file, w.fixed_bufs[j], (first + j) * o.block);
        (void)co_await batch.submit();
        const std::uint64_t lat = ns_since(t0);
        for (std::size_t j = 0; j < k; ++j)
            account_read(st, w, first + j, batch.result(j), w.bufs[j], lat);
    }
}

/// Lay out a worker's file before the write phase (`mode` fallocate or zero). Sets `mode` to
/// what was done when fallocate is not supported.
Task<void> preallocate(Worker& w, std::uint64_t bytes, std::string& mode, Stats& st) {
    if (mode == "fallocate") {
        auto r = co_await w.file.fallocate(0, 0, bytes);
        if (r) co_return;
        if (r.error() == std::errc::operation_not_supported) {
            mode = "none (fallocate unsupported)"; // writes extend the file
            co_return;
        }
        co_return st.error(w.id, 0, "fallocate", r.error().message());
    }
    fs::AlignedBuffer zeros(std::min<std::uint64_t>(bytes, 1 << 20));
    for (std::uint64_t at = 0; at < bytes; at += zeros.size()) {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(zeros.size(), bytes - at));
        auto r = co_await w.file.write_all_at(zeros.span().first(n), at);
        if (!r) co_return st.error(w.id, at / zeros.size(), "zero-fill", r.error().message());
    }
    auto r = co_await w.file.fdatasync();
    if (!r) st.error(w.id, 0, "fdatasync", r.error().message());
}

template <class F>
Task<void> run_all(std::vector<Worker>& workers, F phase) {
    std::vector<Task<void>> tasks;
    tasks.reserve(workers.size());
    for (Worker& w : workers)
        tasks.push_back(phase(w));
    co_await when_all(std::move(tasks));
}

/// The --corrupt-block hook: flip the bits of the byte at `offset` through a separate (buffered)
/// descriptor and flush it, so that the read phase must notice.
bool corrupt(const std::string& path, std::uint64_t offset) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    unsigned char b = 0;
    bool ok = fd >= 0 && ::pread(fd, &b, 1, static_cast<off_t>(offset)) == 1;
    b = static_cast<unsigned char>(~b);
    ok = ok && ::pwrite(fd, &b, 1, static_cast<off_t>(offset)) == 1 && ::fsync(fd) == 0;
    if (!ok) std::fprintf(stderr, "bench_file_io: --corrupt-block: %s\n", std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return ok;
}

/// Why a worker's --fixed buffer is not registered, in words a user can act on.
std::string fixed_refusal(std::error_code e, std::size_t bytes) {
    if (e == std::errc::operation_not_supported) return "epoll: plain operations";
    std::string why = "the kernel refused: " + e.message();
    if (e == std::errc::not_enough_memory) {
        rlimit rl{};
        if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            why += "; registered buffers are locked memory (" + tools::human_bytes(bytes) +
                   " per worker) and RLIMIT_MEMLOCK is " + tools::human_bytes(rl.rlim_cur) +
                   ": raise it with `ulimit -l unlimited`";
    } else if (e == std::errc::no_buffer_space) {
        why += "; a ring holds at most 1024 registered buffers: lower -w";
    } else if (e == std::errc::invalid_argument) {
        why += "; the kernel needs to be 5.19 or later, and one buffer at most 1 GiB";
    }
    return why;
}

/// Usage errors that CLI11 cannot see: the directory. Prints and returns false.
bool check_dir(const Options& o, const std::uint64_t bytes_needed) {
    struct stat st {};
    if (::stat(o.dir.c_str(), &st) != 0) {
        std::fprintf(stderr, "bench_file_io: -d %s: %s\n", o.dir.c_str(), std::strerror(errno));
        return false;
    }
    if (!S_ISDIR(st.st_mode)) {
        std::fprintf(stderr, "bench_file_io: -d %s: not a directory\n", o.dir.c_str());
        return false;
    }
    if (::access(o.dir.c_str(), W_OK | X_OK) != 0) {
        std::fprintf(stderr, "bench_file_io: -d %s: cannot create files there: %s\n", o.dir.c_str(),
                     std::strerror(errno));
        return false;
    }
    // ramfs has no size limit and reports 0 free blocks: its files live in memory, so the
    // memory is what must be there.
    if (tools::fs_magic_of(o.dir.c_str()) == RAMFS_MAGIC) {
        if (bytes_needed > tools::memory_limit_bytes()) {
            std::fprintf(stderr,
                         "bench_file_io: -d %s is ramfs (the files live in memory): the run "
                         "writes %s but this machine has %s of memory; lower -w, -n or -b\n",
                         o.dir.c_str(), tools::human_bytes(bytes_needed).c_str(),
                         tools::human_bytes(tools::memory_limit_bytes()).c_str());
            return false;
        }
        return true;
    }
    struct statvfs vfs {};
    if (::statvfs(o.dir.c_str(), &vfs) == 0) {
        const std::uint64_t avail = tools::checked_mul({vfs.f_bavail, vfs.f_frsize})
                                        .value_or(std::numeric_limits<std::uint64_t>::max());
        if (avail < bytes_needed) {
            std::fprintf(stderr,
                         "bench_file_io: -d %s: the run writes %.1f MiB but only %.1f MiB are "
                         "free there; lower -w, -n or -b\n",
                         o.dir.c_str(), tools::mib(bytes_needed), tools::mib(avail));
            return false;
        }
    }
    return true;
}

/// Where the files go: the filesystem, by magic number and by name.
struct Place {
    unsigned long magic = 0;
    std::string fs_name;
};

Place place_of(const Options& o) {
    const unsigned long magic = tools::fs_magic_of(o.dir.c_str()).value_or(0);
    return Place{magic, tools::fs_type_name(magic)};
}

/// Create (and open) every worker's file; the signal handler removes them from then on. The exit
/// code when one cannot be used: 2 where the user must change a flag or -d, else 1.
std::optional<int> open_files(const Options& o, const Place& where, std::vector<Worker>& workers,
                              std::size_t& block_align) {
    for (unsigned i = 0; i < o.workers; ++i)
        g_paths.push_back(o.dir + "/bench_file_io." + std::to_string(::getpid()) + "." +
                          std::to_string(i) + ".dat");
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const fs::OpenOptions open_opts{.read = true,
                                    .write = true,
                                    .create = true,
                                    .truncate = true,
                                    .direct = o.direct,
                                    .mode = 0600};
    for (unsigned i = 0; i < o.workers; ++i) {
        Worker& w = workers[i];
        w.id = i;
        auto f = fs::File::open(g_paths[i], open_opts);
        if (!f) {
            if (f.error() == errc::direct_io_unsupported)
                std::fprintf(stderr,
                             "bench_file_io: --direct: -d %s is on %s, which does not support "
                             "O_DIRECT; use a directory on a disk filesystem, e.g. -d /var/tmp\n",
                             o.dir.c_str(), where.fs_name.c_str());
            else
                std::fprintf(stderr, "bench_file_io: cannot create %s\n",
                             fs::describe_error(g_paths[i], f.error()).c_str());
            return f.error() == errc::direct_io_unsupported ? 2 : 1;
        }
        w.file = std::move(*f);
        block_align = std::max(w.file.logical_block_size(), std::size_t{512});
        if (o.direct && o.block % block_align != 0) {
            std::fprintf(stderr,
                         "bench_file_io: -b %zu: O_DIRECT needs a multiple of the logical block "
                         "size of %s (%zu bytes)\n",
                         o.block, o.dir.c_str(), block_align);
            return 2;
        }
        w.expected = fs::AlignedBuffer(o.block);
    }
    return std::nullopt;
}

/// --fixed: how many workers got registered buffers, and why the others did not.
struct FixedOutcome {
    unsigned registered = 0;
    std::string unregistered_why; // empty: all registered (or no --fixed)
};

/// One buffer per op in flight, in one allocation per worker, created on the scheduler's thread
/// so that --fixed can register it with the ring.
FixedOutcome make_buffers(Scheduler& sched, const Options& o, std::vector<Worker>& workers,
                          std::size_t block_align) {
    const std::size_t buf_align = std::max(block_align, fs::AlignedBuffer::kDefaultAlignment);
    const std::size_t stride = (o.block + buf_align - 1) / buf_align * buf_align;
    FixedOutcome fixed;
    std::error_code refused; // why the first unregistered arena was refused
    if (o.fixed)
        sched.block_on([&]() -> Task<void> {
            for (Worker& w : workers) {
                w.fixed_arena.emplace(stride * o.batch, buf_align);
                fixed.registered += w.fixed_arena->registered();
                if (!w.fixed_arena->registered() && !refused)
                    refused = w.fixed_arena->registration_error();
            }
            co_return;
        }());
    if (o.fixed && fixed.registered < o.workers)
        fixed.unregistered_why = fixed_refusal(refused, stride * o.batch);
    if (!fixed.unregistered_why.empty() && sched.backend() != Backend::epoll)
        std::fprintf(stderr, "bench_file_io: --fixed: %u of %u workers use plain buffers: %s\n",
                     o.workers - fixed.registered, o.workers, fixed.unregistered_why.c_str());
    for (Worker& w : workers) {
        if (!o.fixed) w.arena = fs::AlignedBuffer(stride * o.batch, buf_align);
        std::byte* base = o.fixed ? w.fixed_arena->data() : w.arena.data();
        for (unsigned j = 0; j < o.batch; ++j) {
            w.bufs.emplace_back(base + j * stride, o.block);
            if (o.fixed) w.fixed_bufs.push_back(w.fixed_arena->slice(j * stride, o.block));
        }
    }
    return fixed;
}

/// The timed phases' durations in seconds (the --corrupt-block pause between them excluded).
struct Durations {
    double write_s = 0, read_s = 0, total_s = 0;
};

/// Preallocate (untimed), write, (--corrupt-block), read back and verify. Nullopt when the
/// --corrupt-block hook failed.
std::optional<Durations> run_phases(Scheduler& sched, const Options& o,
                                    std::vector<Worker>& workers, std::string& prealloc,
                                    Stats& st) {
    const std::uint64_t file_bytes = *o.file_bytes(); // checked for overflow by parse_args
    if (o.prealloc != "none")
        sched.block_on(
            run_all(workers, [&](Worker& w) { return preallocate(w, file_bytes, prealloc, st); }));

    const auto t0 = Clock::now();
    sched.block_on(run_all(workers, [&](Worker& w) { return write_phase(w, o, st); }));
    const auto t1 = Clock::now();
    if (o.corrupt_block && *o.corrupt_block < o.ops &&
        !corrupt(g_paths[0], *o.corrupt_block * o.block))
        return std::nullopt;
    const auto t1r = Clock::now();
    sched.block_on(run_all(workers, [&](Worker& w) { return read_phase(w, o, st); }));
    const auto t2 = Clock::now();
    return Durations{tools::seconds_of(t1 - t0), tools::seconds_of(t2 - t1r),
                     tools::seconds_of(t2 - t0 - (t1r - t1))};
}

/// What a run measured, ready to print.
struct Report {
    const Options& o;
    std::string backend_name;
    std::string backend_label; // with how epoll does files
    Place where;
    FixedOutcome fixed;
    std::string prealloc;
    Durations d;
    const Stats& st;

    double read_iops() const { return tools::per_second(double(st.reads), d.read_s); }
    double write_iops() const { return tools::per_second(double(st.writes), d.write_s); }
    double read_mibps() const { return tools::per_second(tools::mib(st.bytes_read), d.read_s); }
    double write_mibps() const {
        return tools::per_second(tools::mib(st.bytes_written), d.write_s);
    }
};

double us(const tools::LatencyHistogram& h, double q) {
    return double(h.percentile_ns(q)) / 1000.0;
}

nlohmann::json latency_json(const tools::LatencyHistogram& h) {
    return nlohmann::json{{"mean", h.mean_ns() / 1000.0}, {"p50", us(h, 0.50)},
                          {"p95", us(h, 0.95)},           {"p99", us(h, 0.99)},
                          {"p999", us(h, 0.999)},         {"max", double(h.max_ns()) / 1000.0}};
}

void print_json(const Report& r) {
    const Options& o = r.o;
    const Stats& st = r.st;
    nlohmann::json j = {
        {"tool", "bench_file_io"},
        {"backend", r.backend_name},
        {"dir", o.dir},
        {"fs_type", r.where.fs_name},
        {"workers", o.workers},
        {"ops_per_worker", o.ops},
        {"block_size", o.block},
        {"batch", o.batch},
        {"direct", o.direct},
        {"fixed", o.fixed},
        {"fixed_registered_workers", r.fixed.registered},
        {"fixed_unregistered_reason", r.fixed.unregistered_why.empty()
                                          ? nlohmann::json(nullptr)
                                          : nlohmann::json(r.fixed.unregistered_why)},
        {"prealloc", r.prealloc},
        {"duration_s", r.d.total_s},
        {"write_duration_s", r.d.write_s},
        {"read_duration_s", r.d.read_s},
        {"reads", st.reads},
        {"writes", st.writes},
        {"bytes_read", st.bytes_read},
        {"bytes_written", st.bytes_written},
        {"read_iops", r.read_iops()},
        {"write_iops", r.write_iops()},
        {"read_mibps", r.read_mibps()},
        {"write_mibps", r.write_mibps()},
        {"read_latency_us", latency_json(st.read_lat)},
        {"write_latency_us", latency_json(st.write_lat)},
        {"errors", st.errors},
    };
    std::printf("%s\n", j.dump().c_str());
}

void print_text_setup(const Report& r) {
    const Options& o = r.o;
    const std::string& why = r.fixed.unregistered_why;
    std::printf("=== bench_file_io ===\n");
    std::printf("Backend: %s\n", r.backend_label.c_str());
    std::printf("Directory: %s (%s)\n", o.dir.c_str(), r.where.fs_name.c_str());
    std::printf("Workers: %u\n", o.workers);
    std::printf("Operations per worker: %s writes + %s reads\n", tools::with_commas(o.ops).c_str(),
                tools::with_commas(o.ops).c_str());
    std::printf("Block size: %zu bytes\n", o.block);
    std::printf("Batch size: %u\n", o.batch);
    std::printf("O_DIRECT: %s\n", o.direct ? "yes" : "no");
    if (o.fixed)
        std::printf("Fixed buffers: registered for %u of %u workers%s%s%s\n", r.fixed.registered,
                    o.workers, why.empty() ? "" : " (", why.c_str(), why.empty() ? "" : ")");
    std::printf("Preallocation: %s\n", r.prealloc.c_str());
    std::printf("Total operations: %s (%s reads + %s writes)\n\n",
                tools::with_commas(o.ops * o.workers * 2).c_str(),
                tools::with_commas(o.ops * o.workers).c_str(),
                tools::with_commas(o.ops * o.workers).c_str());
}

void print_text_figures(const Report& r) {
    const Stats& st = r.st;
    std::printf("Total duration:     %.6f s (write phase %.6f s, read phase %.6f s)\n", r.d.total_s,
                r.d.write_s, r.d.read_s);
    std::printf("Total reads:        %s\n", tools::with_commas(st.reads).c_str());
    std::printf("Total writes:       %s\n", tools::with_commas(st.writes).c_str());
    std::printf("Data read:          %.3f MiB\n", tools::mib(st.bytes_read));
    std::printf("Data written:       %.3f MiB\n", tools::mib(st.bytes_written));
    std::printf("Read IOPS:          %s\n",
                tools::with_commas(static_cast<std::uint64_t>(r.read_iops() + 0.5)).c_str());
    std::printf("Write IOPS:         %s\n",
                tools::with_commas(static_cast<std::uint64_t>(r.write_iops() + 0.5)).c_str());
    std::printf("Read throughput:    %.2f MiB/s\n", r.read_mibps());
    std::printf("Write throughput:   %.2f MiB/s\n", r.write_mibps());
    const char* per = r.o.batch > 1 ? " (per batch)" : "";
    std::printf("Read latency%s (us):  p50 %.1f | p99 %.1f | p99.9 %.1f | max %.1f\n", per,
                us(st.read_lat, 0.5), us(st.read_lat, 0.99), us(st.read_lat, 0.999),
                double(st.read_lat.max_ns()) / 1000.0);
    std::printf("Write latency%s (us): p50 %.1f | p99 %.1f | p99.9 %.1f | max %.1f\n", per,
                us(st.write_lat, 0.5), us(st.write_lat, 0.99), us(st.write_lat, 0.999),
                double(st.write_lat.max_ns()) / 1000.0);
    std::printf("Errors:             %s\n", tools::with_commas(st.errors).c_str());
}

} // namespace

int run(const Options& o) {
    if (!check_dir(o, *o.total_bytes())) return 2; // (checked for overflow by parse_args)
    const Place where = place_of(o);

    std::optional<Scheduler> sched;
    if (!tools::start_scheduler(sched, o.backend, "bench_file_io")) return 1;

    std::vector<Worker> workers(o.workers);
    FilesGuard guard;
    std::size_t block_align = 0;
    if (auto code = open_files(o, where, workers, block_align)) return *code;
    const FixedOutcome fixed = make_buffers(*sched, o, workers, block_align);
    if (o.direct && where.magic == TMPFS_MAGIC)
        std::fprintf(stderr,
                     "bench_file_io: note: -d %s is tmpfs: it accepts O_DIRECT but the data stays "
                     "in memory, so this measures memory copies, not a device; use -d /var/tmp "
                     "to measure a disk\n",
                     o.dir.c_str());

    Stats st;
    std::string prealloc = o.prealloc;
    const std::optional<Durations> d = run_phases(*sched, o, workers, prealloc, st);
    if (!d) return 1;

    const std::string epoll_files =
        o.direct ? " (O_DIRECT files: libaio)" : " (buffered files: thread pool)";
    const Report r{o,
                   sched->backend_name(),
                   std::string(sched->backend_name()) +
                       (sched->backend() == Backend::epoll ? epoll_files : ""),
                   where,
                   fixed,
                   prealloc,
                   *d,
                   st};
    if (o.json) {
        print_json(r);
    } else {
        print_text_setup(r);
        print_text_figures(r);
    }
    if (st.errors > 0) {
        tools::print_error_count("bench_file_io", st.errors);
        return 1;
    }
    return 0;
}

int main(int argc, char** argv) {
    auto parsed = tools::bench_file_io::parse_args(tools::args_from(argc, argv));
    if (!parsed) return tools::print_exit(parsed.error());
    try {
        return run(*parsed);
    } catch (const std::bad_alloc&) { // the memory check passed, but the machine is short now
        remove_files();
        std::fprintf(stderr, "bench_file_io: out of memory (-w x --batch x -b buffers)\n");
        return 1;
    }
}
