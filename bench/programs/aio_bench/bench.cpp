#include "bench.hpp"

#include "engine.hpp"
#if AIO_BENCH_WITH_LIBAIO // (GALAY_WITH_AIO)
#include "libaio_engine.hpp"
#endif
#if AIO_BENCH_WITH_URING // (GALAY_WITH_URING)
#include "uring_engine.hpp"
#endif
#include "verify.hpp"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

namespace aiob {

std::atomic<bool> g_interrupted{false};

namespace {

inline uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// xoshiro256** seeded through splitmix64: a few ns per number, per thread.
class Rng {
public:
    explicit Rng(uint64_t seed) {
        for (auto& w : s_) {
            seed += 0x9e3779b97f4a7c15ull;
            uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            w = z ^ (z >> 31);
        }
    }
    uint64_t next() {
        uint64_t r = rotl(s_[1] * 5, 7) * 9;
        uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return r;
    }
    // Uniform in [0, n) (Lemire's multiply-shift; the bias is < n / 2^64).
    uint64_t below(uint64_t n) {
        return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
    }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

constexpr size_t kMaxSamples = 20;

// What the main thread samples once per second: cumulative totals, written by one worker.
struct alignas(64) Live {
    std::atomic<uint64_t> rops{0}, wops{0}, rbytes{0}, wbytes{0}, lat_sum{0}, lat_n{0};
};

struct Shared {
    const Config& cfg;
    const Target& target;
    uint64_t seed;
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    std::atomic<bool> stop{false}; // a thread hit a fatal error: everyone stops
    std::atomic<unsigned> done{0};
    uint64_t start_ns = 0;
};

struct Worker {
    unsigned id = 0;
    uint64_t ios_limit = 0; // 0 = unlimited
    bool idle = false;      // --ios smaller than -t: this thread has nothing to do
    uint64_t region_start = 0, region_blocks = 0; // in blocks
    DirStats read, write;
    uint64_t errors = 0, verify_errors = 0;
    std::vector<ErrorSample> error_samples, verify_samples;
    std::string fatal;
    bool stale_check = false;
    CounterValues counters;
    uint64_t end_ns = 0;
    Live live;
};

/// One worker thread's I/O loop over engine E: keeps -q I/Os in flight until the time or I/O
/// limit, accounting (and with --verify checking) every completion. The engine and the buffers
/// are the caller's (run_worker): they are set up before and outlive it.
template <class E>
class IoLoop {
public:
    IoLoop(Shared& sh, Worker& w, E& eng, unsigned char* bufs, size_t stride)
        : sh_(sh)
        , cfg_(sh.cfg)
        , w_(w)
        , eng_(eng)
        , bufs_(bufs)
        , stride_(stride)
        , bs_(cfg_.block_size)
        , q_(cfg_.depth)
        , verify_(cfg_.verify)
        , writes_(pattern_writes(cfg_.pattern))
        , random_(pattern_random(cfg_.pattern))
        , guard_(verify_ && writes_) // no two in-flight I/Os on one block
        , rng_(sh.seed ^ (0xa0761d6478bd642full * (w.id + 1)))
        , slots_(q_)
        , comps_(q_)
        , limit_(w.ios_limit ? w.ios_limit : UINT64_MAX)
        , iopoll_(cfg_.poll == PollMode::iopoll && cfg_.engine == EngineKind::io_uring)
        , submit_batch_(std::clamp(cfg_.submit_batch, 1u, q_))
        , complete_batch_(std::clamp(cfg_.complete_batch, 1u, q_)) {
        // Write data: random bytes once (not compressible or dedupable), or the verify stamp per
        // write.
        for (size_t i = 0; i < stride_ * q_; i += 8) {
            uint64_t x = rng_.next();
            std::memcpy(bufs_ + i, &x, 8);
        }
        fresh_.reserve(q_);
        if (guard_) {
            busy_.assign((w.region_blocks + 63) / 64, 0);
            if (w.region_blocks <= (uint64_t{1} << 24)) {
                gen_map_.assign(w.region_blocks, 0);
                w.stale_check = true;
            }
        }
    }

