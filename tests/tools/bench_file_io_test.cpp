// bench_file_io as its users run it: flag errors, directory errors, and tiny verified runs on
// every backend whose --json output parses. The binary's path comes from CMake.
#include "support/backends.hpp"
#include "support/files.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef BENCH_FILE_IO_PATH
#error "BENCH_FILE_IO_PATH must name the bench_file_io binary"
#endif

extern char** environ;

namespace {

struct ToolRun {
    int exit_code = -1;
    std::string out, err;
};

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

/// Run bench_file_io with `args`; stdout and stderr are captured through files.
ToolRun run_tool(const std::vector<std::string>& args) {
    galay::test::TempDir capture;
    const std::string out = (capture / "stdout").string(), err = (capture / "stderr").string();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<std::string> argv_s{BENCH_FILE_IO_PATH};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ToolRun r;
    if (rc != 0) {
        r.err = std::string("posix_spawn: ") + std::strerror(rc);
        return r;
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
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
        {{"-w", "0"}, "--workers"},
        {{"-n", "0"}, "--ops"},
        {{"-b", "abc"}, "--block-size"},
        {{"-batch", "0"}, "batch"},
        {{"-batch", "x"}, "batch"},
        {{"--bogus"}, "--bogus"},
        {{"--backend", "kqueue"}, "--backend"},
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
