// Tests that run the aio_bench binary: flag errors, data safety, --verify (including a corrupted
// block), --json keys, polling modes and --direct on tmpfs. Every run is count-limited (--ios) on a
// small file, so the tests are deterministic and quick; nothing asserts on time or speed.
//
// Files live in a fresh directory under $AIO_BENCH_TEST_DIR, else /var/tmp (a disk filesystem, so
// --direct works), else /tmp. Tests that need O_DIRECT skip, saying why, if that directory is
// tmpfs.
#include "support/process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <linux/magic.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

struct Outcome {
    int code = -1;
    std::string out, err;
    nlohmann::json json() const {
        try {
            return nlohmann::json::parse(out);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << out << "\n" << err;
            return {};
        }
    }
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool is_tmpfs(const fs::path& p) {
    struct statfs s {};
    return ::statfs(p.c_str(), &s) == 0 && s.f_type == TMPFS_MAGIC;
}

int count_lines(const std::string& s) {
    int n = 0;
    for (char c : s)
        n += c == '\n';
    return n;
}

size_t count_of(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1))
        ++n;
    return n;
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s)
        h = (h ^ c) * 1099511628211ull;
    return h;
}

class AioBenchCli : public ::testing::Test {
protected:
    void SetUp() override {
        const char* env = std::getenv("AIO_BENCH_TEST_DIR");
        fs::path base = env ? fs::path(env) : fs::exists("/var/tmp") ? "/var/tmp" : "/tmp";
        std::string tmpl = (base / "aio_bench_test.XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    fs::path path(const std::string& name) const { return dir_ / name; }

    // Runs aio_bench with args; stdout and stderr go through files in the test directory.
    // broken_stdout: stdout is a pipe whose read end is already closed (as in `aio_bench | head`).
    Outcome run(const std::vector<std::string>& args, bool broken_stdout = false) {
        std::vector<std::string> all{AIO_BENCH_BIN};
        all.insert(all.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& a : all)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        const fs::path out = dir_ / ".stdout", err = dir_ / ".stderr";
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        int pipefd[2] = {-1, -1};
        if (broken_stdout) {
            if (::pipe(pipefd) != 0) ADD_FAILURE() << "pipe: " << std::strerror(errno);
            ::close(pipefd[0]);
            posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        } else {
            posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                             0644);
        }
        posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        pid_t pid = -1;
        Outcome r;
        int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (pipefd[1] >= 0) ::close(pipefd[1]);
        if (rc != 0) {
            ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
            return r;
        }
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        r.out = slurp(out);
        r.err = slurp(err);
        fs::remove(out);
        fs::remove(err);
        return r;
    }

    // A file with random content (not the verify pattern).
    fs::path make_file(const std::string& name, size_t bytes) {
        fs::path p = path(name);
        std::string data(bytes, '\0');
        std::mt19937_64 rng(bytes);
        for (auto& c : data)
            c = static_cast<char>(rng());
        std::ofstream(p, std::ios::binary).write(data.data(), static_cast<std::streamsize>(bytes));
        return p;
    }

    // O_DIRECT works in the test directory: not tmpfs (which accepts the flag but is not direct
    // I/O, and aio_bench refuses it) and a 4 KiB O_DIRECT write succeeds.
    bool direct_ok() const {
        if (is_tmpfs(dir_)) return false;
        fs::path probe = dir_ / ".direct_probe";
        int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0600);
        if (fd < 0) return false;
        void* buf = nullptr;
        bool ok = posix_memalign(&buf, 4096, 4096) == 0;
        if (ok) {
            std::memset(buf, 0, 4096);
            ok = ::pwrite(fd, buf, 4096, 0) == 4096;
            std::free(buf);
        }
        ::close(fd);
        fs::remove(probe);
        return ok;
    }

    fs::path dir_;
};

// ---------------------------------------------------------------------------------------------
// Flag errors: exit code 2 and one line on stderr naming the flag; nothing is created.

struct BadFlag {
    std::vector<std::string> args; // "F" is replaced by a path in the test directory
    std::string flag;
};