    /// From the start signal to the last completion.
    void run() {
        const uint64_t rt = cfg_.runtime_ns();
        const uint64_t deadline = rt ? sh_.start_ns + rt : UINT64_MAX;
        bool stopping = sh_.stop.load();

        for (unsigned s = 0; s < q_ && issued_ < limit_ && !stopping; ++s) {
            issue(s);
            if (fresh_.size() >= submit_batch_ && s + 1 < q_) flush();
        }

        while (eng_.in_flight() > 0) {
            stamp_fresh(now_ns());
            int n = eng_.submit_and_reap(1, comps_.data(), complete_batch_);
            const uint64_t tc = now_ns();
            if (n < 0) {
                w_.fatal = std::string(to_string(cfg_.engine)) +
                           " engine failed while waiting for completions: " + std::strerror(-n);
                sh_.stop.store(true);
                break;
            }
            for (int i = 0; i < n; ++i)
                complete(comps_[i], tc);
            publish_live();

            if (!stopping && (tc >= deadline || sh_.stop.load(std::memory_order_relaxed) ||
                              g_interrupted.load(std::memory_order_relaxed)))
                stopping = true;
            if (!stopping)
                for (int i = 0; i < n && issued_ < limit_; ++i) {
                    issue(comps_[i].slot);
                    if (fresh_.size() >= submit_batch_ && i + 1 < n) flush();
                }
        }
    }

private:
    struct Slot {
        uint64_t block = 0;
        uint64_t submit_ns = 0;
        uint64_t gen = 0;
        bool write = false;
    };

    /// The next block of this thread's region for slot `s` (random or sequential; with the guard,
    /// one no other in-flight I/O uses), prepped in the engine.
    void issue(uint32_t s) {
        Slot& sl = slots_[s];
        bool wr;
        if (cfg_.pattern == Pattern::rand_rw)
            wr = ((rng_.next() >> 32) * 100 >> 32) >= cfg_.rwmix_read;
        else
            wr = writes_;
        uint64_t rel;
        for (;;) {
            if (random_)
                rel = rng_.below(w_.region_blocks);
            else {
                rel = seq_cursor_;
                if (++seq_cursor_ == w_.region_blocks) seq_cursor_ = 0;
            }
            if (!guard_ || !(busy_[rel >> 6] & (uint64_t{1} << (rel & 63)))) break;
        }
        if (guard_) busy_[rel >> 6] |= uint64_t{1} << (rel & 63);
        sl.block = w_.region_start + rel;
        sl.write = wr;
        unsigned char* buf = bufs_ + size_t{s} * stride_;
        const uint64_t off = sl.block * bs_;
        if (verify_ && wr) {
            sl.gen = (uint64_t{w_.id + 1} << 40) | ++write_count_;
            stamp_block(buf, bs_, off, sl.gen, sh_.seed);
        }
        eng_.prep(s, wr, buf, bs_, off);
        fresh_.push_back(s);
        ++issued_;
    }

    /// The prepped I/Os leave now, at `ts`.
    void stamp_fresh(uint64_t ts) {
        for (uint32_t s : fresh_)
            slots_[s].submit_ns = ts;
        fresh_.clear();
    }

    /// Submits what is prepped now (no reaping); the loop submits the rest with its wait.
    void flush() {
        stamp_fresh(now_ns());
        eng_.submit_and_reap(0, comps_.data(), 0);
    }

    /// One completion, reaped at `tc`.
    void complete(const Completion& c, uint64_t tc) {
        Slot& sl = slots_[c.slot];
        const uint64_t off = sl.block * bs_;
        const uint64_t rel = sl.block - w_.region_start;
        if (c.res == static_cast<int32_t>(bs_))
            completed_whole(c, sl, tc - sl.submit_ns, off, rel);
        else
            failed(c, sl, off, rel);
        if (guard_) busy_[rel >> 6] &= ~(uint64_t{1} << (rel & 63));
    }

    void completed_whole(const Completion& c, const Slot& sl, uint64_t lat, uint64_t off,
                         uint64_t rel) {
        lat_sum_ += lat;
        ++lat_n_;
        if (sl.write)
            ++wops_, wbytes_ += bs_;
        else
            ++rops_, rbytes_ += bs_;
        if (sl.write) {
            ++w_.write.ops, w_.write.bytes += bs_, w_.write.lat.record(lat);
            if (!gen_map_.empty()) gen_map_[rel] = sl.gen;
        } else {
            ++w_.read.ops, w_.read.bytes += bs_, w_.read.lat.record(lat);
            if (verify_) check_read(c, off, rel);
        }
    }

