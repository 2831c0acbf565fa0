// bench_local: the local-resource workloads of bench/studies/local.py, run by galay (and, for the
// metadata workload, by the blocking pool and by plain system calls, for comparison). Prints one
// JSON object; bench/studies/local.py alternates the variants and computes the ratios.
//
//   bench_local spawn PROGRAM SECS [--concurrency C] [--backend B]
//       process::Command(PROGRAM).spawn() + wait(), C children at a time, for SECS seconds:
//       {"spawns", "secs", "per_sec", "cpu_us_per_spawn"}
//   bench_local fsmeta DIR --mode uring|pool|sync [--files N] [--dirs D] [--concurrency C]
//                      [--backend B]
//       per file: create, write 4 KiB, fsync, close, rename, stat, unlink, over D directories
//       under DIR (made and removed here). uring: galay's fs ops (io_uring opcodes on io_uring;
//       on epoll they are blocking-pool jobs); pool: each step a spawn_blocking job of its system
//       call; sync: the system calls in a loop on one thread. C files in flight (uring, pool).
//       {"mode", "backend", "files", "secs", "files_per_sec", "cpu_us_per_file"}
//
// CPU is this process's user + system time (every thread: workers and the blocking pool) over
// the run. Exit codes: 0, 1 when an operation fails (its error on stderr), 2 for a bad argument.
#include "galay_cli_backend.hpp"

#include <galay/galay.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

double cpu_s() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

[[noreturn]] void die(const std::string& what, std::error_code ec) {
    std::fprintf(stderr, "bench_local: %s: %s\n", what.c_str(), ec.message().c_str());
    std::exit(1);
}

// ---- spawn ----------------------------------------------------------------------------------

galay::Task<unsigned long> spawn_loop(const std::string& program, double until) {
    unsigned long n = 0;
    while (now_s() < until) {
        galay::process::Command cmd(program);
        auto child = cmd.spawn();
        if (!child) die("spawn " + program, child.error());
        auto st = co_await child->wait();
        if (!st) die("wait", st.error());
        if (!st->success()) die(program + " ended with " + st->to_string(), {});
        ++n;
    }
    co_return n;
}

galay::Task<unsigned long> spawn_all(std::string program, double secs, unsigned conc) {
    const double until = now_s() + secs;
    std::vector<galay::Task<unsigned long>> loops;
    for (unsigned i = 0; i < conc; ++i)
        loops.push_back(spawn_loop(program, until));
    unsigned long total = 0;
    for (unsigned long n : co_await galay::when_all(std::move(loops)))
        total += n;
    co_return total;
}

// ---- fsmeta ---------------------------------------------------------------------------------

struct Meta {
    std::string root;
    unsigned long files = 100000;
    unsigned dirs = 16;
    unsigned long next = 0; // the next file to do (the tasks share one thread)
    std::string page = std::string(4096, 'm');
    std::string tmp(unsigned long i) const {
        return root + "/d" + std::to_string(i % dirs) + "/f" + std::to_string(i) + ".tmp";
    }
    std::string final_name(unsigned long i) const {
        return root + "/d" + std::to_string(i % dirs) + "/f" + std::to_string(i);
    }
};

void check(bool ok, const std::string& what) {
    if (!ok) die(what, std::error_code(errno, std::generic_category()));
}

void one_sync(const Meta& m, unsigned long i) {
    const std::string tmp = m.tmp(i), fin = m.final_name(i);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    check(fd >= 0, "open " + tmp);
    check(::pwrite(fd, m.page.data(), m.page.size(), 0) == 4096, "write");
    check(::fsync(fd) == 0, "fsync");
    check(::close(fd) == 0, "close");
    check(::rename(tmp.c_str(), fin.c_str()) == 0, "rename");
    struct stat st {};
    check(::stat(fin.c_str(), &st) == 0 && st.st_size == 4096, "stat");
    check(::unlink(fin.c_str()) == 0, "unlink");
}

/// galay's fs operations, file by file.
galay::Task<void> uring_worker(Meta& m) {
    galay::fs::OpenOptions create;
    create.read = false;
    create.write = true;
    create.create = true;
    create.truncate = true;
    for (unsigned long i; (i = m.next++) < m.files;) {
        const std::string tmp = m.tmp(i), fin = m.final_name(i);
        auto f = co_await galay::fs::open(tmp, create);
        if (!f) die("open " + tmp, f.error());
        auto w = co_await f->write_all_at(m.page, 0);
        if (!w) die("write", w.error());
        auto s = co_await f->fsync();
        if (!s) die("fsync", s.error());
        auto c = co_await f->close();
        if (!c) die("close", c.error());
        auto r = co_await galay::fs::rename(tmp, fin);
        if (!r) die("rename", r.error());
        auto st = co_await galay::fs::stat(fin);
        if (!st || st->size != 4096) die("stat", st ? std::error_code() : st.error());
        auto u = co_await galay::fs::remove(fin);
        if (!u) die("unlink", u.error());
    }
}