class AioBenchFlags : public AioBenchCli, public ::testing::WithParamInterface<BadFlag> {};

TEST_P(AioBenchFlags, BadFlagIsAUsageError) {
    std::vector<std::string> args = GetParam().args;
    for (auto& a : args)
        if (a == "F") a = path("new.dat").string();
    Outcome r = run(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(GetParam().flag), std::string::npos)
        << "message does not name " << GetParam().flag << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(fs::exists(path("new.dat")));
}

INSTANTIATE_TEST_SUITE_P(
    All, AioBenchFlags,
    ::testing::Values(
        BadFlag{{}, "--file"}, BadFlag{{"-f", "F", "-q", "0"}, "-q"},
        BadFlag{{"-f", "F", "-q", "abc"}, "-q"}, BadFlag{{"-f", "F", "-q", "100000"}, "-q"},
        BadFlag{{"-f", "F", "-t", "0"}, "-t"}, BadFlag{{"-f", "F", "-r", "0"}, "-r"},
        BadFlag{{"-f", "F", "-r", "soon"}, "-r"}, BadFlag{{"-f", "F", "-b", "0"}, "-b"},
        BadFlag{{"-f", "F", "-b", "4x"}, "-b"},
        BadFlag{{"-f", "F", "-b", "1000", "--direct"}, "-b"},
        BadFlag{{"-f", "F", "-b", "1000", "--verify"}, "-b"},
        BadFlag{{"-f", "F", "-e", "posixaio"}, "-e"}, BadFlag{{"-f", "F", "-p", "randread2"}, "-p"},
        BadFlag{{"-f", "F", "--size", "big"}, "--size"},
        BadFlag{{"-f", "F", "--size", "1k", "-b", "4k"}, "--size"},
        BadFlag{{"-f", "F", "-p", "rand_rw", "--rwmix", "101"}, "--rwmix"},
        BadFlag{{"-f", "F", "--rwmix", "50"}, "--rwmix"},
        BadFlag{{"-f", "F", "--ios", "0"}, "--ios"},
        BadFlag{{"-f", "F", "--poll-mode", "spin"}, "--poll-mode"},
        BadFlag{{"-f", "F", "-e", "libaio", "--poll-mode", "sqpoll"}, "--poll-mode"},
        BadFlag{{"-f", "F", "-e", "io_uring", "-P"}, "-P"},
        BadFlag{{"-f", "F", "--compare", "-e", "libaio"}, "-e"},
        BadFlag{{"-f", "F", "-q", "8", "--submit-batch", "9"}, "--submit-batch"},
        BadFlag{{"-f", "F", "--complete-batch", "0"}, "--complete-batch"},
        BadFlag{{"-f", "F", "--batch", "--submit-batch", "2"}, "--batch"},
        BadFlag{{"-f", "F", "--no-such-flag"}, "--no-such-flag"},
        BadFlag{{"-f", "F", "--fixedbufs"}, "--fixedbufs"}, // default engine: libaio
        BadFlag{{"-f", "F", "-e", "libaio", "--fixedbufs"}, "--fixedbufs"},
        BadFlag{{"-f", "F", "-e", "libaio", "--registerfiles"}, "--registerfiles"},
        BadFlag{{"-f", "F", "--compare", "--registerfiles"}, "--registerfiles"},
        BadFlag{{"-f", "F", "-e", "io_uring", "-q", "20000", "--fixedbufs"}, "--fixedbufs"}));

// ---------------------------------------------------------------------------------------------
// Everything else runs on both engines.

class AioBenchEngine : public AioBenchCli, public ::testing::WithParamInterface<std::string> {
protected:
    std::vector<std::string> base(const fs::path& f, std::vector<std::string> more) const {
        std::vector<std::string> a{"-f", f.string(), "-e", GetParam()};
        a.insert(a.end(), more.begin(), more.end());
        return a;
    }
};