    /// --verify: the block read must carry the stamp of the last write this thread completed there.
    void check_read(const Completion& c, uint64_t off, uint64_t rel) {
        uint64_t expect = gen_map_.empty() ? 0 : gen_map_[rel];
        auto f = check_block(bufs_ + size_t{c.slot} * stride_, bs_, off, expect);
        if (!f) return;
        ++w_.verify_errors;
        if (w_.verify_samples.size() >= kMaxSamples) return;
        std::string what = f->reason;
        if (f->bad_sectors > 1 || f->sector_offset != off)
            what += " (first bad sector at " + std::to_string(f->sector_offset) + ", " +
                    std::to_string(f->bad_sectors) + " of " + std::to_string(bs_ / kSectorSize) +
                    " sectors bad)";
        w_.verify_samples.push_back(ErrorSample{off, std::move(what)});
    }

    /// A failed or short I/O. IOPOLL refused by the device stops every thread.
    void failed(const Completion& c, const Slot& sl, uint64_t off, uint64_t rel) {
        const char* op = sl.write ? "write" : "read";
        if (c.res < 0) {
            std::string what = std::string(op) + " failed: " + std::strerror(-c.res);
            if (c.res == -EINVAL && cfg_.direct)
                what += " (O_DIRECT: block size, offset or buffer not aligned for the "
                        "device?)";
            if (iopoll_ && (c.res == -EOPNOTSUPP || c.res == -EINVAL)) {
                const Target& t = sh_.target;
                if (w_.fatal.empty())
                    w_.fatal = "IOPOLL not supported by " + t.path + "'s device (" + t.device +
                               ", " + t.fs_type + "): the I/O returned " + std::strerror(-c.res) +
                               "; polled I/O needs a driver with poll queues (e.g. nvme "
                               "poll_queues=N). Try --poll-mode sqpoll or drop -P";
                sh_.stop.store(true);
            }
            add_error(off, std::move(what));
        } else {
            add_error(off, "short " + std::string(op) + ": " + std::to_string(c.res) + " of " +
                               std::to_string(bs_) + " bytes");
        }
        if (!gen_map_.empty() && sl.write) gen_map_[rel] = 0; // content now unknown
    }

    void add_error(uint64_t off, std::string what) {
        ++w_.errors;
        if (w_.error_samples.size() < kMaxSamples)
            w_.error_samples.push_back(ErrorSample{off, std::move(what)});
    }

    /// The running totals the main thread samples once per second.
    void publish_live() {
        w_.live.rops.store(rops_, std::memory_order_relaxed);
        w_.live.wops.store(wops_, std::memory_order_relaxed);
        w_.live.rbytes.store(rbytes_, std::memory_order_relaxed);
        w_.live.wbytes.store(wbytes_, std::memory_order_relaxed);
        w_.live.lat_sum.store(lat_sum_, std::memory_order_relaxed);
        w_.live.lat_n.store(lat_n_, std::memory_order_relaxed);
    }

