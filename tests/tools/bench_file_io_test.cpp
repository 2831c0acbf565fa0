// bench_file_io as its users run it: flag errors, directory errors, and tiny verified runs on
// every backend whose --json output parses. The binary's path comes from CMake.
#include "support/backends.hpp"
#include "support/files.hpp"
#include "support/process.hpp"

#include <nlohmann/json.hpp>

#include <sys/mount.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#ifndef BENCH_FILE_IO_PATH
#error "BENCH_FILE_IO_PATH must name the bench_file_io binary"
#endif

namespace {

using ToolRun = galay::test::ProcessResult;

/// Run bench_file_io with `args` to the end, its stdout and stderr captured.
ToolRun run_tool(const std::vector<std::string>& args) {
    std::vector<std::string> argv{BENCH_FILE_IO_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return galay::test::run_process(std::move(argv));
}

/// "Total duration:   0.012345 s": the figure has exactly six decimals (microseconds).
bool has_microsecond_duration(const std::string& out) {
    const std::string key = "Total duration:";
    const std::size_t at = out.find(key);
    if (at == std::string::npos) return false;
    const std::size_t begin = out.find_first_not_of(' ', at + key.size());
    const std::size_t end = out.find(' ', begin);
    if (begin == std::string::npos || end == std::string::npos) return false;
    const std::string num = out.substr(begin, end - begin);
    const std::size_t dot = num.find('.');
    return dot != std::string::npos && dot > 0 && num.size() - dot - 1 == 6 &&
           num.find_first_not_of("0123456789.") == std::string::npos &&
           out.compare(end, 2, " s") == 0;
}

bool dir_is_empty(const std::filesystem::path& d) {
    return std::filesystem::directory_iterator(d) == std::filesystem::directory_iterator();
}

} // namespace

TEST(BenchFileIoFlags, BadValuesExitNonZeroNamingTheFlag) {
    struct Case {
        std::vector<std::string> args;
        std::string must_mention;
    };
    const Case cases[] = {
        {{"-w", "0"}, "--workers"},           {{"-n", "0"}, "--ops"},
        {{"-b", "abc"}, "--block-size"},      {{"-batch", "0"}, "batch"},
        {{"-batch", "x"}, "batch"},           {{"--bogus"}, "--bogus"},
        {{"--backend", "iocp"}, "--backend"},
    };
    for (const Case& c : cases) {
        ToolRun r = run_tool(c.args);
        std::string joined;
        for (const auto& a : c.args)
            joined += a + " ";
        EXPECT_NE(r.exit_code, 0) << joined;
        EXPECT_NE(r.err.find(c.must_mention), std::string::npos)
            << joined << "-> stderr: " << r.err;
    }
}

TEST(BenchFileIoFlags, MissingDirectoryIsAClearError) {
    ToolRun r = run_tool({"-d", "/nonexistent/galay-bench-dir", "-n", "1"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("-d /nonexistent/galay-bench-dir"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
    ToolRun f = run_tool({"-d", "/etc/hostname", "-n", "1"});
    EXPECT_EQ(f.exit_code, 2);
    EXPECT_NE(f.err.find("not a directory"), std::string::npos) << f.err;
}

TEST(BenchFileIoFlags, DirectBlockSizeMustBeAligned) {
    std::string tried;
    auto d = galay::test::direct_io_dir(&tried);
    if (!d) GTEST_SKIP() << "SKIP: no directory accepts O_DIRECT; tried " << tried;
    galay::test::TempDir dir(*d);
    ToolRun r = run_tool({"--direct", "-b", "1000", "-n", "4", "-d", dir.path().string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("-b 1000"), std::string::npos) << r.err;
    EXPECT_TRUE(dir_is_empty(dir.path()));
}

class BenchFileIoRun : public galay::test::BackendTest {
protected:
    nlohmann::json run_json(std::vector<std::string> args, const std::filesystem::path& dir) {
        args.insert(args.end(),
                    {"--backend", galay::backend_name(GetParam()), "-d", dir.string(), "--json"});
        ToolRun r = run_tool(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
        EXPECT_TRUE(dir_is_empty(dir)) << "bench_file_io left files in " << dir;
        return j;
    }
};

TEST_P(BenchFileIoRun, TinyBufferedRunVerifiesEveryBlock) {
    galay::test::TempDir dir;
    nlohmann::json j = run_json({"-w", "2", "-n", "50"}, dir.path());
    if (j.is_discarded()) return;
    EXPECT_EQ(j["backend"], galay::backend_name(GetParam()));
    EXPECT_EQ(j["errors"], 0);
    EXPECT_EQ(j["reads"], 100);
    EXPECT_EQ(j["writes"], 100);
    EXPECT_EQ(j["bytes_read"], 100 * 4096);
    EXPECT_GT(j["read_iops"].get<double>(), 0);
    EXPECT_GT(j["write_iops"].get<double>(), 0);
    // IOPS come from the exact phase durations.
    const double from_duration = 100 / j["read_duration_s"].get<double>();
    EXPECT_NEAR(j["read_iops"].get<double>(), from_duration, from_duration * 1e-9);
}

TEST_P(BenchFileIoRun, TinyDirectBatchedRunVerifiesEveryBlock) {
    std::string tried;
    auto d = galay::test::direct_io_dir(&tried);
    if (!d) GTEST_SKIP() << "SKIP: no directory accepts O_DIRECT; tried " << tried;
    galay::test::TempDir dir(*d);
    nlohmann::json j = run_json({"-w", "2", "-n", "50", "-batch", "4", "--direct"}, dir.path());
    if (j.is_discarded()) return;
    EXPECT_EQ(j["errors"], 0);
    EXPECT_EQ(j["batch"], 4);
    EXPECT_EQ(j["direct"], true);
    EXPECT_EQ(j["reads"], 100);
    EXPECT_EQ(j["writes"], 100);
}

TEST_P(BenchFileIoRun, TablePrintsMicrosecondDurationsAndTheUsersRows) {
    galay::test::TempDir dir;
    ToolRun r = run_tool({"-w", "1", "-n", "20", "-b", "512", "--backend",
                          galay::backend_name(GetParam()), "-d", dir.path().string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has_microsecond_duration(r.out)) << r.out;
    for (const char* row :
         {"Total reads:", "Total writes:", "Data read:", "Data written:", "Read IOPS:",
          "Write IOPS:", "Read throughput:", "Write throughput:", "Errors:             0"})
        EXPECT_NE(r.out.find(row), std::string::npos) << row << " missing in:\n" << r.out;
    EXPECT_TRUE(dir_is_empty(dir.path()));
}

TEST_P(BenchFileIoRun, ACorruptedBlockIsCaughtAndFailsTheRun) {
    galay::test::TempDir dir;
    ToolRun r = run_tool({"-w", "2", "-n", "20", "--corrupt-block", "7", "--backend",
                          galay::backend_name(GetParam()), "-d", dir.path().string(), "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("worker 0 block 7: verify"), std::string::npos) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["errors"], 1);
    EXPECT_TRUE(dir_is_empty(dir.path()));
}

TEST_P(BenchFileIoRun, FixedBuffersVerifyEveryBlockAndCatchACorruptedOne) {
    // --fixed: registered buffers on io_uring (READ_FIXED/WRITE_FIXED), plain operations on epoll.
    std::string tried;
    auto d = galay::test::direct_io_dir(&tried);
    std::vector<std::vector<std::string>> variants{{"-w", "3", "-n", "40"},
                                                   {"-w", "3", "-n", "40", "-batch", "4"}};
    if (d)
        variants.push_back({"-w", "3", "-n", "40", "-batch", "4", "--direct"});
    else
        std::printf("SKIP (--direct variant): no directory accepts O_DIRECT; tried %s\n",
                    tried.c_str());
    const unsigned want_registered = GetParam() == galay::Backend::io_uring ? 3 : 0;
    for (auto args : variants) {
        const bool direct = args.back() == "--direct";
        galay::test::TempDir dir = direct ? galay::test::TempDir(*d) : galay::test::TempDir();
        args.push_back("--fixed");
        std::string trace;
        for (const auto& a : args)
            trace += a + " ";
        SCOPED_TRACE(trace);
        nlohmann::json j = run_json(args, dir.path());
        if (j.is_discarded()) return;
        EXPECT_EQ(j["errors"], 0);
        EXPECT_EQ(j["reads"], 120);
        EXPECT_EQ(j["writes"], 120);
        EXPECT_EQ(j["fixed"], true);
        EXPECT_EQ(j["fixed_registered_workers"], want_registered);
    }
    galay::test::TempDir dir;
    ToolRun r = run_tool({"-w", "2", "-n", "20", "-batch", "2", "--fixed", "--corrupt-block", "7",
                          "--backend", galay::backend_name(GetParam()), "-d", dir.path().string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("worker 0 block 7: verify"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("Fixed buffers: registered for " +
                         std::to_string(want_registered / 3 * 2) + " of 2 workers"),
              std::string::npos)
        << r.out;
    EXPECT_TRUE(dir_is_empty(dir.path()));
}

GALAY_INSTANTIATE_BACKENDS(BenchFileIoRun);

// ---------------------------------------------------------------------------------------------
// Memory and free space computed with overflow checks, and clear messages.

// -w 2 x --batch 1024 x 64 MiB buffers is 128 GiB: refused up front, before any file exists,
// rather than an uncaught std::bad_alloc (exit 134) that leaves the files behind.
TEST(BenchFileIoLimits, BuffersLargerThanMemoryAreRefusedUpFront) {
    galay::test::TempDir dir;
    ToolRun r = run_tool(
        {"-w", "2", "-n", "1", "-b", "67108864", "--batch", "1024", "-d", dir.path().string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("of memory"), std::string::npos) << r.err;
    EXPECT_TRUE(dir_is_empty(dir.path()));
}

// 4096 workers x 2^32 blocks x 1 MiB is 2^64 bytes: the free-space check multiplied it into 0
// and let the run start. The size is computed with overflow checks and refused.
TEST(BenchFileIoLimits, FileSizesThatOverflowAreRefused) {
    galay::test::TempDir dir;
    galay::test::ProcessResult r =
        galay::test::run_process({BENCH_FILE_IO_PATH, "-w", "4096", "-n", "4294967296", "-b",
                                  "1048576", "-d", dir.path().string()},
                                 std::chrono::seconds(30));
    EXPECT_FALSE(r.timed_out) << "the run started";
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("2^64"), std::string::npos) << r.err;
    EXPECT_TRUE(dir_is_empty(dir.path()));
}

/// A ramfs mounted on a fresh directory for the test's lifetime (needs CAP_SYS_ADMIN).
class RamfsDir {
public:
    RamfsDir() {
        mounted_ = ::mount("ramfs", dir_.path().c_str(), "ramfs", 0, nullptr) == 0;
        if (!mounted_) error_ = std::strerror(errno);
    }
    ~RamfsDir() {
        if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
    }
    bool mounted() const { return mounted_; }
    const std::string& error() const { return error_; }
    const std::filesystem::path& path() const { return dir_.path(); }

private:
    galay::test::TempDir dir_;
    bool mounted_ = false;
    std::string error_;
};

// ramfs reports 0 free blocks (it has no size limit); a free-space check that trusts that refuses
// every run with "only 0.0 MiB are free". It runs, its files being memory.
TEST_P(BenchFileIoRun, RunsOnRamfs) {
    RamfsDir ram;
    if (!ram.mounted()) GTEST_SKIP() << "SKIP: cannot mount a ramfs here: " << ram.error();
    ToolRun r = run_tool({"-w", "2", "-n", "20", "--backend", galay::backend_name(GetParam()), "-d",
                          ram.path().string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("0.0 MiB"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("(ramfs)"), std::string::npos) << r.out;
    EXPECT_TRUE(dir_is_empty(ram.path()));
}

/// Run bench_file_io as user nobody without CAP_IPC_LOCK and with RLIMIT_MEMLOCK = `kib`: the
/// limit an unprivileged user has. Empty when this cannot be arranged (not root, no util-linux).
std::vector<std::string> unprivileged(unsigned kib) {
    if (::geteuid() != 0 || ::access("/usr/bin/prlimit", X_OK) != 0 ||
        ::access("/usr/bin/setpriv", X_OK) != 0)
        return {};
    const std::string bytes = std::to_string(kib * 1024ull);
    return {"/usr/bin/prlimit", "--memlock=" + bytes + ":" + bytes,
            "/usr/bin/setpriv", "--reuid=65534",
            "--regid=65534",    "--clear-groups",
            "--inh-caps=-all",  "--bounding-set=-ipc_lock",
            BENCH_FILE_IO_PATH};
}

/// A directory user nobody can write to.
std::unique_ptr<galay::test::TempDir> shared_dir() {
    auto d = std::make_unique<galay::test::TempDir>();
    ::chmod(d->path().c_str(), 0777);
    return d;
}

// With --fixed, an unprivileged user's workers may get no registered buffers: the report says
// the kernel refused, what RLIMIT_MEMLOCK is and how to raise it, not just "0 of 2 workers".
TEST_P(BenchFileIoRun, FixedSaysWhyNoBufferWasRegistered) {
    std::vector<std::string> argv = unprivileged(256);
    if (argv.empty()) GTEST_SKIP() << "SKIP: needs root, prlimit and setpriv";
    auto dir = shared_dir();
    argv.insert(argv.end(),
                {"-w", "2", "-n", "4", "-b", "1048576", "-batch", "2", "--fixed", "--backend",
                 galay::backend_name(GetParam()), "-d", dir->path().string()});
    galay::test::ProcessResult r = galay::test::run_process(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (GetParam() == galay::Backend::epoll) {
        EXPECT_NE(r.out.find("registered for 0 of 2 workers (epoll: plain operations)"),
                  std::string::npos)
            << r.out;
    } else {
        EXPECT_NE(r.out.find("registered for 0 of 2 workers (the kernel refused"),
                  std::string::npos)
            << r.out;
        EXPECT_NE(r.out.find("RLIMIT_MEMLOCK is 256.0 KiB"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("ulimit -l"), std::string::npos) << r.out;
        EXPECT_NE(r.err.find("--fixed: 2 of 2 workers use plain buffers"), std::string::npos)
            << r.err;
    }
    EXPECT_TRUE(dir_is_empty(dir->path()));
}

// Under a small RLIMIT_MEMLOCK, io_uring set-up must say more than "Cannot allocate memory": it
// names the limit and `ulimit -l` (forced io_uring, and automatic selection, which
// reports memory errors instead of falling back).
TEST(BenchFileIoLimits, IoUringSetupUnderMemlockHintsAtUlimit) {
    if (!galay::probe_io_uring().usable) GTEST_SKIP() << "SKIP: no io_uring here";
    for (const char* backend : {"io_uring", "auto"}) {
        std::vector<std::string> argv = unprivileged(16);
        if (argv.empty()) GTEST_SKIP() << "SKIP: needs root, prlimit and setpriv";
        auto dir = shared_dir();
        argv.insert(argv.end(),
                    {"-w", "1", "-n", "4", "--backend", backend, "-d", dir->path().string()});
        galay::test::ProcessResult r = galay::test::run_process(argv);
        if (r.exit_code == 0) {
            GTEST_SKIP() << "SKIP: this kernel sets up io_uring rings within 16 KiB of "
                            "RLIMIT_MEMLOCK (it accounts ring memory elsewhere)";
        }
        EXPECT_EQ(r.exit_code, 1) << backend << ": " << r.err;
        EXPECT_NE(r.err.find("Cannot allocate memory"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("RLIMIT_MEMLOCK is 16 KiB"), std::string::npos)
            << backend << ": " << r.err;
        EXPECT_NE(r.err.find("ulimit -l"), std::string::npos) << backend << ": " << r.err;
        EXPECT_TRUE(dir_is_empty(dir->path()));
    }
}