TEST_P(AioBenchEngine, RefusesToWriteAnExistingFile) {
    fs::path f = make_file("existing.dat", 1 << 20);
    const uint64_t before = fnv1a(slurp(f));
    const auto mtime = fs::last_write_time(f);
    for (const char* p : {"rand_write", "seq_write", "rand_rw"}) {
        Outcome r = run(base(f, {"-p", p, "--ios", "100"}));
        EXPECT_EQ(r.code, 1) << p << ": " << r.err;
        EXPECT_NE(r.err.find("--allow-overwrite"), std::string::npos) << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << r.err;
    }
    EXPECT_EQ(fnv1a(slurp(f)), before) << "content changed";
    EXPECT_EQ(fs::last_write_time(f), mtime);
    EXPECT_EQ(fs::file_size(f), 1u << 20);
}

TEST_P(AioBenchEngine, ReadsAnExistingFileWithoutChangingIt) {
    fs::path f = make_file("existing.dat", 1 << 20);
    const uint64_t before = fnv1a(slurp(f));
    Outcome r = run(base(f, {"-p", "rand_read", "--ios", "300", "--json"}));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.json()["ops"]["read"], 300);
    r = run(base(f, {"-p", "seq_read", "--ios", "300", "-t", "2"}));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(fnv1a(slurp(f)), before);
    EXPECT_TRUE(fs::exists(f)) << "an existing file must never be removed";
}

TEST_P(AioBenchEngine, AllowOverwriteWritesAnExistingFile) {
    fs::path f = make_file("existing.dat", 1 << 20);
    const uint64_t before = fnv1a(slurp(f));
    Outcome r = run(base(f, {"-p", "seq_write", "--ios", "256", "--allow-overwrite", "--json"}));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.json()["ops"]["write"], 256);
    EXPECT_NE(fnv1a(slurp(f)), before);
    EXPECT_TRUE(fs::exists(f));
}

TEST_P(AioBenchEngine, MissingDirectoryIsAClearError) {
    fs::path f = path("no/such/dir/file.dat");
    Outcome r = run(base(f, {"-p", "rand_write", "--ios", "10"}));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_FALSE(fs::exists(path("no")));
}

TEST_P(AioBenchEngine, TooSmallFileIsAClearError) {
    fs::path f = make_file("small.dat", 1000);
    Outcome r = run(base(f, {"--ios", "10"})); // 4 KiB blocks
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("too small"), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;

    fs::path g = make_file("4k.dat", 4096);
    r = run(base(g, {"--ios", "10", "--size", "8k"}));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("smaller than --size"), std::string::npos) << r.err;

    r = run(base(g, {"--ios", "10", "-p", "seq_read", "-t", "2"})); // one block, two threads
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("threads"), std::string::npos) << r.err;
    EXPECT_EQ(fs::file_size(f), 1000u);
}

TEST_P(AioBenchEngine, CreatedFileIsRemovedUnlessKept) {
    fs::path f = path("created.dat");
    Outcome r = run(base(f, {"-p", "rand_write", "--size", "1m", "--ios", "100"}));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(fs::exists(f));
    r = run(base(f, {"-p", "rand_write", "--size", "1m", "--ios", "100", "--keep"}));
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(fs::exists(f));
    EXPECT_EQ(fs::file_size(f), 1u << 20);
}

// `aio_bench ... | head`: the closed stdout must not leave the created file behind.
TEST_P(AioBenchEngine, CreatedFileIsRemovedWhenStdoutIsClosed) {
    fs::path f = path("pipe.dat");
    Outcome r = run(base(f, {"-p", "rand_write", "--size", "1m", "--ios", "200"}), true);
    EXPECT_LT(r.code, 128) << "killed by signal " << r.code - 128;
    EXPECT_FALSE(fs::exists(f));
}