    Shared& sh_;
    const Config& cfg_;
    Worker& w_;
    E& eng_;
    unsigned char* const bufs_;
    const size_t stride_;
    const uint32_t bs_;
    const unsigned q_;
    const bool verify_, writes_, random_, guard_;
    Rng rng_;
    std::vector<Slot> slots_;
    std::vector<Completion> comps_;
    std::vector<uint32_t> fresh_;   // prepped, not yet submitted
    std::vector<uint64_t> gen_map_; // last generation written per block of this thread's region
    std::vector<uint64_t> busy_;    // bitmap of in-flight blocks (region-relative)
    const uint64_t limit_;
    const bool iopoll_;
    const unsigned submit_batch_, complete_batch_;
    uint64_t seq_cursor_ = 0, issued_ = 0, write_count_ = 0;
    uint64_t rops_ = 0, wops_ = 0, rbytes_ = 0, wbytes_ = 0, lat_sum_ = 0, lat_n_ = 0;
};

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};

template <class E>
void run_worker(Shared& sh, Worker& w) {
    const Config& cfg = sh.cfg;
    const unsigned q = cfg.depth;

    ThreadCounters pc;
    if (cfg.cpu_counters) pc.open(); // before the ring exists

    auto fail_setup = [&](std::string msg) {
        w.fatal = std::move(msg);
        sh.stop.store(true);
        sh.ready.fetch_add(1);
        sh.done.fetch_add(1);
    };

    // The buffers first: the engine may register them, and drains in-flight I/O into them when it
    // is destroyed, so they must outlive it.
    const size_t stride = (cfg.block_size + 4095) & ~size_t{4095};
    void* mem = nullptr;
    if (int e = posix_memalign(&mem, 4096, stride * q); e != 0)
        return fail_setup("posix_memalign(" + std::to_string(stride * q) +
                          "): " + std::strerror(e));
    std::unique_ptr<void, FreeDeleter> mem_owner(mem);
    auto* bufs = static_cast<unsigned char*>(mem);

    E eng;
    EngineSetup setup{sh.target.fd, q, cfg.poll, sh.target.path};
    setup.bufs = bufs;
    setup.stride = stride;
    setup.fixed_bufs = cfg.fixedbufs;
    setup.register_files = cfg.registerfiles;
    if (auto r = eng.init(setup); !r) return fail_setup(r.error());
    IoLoop<E> loop(sh, w, eng, bufs, stride);

    sh.ready.fetch_add(1);
    while (!sh.go.load(std::memory_order_acquire))
        std::this_thread::yield();
    if (cfg.cpu_counters) pc.enable();
    loop.run();
    if (cfg.cpu_counters) {
        pc.disable();
        w.counters = pc.read();
    }
    w.end_ns = now_ns();
    sh.done.fetch_add(1);
}

} // namespace

std::string check_layout(const Config& cfg, const Target& t) {
    const uint64_t nblocks = t.size / cfg.block_size;
    const bool partition = !pattern_random(cfg.pattern) || cfg.verify;
    if (partition && nblocks / cfg.threads == 0)
        return "-f " + t.path + ": " + std::to_string(nblocks) + " block(s) of " +
               std::to_string(cfg.block_size) + " bytes cannot be split across " +
               std::to_string(cfg.threads) + " threads; use a bigger --size or fewer -t";
    if (cfg.verify && pattern_writes(cfg.pattern) && nblocks / cfg.threads <= cfg.depth)
        return "--verify: each thread needs more than -q " + std::to_string(cfg.depth) +
               " blocks of its own (has " + std::to_string(nblocks / cfg.threads) +
               ") so that no two in-flight writes hit one block; use a bigger --size or lower "
               "-q/-t";
    return {};
}

const char* engine_missing(EngineKind engine) noexcept {
    if (engine == EngineKind::libaio && !AIO_BENCH_WITH_LIBAIO)
        return "this aio_bench was built without libaio (GALAY_WITH_AIO=OFF)";
    if (engine == EngineKind::io_uring && !AIO_BENCH_WITH_URING)
        return "this aio_bench was built without io_uring (GALAY_WITH_URING=OFF)";
    return nullptr;
}

Results run_benchmark(const Config& cfg, EngineKind engine, const Target& t, uint64_t seed,
                      LiveFn live, void* live_user) {
    Config c = cfg;
    c.engine = engine;
    Results res;
    res.engine = engine;
    if (const char* missing = engine_missing(engine)) {
        res.fatal = missing;
        return res;
    }

    Shared sh{c, t, seed};
    const unsigned nt = c.threads;
    std::vector<std::unique_ptr<Worker>> workers;
    const uint64_t nblocks = t.size / c.block_size;
    const bool partition = !pattern_random(c.pattern) || c.verify;
    const uint64_t per = nblocks / nt;
    for (unsigned i = 0; i < nt; ++i) {
        auto w = std::make_unique<Worker>();
        w->id = i;
        if (c.ios) {
            w->ios_limit = c.ios / nt + (i < c.ios % nt ? 1 : 0);
            w->idle = w->ios_limit == 0;
        }
        if (partition) {
            w->region_start = i * per;
            w->region_blocks = (i + 1 == nt) ? nblocks - i * per : per;
        } else {
            w->region_start = 0;
            w->region_blocks = nblocks;
        }
        workers.push_back(std::move(w));
    }

    // Workers do not take SIGINT/SIGTERM: the main thread does, and they see g_interrupted.
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    std::vector<std::thread> threads;
    threads.reserve(nt);
    for (auto& wp : workers) {
        Worker& w = *wp;
        if (w.idle) {
            sh.ready.fetch_add(1);
            sh.done.fetch_add(1);
            continue;
        }
        if (engine == EngineKind::libaio) {
#if AIO_BENCH_WITH_LIBAIO
            threads.emplace_back([&sh, &w] { run_worker<LibaioEngine>(sh, w); });
#endif
        } else {
#if AIO_BENCH_WITH_URING
            threads.emplace_back([&sh, &w] { run_worker<UringEngine>(sh, w); });
#endif
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);

    while (sh.ready.load() < nt)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    rusage ru0{};
    getrusage(RUSAGE_SELF, &ru0);
    sh.start_ns = now_ns();
    sh.go.store(true, std::memory_order_release);

    // Once a second: sample the live counters (for --per-second).
    const bool sample = c.per_second;
    uint64_t next_tick = sh.start_ns + 1000000000ull, last_tick = sh.start_ns;
    SecondSample prev{};
    uint64_t prev_lat_sum = 0, prev_lat_n = 0;
    while (sh.done.load() < nt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        uint64_t now = now_ns();
        if (sample && now >= next_tick) {
            SecondSample cur{};
            uint64_t ls = 0, ln = 0;
            for (auto& w : workers) {
                cur.read_ops += w->live.rops.load(std::memory_order_relaxed);
                cur.write_ops += w->live.wops.load(std::memory_order_relaxed);
                cur.read_bytes += w->live.rbytes.load(std::memory_order_relaxed);
                cur.write_bytes += w->live.wbytes.load(std::memory_order_relaxed);
                ls += w->live.lat_sum.load(std::memory_order_relaxed);
                ln += w->live.lat_n.load(std::memory_order_relaxed);
            }
            SecondSample d{};
            d.t_s = double(now - sh.start_ns) / 1e9;
            d.interval_s = double(now - last_tick) / 1e9;
            d.read_ops = cur.read_ops - prev.read_ops;
            d.write_ops = cur.write_ops - prev.write_ops;
            d.read_bytes = cur.read_bytes - prev.read_bytes;
            d.write_bytes = cur.write_bytes - prev.write_bytes;
            d.lat_mean_ns =
                ln > prev_lat_n ? double(ls - prev_lat_sum) / double(ln - prev_lat_n) : 0;
            res.per_second.push_back(d);
            if (live) live(d, live_user);
            prev = cur;
            prev_lat_sum = ls, prev_lat_n = ln;
            last_tick = now;
            next_tick += 1000000000ull;
            if (next_tick <= now) next_tick = now + 1000000000ull;
        }
    }
    for (auto& th : threads)
        th.join();
    rusage ru1{};
    getrusage(RUSAGE_SELF, &ru1);

    uint64_t end = sh.start_ns;
    bool first_counters = true;
    for (auto& wp : workers) {
        Worker& w = *wp;
        if (w.end_ns > end) end = w.end_ns;
        res.read.merge(w.read);
        res.write.merge(w.write);
        res.errors += w.errors;
        res.verify_errors += w.verify_errors;
        for (auto& e : w.error_samples)
            if (res.error_samples.size() < kMaxSamples) res.error_samples.push_back(e);
        for (auto& e : w.verify_samples)
            if (res.verify_samples.size() < kMaxSamples) res.verify_samples.push_back(e);
        if (res.fatal.empty() && !w.fatal.empty()) res.fatal = w.fatal;
        res.stale_check = res.stale_check || w.stale_check;
        if (c.cpu_counters && (w.end_ns != 0)) {
            if (first_counters)
                res.counters = w.counters, first_counters = false;
            else
                res.counters.merge(w.counters);
        }
    }
    res.elapsed_s = double(end - sh.start_ns) / 1e9;
    res.cpu_measured = c.cpu_counters;
    auto tv = [](const timeval& a, const timeval& b) {
        return double(b.tv_sec - a.tv_sec) + double(b.tv_usec - a.tv_usec) / 1e6;
    };
    res.proc_user_s = tv(ru0.ru_utime, ru1.ru_utime);
    res.proc_sys_s = tv(ru0.ru_stime, ru1.ru_stime);
    res.vol_ctxsw = static_cast<uint64_t>(ru1.ru_nvcsw - ru0.ru_nvcsw);
    res.invol_ctxsw = static_cast<uint64_t>(ru1.ru_nivcsw - ru0.ru_nivcsw);
    res.interrupted = g_interrupted.load();
    return res;
}

} // namespace aiob