/// Each step a job of the blocking pool.
galay::Task<void> pool_worker(Meta& m) {
    for (unsigned long i; (i = m.next++) < m.files;) {
        const std::string tmp = m.tmp(i), fin = m.final_name(i);
        auto fd = co_await galay::spawn_blocking(
            [&] { return ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); });
        check(fd && *fd >= 0, "open " + tmp);
        auto w = co_await galay::spawn_blocking(
            [&] { return ::pwrite(*fd, m.page.data(), m.page.size(), 0); });
        check(w && *w == 4096, "write");
        auto s = co_await galay::spawn_blocking([&] { return ::fsync(*fd); });
        check(s && *s == 0, "fsync");
        auto c = co_await galay::spawn_blocking([&] { return ::close(*fd); });
        check(c && *c == 0, "close");
        auto r = co_await galay::spawn_blocking([&] { return ::rename(tmp.c_str(), fin.c_str()); });
        check(r && *r == 0, "rename");
        auto st = co_await galay::spawn_blocking([&] {
            struct stat sb {};
            return ::stat(fin.c_str(), &sb) == 0 ? sb.st_size : -1;
        });
        check(st && *st == 4096, "stat");
        auto u = co_await galay::spawn_blocking([&] { return ::unlink(fin.c_str()); });
        check(u && *u == 0, "unlink");
    }
}

galay::Task<void> run_workers(Meta& m, bool pool, unsigned conc) {
    std::vector<galay::Task<void>> workers;
    for (unsigned i = 0; i < conc; ++i)
        workers.push_back(pool ? pool_worker(m) : uring_worker(m));
    (void)co_await galay::when_all(std::move(workers));
}

int fsmeta(const std::string& root, const std::string& mode, unsigned long files, unsigned dirs,
           unsigned conc, galay::SchedulerOptions so) {
    Meta m;
    m.root = root + "/bench_local-" + std::to_string(::getpid());
    m.files = files;
    m.dirs = dirs;
    for (unsigned d = 0; d < dirs; ++d)
        std::filesystem::create_directories(m.root + "/d" + std::to_string(d));
    std::string backend = "none";
    const double c0 = cpu_s(), t0 = now_s();
    if (mode == "sync") {
        for (unsigned long i = 0; i < files; ++i)
            one_sync(m, i);
    } else {
        galay::Scheduler s(so);
        backend = s.backend_name();
        s.block_on(run_workers(m, mode == "pool", conc));
    }
    const double secs = now_s() - t0, cpu = cpu_s() - c0;
    std::filesystem::remove_all(m.root);
    std::printf("{\"mode\": \"%s\", \"backend\": \"%s\", \"files\": %lu, \"secs\": %.6f, "
                "\"files_per_sec\": %.1f, \"cpu_us_per_file\": %.3f}\n",
                mode.c_str(), backend.c_str(), files, secs, static_cast<double>(files) / secs,
                cpu / static_cast<double>(files) * 1e6);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    galay::SchedulerOptions so;
    unsigned conc = 0;
    unsigned long files = 100000;
    unsigned dirs = 16;
    std::string mode, program, dir;
    double secs = 0;
    cli::App app{"Local workloads on galay-kernel: spawning processes, filesystem metadata.",
                 "bench_local"};
    app.require_subcommand(1);
    cli::App* spawn = app.add_subcommand("spawn", "spawn PROGRAM and reap it for SECS seconds");
    spawn->add_option("PROGRAM", program, "the program to run")
        ->required()
        ->check(tools::non_empty());
    spawn->add_option("SECS", secs, "seconds")->required()->check(tools::seconds(1, 3600));
    cli::App* fs = app.add_subcommand("fsmeta", "create, stat and remove files under DIR");
    fs->add_option("DIR", dir, "the directory")->required()->check(tools::non_empty());
    fs->add_option("--mode", mode, "uring, pool or sync")
        ->required()
        ->check(cli::IsMember({"uring", "pool", "sync"}));
    fs->add_option("--files", files, "files")
        ->check(tools::whole(1, 100000000))
        ->capture_default_str();
    fs->add_option("--dirs", dirs, "subdirectories")
        ->check(tools::whole(1, 4096))
        ->capture_default_str();
    for (cli::App* sub : {spawn, fs}) {
        sub->add_option("--concurrency", conc, "operations in flight (default: spawn 1, fsmeta 32)")
            ->check(tools::whole(1, 4096));
        tools::add_backend_flag(*sub, &so.backend);
    }
    if (auto code = tools::parse_command_line(app, argc, argv, "bench_local")) return *code;
    try {
        if (spawn->parsed()) {
            const double c0 = cpu_s(), t0 = now_s();
            galay::Scheduler s(so);
            const unsigned long n = s.block_on(spawn_all(program, secs, conc == 0 ? 1 : conc));
            const double took = now_s() - t0, cpu = cpu_s() - c0;
            std::printf("{\"spawns\": %lu, \"secs\": %.6f, \"per_sec\": %.1f, "
                        "\"cpu_us_per_spawn\": %.3f, \"backend\": \"%s\"}\n",
                        n, took, static_cast<double>(n) / took,
                        n == 0 ? 0.0 : cpu / static_cast<double>(n) * 1e6, s.backend_name());
            return 0;
        }
        return fsmeta(dir, mode, files, dirs, conc == 0 ? 32 : conc, so);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_local: %s\n", e.what());
        return 1;
    }
}