// rand_write, rand_read and rand_rw with --verify on files aio_bench creates: no errors.
TEST_P(AioBenchEngine, VerifyRoundTripHasNoErrors) {
    for (bool direct : {false, true}) {
        if (direct && !direct_ok()) {
            std::cout << "[ SKIPPED  ] --direct variant: no O_DIRECT in " << dir_ << "\n";
            continue;
        }
        for (auto [pattern, threads, ios] :
             {std::tuple{"rand_write", "1", "3000"}, std::tuple{"rand_read", "1", "3000"},
              std::tuple{"rand_rw", "2", "6000"}, std::tuple{"seq_write", "2", "3000"}}) {
            std::vector<std::string> a =
                base(path("v.dat"), {"-p", pattern, "-t", threads, "--ios", ios, "--verify",
                                     "--size", "8m", "-q", "16", "--json"});
            if (direct) a.push_back("--direct");
            Outcome r = run(a);
            SCOPED_TRACE(std::string(pattern) + (direct ? " --direct" : " buffered"));
            ASSERT_EQ(r.code, 0) << r.err;
            auto j = r.json();
            EXPECT_EQ(j["errors"], 0);
            EXPECT_EQ(j["verify_errors"], 0);
            EXPECT_EQ(j["ops"]["total"], std::stoull(ios));
            EXPECT_TRUE(j["fatal"].is_null());
            if (std::string(pattern) == "rand_rw") {
                EXPECT_GT(j["ops"]["read"].get<uint64_t>(), 0u);
                EXPECT_GT(j["ops"]["write"].get<uint64_t>(), 0u);
            }
            EXPECT_FALSE(fs::exists(path("v.dat")));
        }
    }
}

// fio's discipline (default), full batching and partial batching all keep the count exact and the
// data right.
TEST_P(AioBenchEngine, BatchingModesCountExactlyAndVerify) {
    for (std::vector<std::string> mode : {std::vector<std::string>{},
                                          {"--batch"},
                                          {"--submit-batch", "4", "--complete-batch", "3"}}) {
        std::vector<std::string> a =
            base(path("b.dat"), {"-p", "rand_rw", "-q", "16", "--ios", "4000", "--verify", "--size",
                                 "8m", "--json"});
        a.insert(a.end(), mode.begin(), mode.end());
        Outcome r = run(a);
        SCOPED_TRACE(mode.empty() ? "default" : mode[0]);
        ASSERT_EQ(r.code, 0) << r.err;
        auto j = r.json();
        EXPECT_EQ(j["ops"]["total"], 4000);
        EXPECT_EQ(j["latency_ns"]["samples"], 4000);
        EXPECT_EQ(j["verify_errors"], 0);
        EXPECT_EQ(j["errors"], 0);
        const unsigned sb = mode.empty() ? 1 : mode[0] == "--batch" ? 16 : 4;
        const unsigned cb = mode.empty() ? 1 : mode[0] == "--batch" ? 16 : 3;
        EXPECT_EQ(j["config"]["submit_batch"], sb);
        EXPECT_EQ(j["config"]["complete_batch"], cb);
    }
}

// Write a file with the pattern, corrupt one block behind aio_bench's back with an O_DIRECT
// pwrite, read it back: exactly that block is reported, and the exit code is non-zero.
TEST_P(AioBenchEngine, VerifyCatchesACorruptedBlock) {
    const bool direct = direct_ok();
    if (!direct) std::cout << "[   INFO   ] no O_DIRECT in " << dir_ << ": buffered writes\n";
    fs::path f = path("corrupt.dat");
    const int blocks = 2048; // 8 MiB of 4 KiB blocks
    std::vector<std::string> w{"-p",     "seq_write", "--verify", "--keep",
                               "--size", "8m",        "--ios",    std::to_string(blocks),
                               "-q",     "8"};
    if (direct) w.push_back("--direct");
    Outcome r = run(base(f, w));
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(fs::file_size(f), 8u << 20);

    r = run(base(f, {"-p", "seq_read", "--verify", "--ios", std::to_string(blocks), "--json"}));
    ASSERT_EQ(r.code, 0) << "clean file must verify: " << r.err;

    const uint64_t bad = 1337ull * 4096;
    {
        int fd = ::open(f.c_str(), O_WRONLY | (direct ? O_DIRECT : 0));
        ASSERT_GE(fd, 0) << std::strerror(errno);
        void* buf = nullptr;
        ASSERT_EQ(posix_memalign(&buf, 4096, 4096), 0);
        std::memset(buf, 0x5a, 4096);
        ASSERT_EQ(::pwrite(fd, buf, 4096, static_cast<off_t>(bad)), 4096) << std::strerror(errno);
        std::free(buf);
        ::close(fd);
    }
    r = run(base(f, {"-p", "seq_read", "--verify", "--ios", std::to_string(blocks), "--json"}));
    EXPECT_EQ(r.code, 1) << r.err;
    auto j = r.json();
    EXPECT_EQ(j["verify_errors"], 1);
    EXPECT_EQ(j["errors"], 0);
    ASSERT_EQ(j["verify_error_samples"].size(), 1u);
    EXPECT_EQ(j["verify_error_samples"][0]["offset"], bad);
    const std::string line = "verify error at offset " + std::to_string(bad) + ":";
    EXPECT_EQ(count_of(r.err, line), 1u) << r.err;
    EXPECT_EQ(count_of(r.err, "verify error at offset"), 1u) << r.err;

    // Reading with another block size finds the same damage (sectors are stamped, not blocks).
    r = run(base(f, {"-p", "seq_read", "--verify", "--ios", "128", "-b", "64k"}));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(count_of(r.err, "verify error at offset " + std::to_string(bad / 65536 * 65536)), 1u)
        << r.err;
}

TEST_P(AioBenchEngine, JsonHasTheDocumentedKeys) {
    Outcome r = run(base(path("j.dat"), {"-p", "rand_rw", "--ios", "500", "--size", "4m", "--json",
                                         "-M", "--per-second", "--rwmix", "70"}));
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = r.json();
    for (const char* k : {"tool",          "version",       "mode",
                          "config",        "engine",        "time_s",
                          "ops",           "bytes",         "errors",
                          "verify_errors", "iops",          "bandwidth_mib_s",
                          "latency_ns",    "read",          "write",
                          "cpu",           "error_samples", "verify_error_samples",
                          "fatal",         "interrupted",   "per_second"})
        EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["tool"], "aio_bench");
    EXPECT_EQ(j["engine"], GetParam());
    for (const char* k : {"file", "engine", "pattern", "block_size", "iodepth", "threads",
                          "runtime_s", "ios", "direct", "poll", "verify", "rwmix_read", "seed",
                          "submit_batch", "complete_batch", "fixedbufs", "registerfiles", "target"})
        EXPECT_TRUE(j["config"].contains(k)) << "config." << k;
    EXPECT_EQ(j["config"]["rwmix_read"], 70);
    EXPECT_TRUE(j["config"]["target"]["created"].get<bool>());
    EXPECT_EQ(j["ops"]["total"], 500);
    EXPECT_EQ(j["ops"]["read"].get<uint64_t>() + j["ops"]["write"].get<uint64_t>(), 500u);
    EXPECT_EQ(j["bytes"]["total"], 500 * 4096);
    const auto& lat = j["latency_ns"];
    for (const char* k : {"samples", "mean", "min", "max", "stddev", "p50", "p95", "p99", "p99.9"})
        EXPECT_TRUE(lat.contains(k)) << "latency_ns." << k;
    EXPECT_EQ(lat["samples"], 500);
    EXPECT_LE(lat["min"].get<double>(), lat["p50"].get<double>());
    EXPECT_LE(lat["p50"].get<double>(), lat["p95"].get<double>());
    EXPECT_LE(lat["p95"].get<double>(), lat["p99"].get<double>());
    EXPECT_LE(lat["p99"].get<double>(), lat["p99.9"].get<double>());
    EXPECT_LE(lat["p99.9"].get<double>(), lat["max"].get<double>());
    EXPECT_GT(j["iops"].get<double>(), 0);
    for (const char* d : {"read", "write"})
        for (const char* k : {"ops", "bytes", "iops", "bandwidth_mib_s", "latency_ns"})
            EXPECT_TRUE(j[d].contains(k)) << d << "." << k;
    // -M: every counter has a number or null plus the reason it is unavailable.
    const auto& cpu = j["cpu"];
    for (const char* k :
         {"instructions_per_io", "cycles_per_io", "branches_per_io", "branch_miss_pct", "ipc",
          "task_clock_ns_per_io", "context_switches_per_io", "thread_cpu_util_pct",
          "process_cpu_ns_per_io", "process_cpu_util_pct", "unavailable"}) {
        ASSERT_TRUE(cpu.contains(k)) << "cpu." << k;
        if (cpu[k].is_null()) {
            EXPECT_TRUE(cpu["unavailable"].contains(k)) << k;
        }
    }
    EXPECT_TRUE(j["per_second"].is_array());
}

TEST_P(AioBenchEngine, CpuCountersTextSaysWhatIsUnavailable) {
    Outcome r = run(base(path("m.dat"), {"--ios", "300", "--size", "2m", "-M"}));
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* c : {"instructions:", "cycles:", "branches:", "branch-misses:", "IPC:",
                          "task-clock:", "context switches:", "CPU utilisation:"}) {
        size_t at = r.out.find(std::string("\n") + c);
        ASSERT_NE(at, std::string::npos) << c << "\n" << r.out;
        std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
        bool number = line.find_first_of("0123456789") != std::string::npos;
        bool says_why = line.find("not available (") != std::string::npos;
        EXPECT_TRUE(number || says_why) << line;
        if (says_why && std::string(c) != "IPC:") {
            EXPECT_NE(line.find("perf_event_open: "), std::string::npos) << line;
        }
    }
    std::cout << "[   INFO   ] "
              << r.out.substr(r.out.find("\ninstructions:") + 1,
                              r.out.find('\n', r.out.find("\ninstructions:") + 1) -
                                  r.out.find("\ninstructions:"))
              << "\n";
}

TEST_F(AioBenchCli, CompareRunsBothEngines) {
    Outcome r = run({"-f", path("c.dat").string(), "--compare", "--ios", "400", "--size", "2m",
                     "--json", "-M"});
    ASSERT_EQ(r.code, 0) << r.err;
    auto j = r.json();
    EXPECT_EQ(j["mode"], "compare");
    for (const char* e : {"libaio", "io_uring"}) {
        ASSERT_TRUE(j.contains(e)) << e;
        EXPECT_EQ(j[e]["engine"], e);
        EXPECT_EQ(j[e]["ops"]["total"], 400);
        EXPECT_EQ(j[e]["errors"], 0);
    }
    for (const char* k :
         {"iops", "bandwidth_mib_s", "lat_mean_us", "lat_p50_us", "lat_p95_us", "lat_p99_us",
          "lat_p99.9_us", "task_clock_ns_per_io", "process_cpu_ns_per_io", "instructions_per_io"})
        EXPECT_TRUE(j["diff_pct"].contains(k)) << k;
    // The text table has one line per figure with a diff column.
    r = run({"-f", path("c.dat").string(), "--compare", "--ios", "200", "--size", "2m"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* row : {"IOPS", "Bandwidth (MiB/s)", "Latency p99.9 (us)", "process CPU"})
        EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
}

TEST_P(AioBenchEngine, PollingModes) {
    if (!direct_ok()) GTEST_SKIP() << "no O_DIRECT in " << dir_;
    fs::path f = path("p.dat");
    Outcome r = run(base(f, {"-P", "--direct", "--ios", "300", "--size", "2m", "--json"}));
    if (GetParam() == "libaio") {
        ASSERT_EQ(r.code, 0) << r.err; // busy-polled io_getevents: works everywhere
        EXPECT_EQ(r.json()["ops"]["total"], 300);
    } else if (r.code == 0) {
        std::cout << "[   INFO   ] IOPOLL supported by the device under " << dir_ << "\n";
        EXPECT_EQ(r.json()["errors"], 0);
    } else {
        // The device has no poll queues: one clear line, exit 1.
        EXPECT_EQ(r.code, 1);
        EXPECT_NE(r.err.find("IOPOLL not supported by " + f.string() + "'s device"),
                  std::string::npos)
            << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << r.err;
        std::cout << "[   INFO   ] " << r.err;
    }
    EXPECT_FALSE(fs::exists(f));
    if (GetParam() == "io_uring") {
        r = run(base(f, {"--poll-mode", "sqpoll", "--ios", "300", "--size", "2m", "--json"}));
        if (r.code == 0)
            EXPECT_EQ(r.json()["ops"]["total"], 300);
        else
            EXPECT_NE(r.err.find("SQPOLL not available"), std::string::npos) << r.err;
    }
}

TEST_P(AioBenchEngine, DirectOnTmpfsIsAClearError) {
    fs::path tmpfs;
    for (const char* c : {"/tmp", "/dev/shm", "/run/shm"})
        if (fs::is_directory(c) && is_tmpfs(c)) {
            tmpfs = c;
            break;
        }
    if (tmpfs.empty()) GTEST_SKIP() << "no tmpfs mounted at /tmp, /dev/shm or /run/shm";
    std::cout << "[   INFO   ] using tmpfs at " << tmpfs
              << (tmpfs == "/tmp" ? "" : " (/tmp is not tmpfs on this machine)") << "\n";
    fs::path f = tmpfs / ("aio_bench_test_" + std::to_string(::getpid()) + ".dat");
    Outcome r = run(base(f, {"--direct", "--ios", "10", "--size", "1m"}));
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("tmpfs"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--direct"), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_FALSE(fs::exists(f));
    fs::remove(f);
}

TEST_P(AioBenchEngine, IosLimitIsExactAcrossThreads) {
    for (const char* t : {"1", "3"}) {
        Outcome r = run(base(path("n.dat"), {"-p", "rand_read", "-t", t, "-q", "7", "--ios", "1001",
                                             "--size", "4m", "--json"}));
        ASSERT_EQ(r.code, 0) << r.err;
        auto j = r.json();
        EXPECT_EQ(j["ops"]["total"], 1001) << "-t " << t;
        EXPECT_EQ(j["latency_ns"]["samples"], 1001);
    }
}

// fio's io_uring options fixedbufs and registerfiles: real runs that write and verify, buffered
// and O_DIRECT, one block size of one page and one of several; the JSON and the header say which.
TEST_F(AioBenchCli, IoUringFixedbufsAndRegisterfilesRunAndVerify) {
    for (bool direct : {false, true}) {
        if (direct && !direct_ok()) {
            std::cout << "[ SKIPPED  ] --direct variant: no O_DIRECT in " << dir_ << "\n";
            continue;
        }
        for (std::vector<std::string> opts : {std::vector<std::string>{"--fixedbufs"},
                                              {"--registerfiles"},
                                              {"--fixedbufs", "--registerfiles"}}) {
            for (const char* bs : {"4k", "64k"}) {
                std::vector<std::string> a{"-f",       path("fx.dat").string(),
                                           "-e",       "io_uring",
                                           "-p",       "rand_rw",
                                           "-q",       "16",
                                           "-b",       bs,
                                           "--ios",    "3000",
                                           "--size",   "16m",
                                           "--verify", "--json"};
                a.insert(a.end(), opts.begin(), opts.end());
                if (direct) a.push_back("--direct");
                std::string trace = std::string(direct ? "--direct" : "buffered") + " -b " + bs;
                for (const auto& o : opts)
                    trace += " " + o;
                SCOPED_TRACE(trace);
                Outcome r = run(a);
                ASSERT_EQ(r.code, 0) << r.err;
                auto j = r.json();
                EXPECT_EQ(j["ops"]["total"], 3000);
                EXPECT_GT(j["ops"]["read"].get<uint64_t>(), 0u);
                EXPECT_GT(j["ops"]["write"].get<uint64_t>(), 0u);
                EXPECT_EQ(j["errors"], 0);
                EXPECT_EQ(j["verify_errors"], 0);
                const bool fixed = opts[0] == "--fixedbufs";
                const bool files = opts.back() == "--registerfiles";
                EXPECT_EQ(j["config"]["fixedbufs"], fixed);
                EXPECT_EQ(j["config"]["registerfiles"], files);
                EXPECT_FALSE(fs::exists(path("fx.dat")));
            }
        }
    }
    // The text header names them.
    Outcome r = run({"-f", path("fx.dat").string(), "-e", "io_uring", "--ios", "200", "--size",
                     "2m", "--fixedbufs", "--registerfiles"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(", fixedbufs, registerfiles"), std::string::npos) << r.out;
}

// -r 1e-10 passes a positivity check but truncates to 0 ns, and 0 means "no time limit". Every
// value that would be 0 ns is refused.
TEST_F(AioBenchCli, RuntimeBelowOneNanosecondIsRefused) {
    for (const char* r : {"1e-10", "0.0000000001", "1e-300", "nan", "inf"}) {
        Outcome o = run({"-f", path("r.dat").string(), "-r", r, "--ios", "100", "--size", "1m"});
        EXPECT_EQ(o.code, 2) << "-r " << r << ": " << o.err;
        EXPECT_NE(o.err.find("-r/--runtime"), std::string::npos) << o.err;
        EXPECT_FALSE(fs::exists(path("r.dat")));
    }
}

// `timeout` sends SIGTERM to its child and then to its whole process group, so aio_bench gets it
// twice; a SA_RESETHAND handler would let the second one kill it before the report and leave the
// file it created. Here the process is held at its report (its stdout
// pipe is full) when the second SIGTERM comes, so a handler that does not survive it always fails.
TEST_P(AioBenchEngine, TimeoutsDoubleSigtermStillReportsAndRemovesTheFile) {
    const fs::path f = path("timeout.dat");
    galay::test::Process p({AIO_BENCH_BIN, "-f", f.string(), "-e", GetParam(), "-p", "rand_read",
                            "--size", "1m", "-q", "4", "-r", "60"},
                           /*keep_stdout_writer=*/true);
    ASSERT_TRUE(p.wait_for("seed ")) << p.out() << p.err(); // running, handlers installed
    p.fill_stdout_pipe('\0');
    p.signal(SIGTERM);
    ASSERT_TRUE(p.wait_delivered(SIGTERM));
    p.signal(SIGTERM);
    ASSERT_TRUE(p.wait_delivered(SIGTERM));
    galay::test::ProcessResult r = p.finish();
    ASSERT_FALSE(r.timed_out);
    EXPECT_TRUE(r.exited) << "killed by signal " << r.signal;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("(interrupted)"), std::string::npos)
        << r.out.substr(r.out.rfind('\0') + 1);
    EXPECT_FALSE(fs::exists(f));
}

// A real second signal (SIGINT then SIGTERM, delivered together) removes the created file and
// exits at once, killed by the signal as a shell expects.
TEST_P(AioBenchEngine, SecondSignalRemovesTheFileAndExitsAtOnce) {
    const fs::path f = path("forced.dat");
    galay::test::Process p({AIO_BENCH_BIN, "-f", f.string(), "-e", GetParam(), "-p", "rand_write",
                            "--size", "1m", "-q", "4", "-r", "60"});
    ASSERT_TRUE(p.wait_for("seed ")) << p.out() << p.err();
    ASSERT_TRUE(fs::exists(f));
    p.signal(SIGSTOP);
    p.signal(SIGINT);
    p.signal(SIGTERM);
    p.signal(SIGCONT);
    galay::test::ProcessResult r = p.finish();
    ASSERT_FALSE(r.timed_out);
    EXPECT_FALSE(r.exited) << r.out;
    EXPECT_FALSE(fs::exists(f));
}

INSTANTIATE_TEST_SUITE_P(Engines, AioBenchEngine, ::testing::Values("libaio", "io_uring"),
                         [](const auto& info) { return info.param; });

} // namespace
