// One exit-code convention for every tool: 0 success (and --help), 1 a runtime failure, 2 a usage
// error. CLI11's own codes (104-114) must not leak out, and the examples refuse a bad port.
#include "support/process.hpp"

#include <string>
#include <vector>

namespace {

using galay::test::ProcessResult;

struct Tool {
    const char* name;
    const char* path;
    std::vector<std::string> required; // flags it cannot run without
};

const Tool kTools[] = {
    {"bench_client", BENCH_CLIENT_BIN, {}},
    {"bench_udp", BENCH_UDP_BIN, {}},
    {"bench_file_io", BENCH_FILE_IO_BIN, {}},
    {"aio_bench", AIO_BENCH_BIN, {"-f", "/tmp/galay-no-such-file"}},
    {"bench_latency", BENCH_LATENCY_BIN, {}},
};

TEST(ToolExitCodes, UnknownFlagIsExitCodeTwoWithOneLine) {
    for (const Tool& t : kTools) {
        std::vector<std::string> args{t.path};
        args.insert(args.end(), t.required.begin(), t.required.end());
        args.push_back("--no-such-flag");
        ProcessResult r = galay::test::run_process(args);
        EXPECT_TRUE(r.exited) << t.name;
        EXPECT_EQ(r.exit_code, 2) << t.name << ": " << r.err;
        EXPECT_NE(r.err.find(std::string(t.name) + ": error:"), std::string::npos)
            << t.name << ": " << r.err;
        EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << t.name << ": " << r.err;
    }
}

TEST(ToolExitCodes, BadValueIsExitCodeTwo) {
    const std::vector<std::vector<std::string>> cases = {
        {BENCH_CLIENT_BIN, "-c", "abc"},      {BENCH_CLIENT_BIN, "-c", "0"},
        {BENCH_CLIENT_BIN, "-p", "70000"},    {BENCH_UDP_BIN, "-s", "8"},
        {BENCH_UDP_BIN, "server", "-w", "0"}, {BENCH_UDP_BIN, "client", "-p", "0"},
        {BENCH_FILE_IO_BIN, "-w", "0"},       {AIO_BENCH_BIN, "-f", "/tmp/x", "-q", "0"},
    };
    for (const auto& c : cases) {
        ProcessResult r = galay::test::run_process(c);
        EXPECT_EQ(r.exit_code, 2) << c[0] << " " << c[1] << ": " << r.err;
    }
}

TEST(ToolExitCodes, HelpIsExitCodeZeroOnStdout) {
    for (const Tool& t : kTools) {
        ProcessResult r = galay::test::run_process({t.path, "--help"});
        EXPECT_EQ(r.exit_code, 0) << t.name << ": " << r.err;
        EXPECT_NE(r.out.find("--help"), std::string::npos) << t.name << ": " << r.out;
        EXPECT_TRUE(r.err.empty()) << t.name << ": " << r.err;
    }
    ProcessResult sub = galay::test::run_process({BENCH_UDP_BIN, "server", "--help"});
    EXPECT_EQ(sub.exit_code, 0) << sub.err;
    EXPECT_NE(sub.out.find("--rcvbuf"), std::string::npos) << sub.out;
}

// bench_latency's floating-point options use the shared validators: nan and inf are refused.
TEST(ToolExitCodes, BenchLatencyRefusesNanAndInf) {
    const std::vector<std::vector<std::string>> cases = {{"--sample-ms", "nan"},
                                                         {"--warmup-ms", "inf"},
                                                         {"churn", "-p", "9", "-d", "nan"},
                                                         {"churn", "-p", "9", "--warmup", "nan"},
                                                         {"churn", "-p", "9", "-d", "1e-310"}};
    for (const auto& c : cases) {
        std::vector<std::string> a{BENCH_LATENCY_BIN};
        a.insert(a.end(), c.begin(), c.end());
        ProcessResult r = galay::test::run_process(a);
        EXPECT_EQ(r.exit_code, 2) << c[c.size() - 2] << " " << c.back() << ": " << r.err;
    }
}

TEST(ExampleArguments, EchoServerValidatesItsPort) {
#ifndef ECHO_SERVER_BIN
    GTEST_SKIP() << "SKIP: the examples are not built (GALAY_BUILD_EXAMPLES=OFF)";
#else
    for (const char* bad : {"70000", "abc", "-1", "9000x", ""}) {
        ProcessResult r = galay::test::run_process({ECHO_SERVER_BIN, bad});
        EXPECT_TRUE(r.exited) << bad;
        EXPECT_EQ(r.exit_code, 2) << "'" << bad << "': " << r.out << r.err;
        EXPECT_TRUE(r.err.starts_with("echo_server: error: port: ")) << r.err;
    }
#endif
}

#if !GALAY_TEST_WITH_URING || !GALAY_TEST_WITH_AIO
// A build without io_uring or libaio (the no-uring preset): asking a tool for what the build left
// out is a runtime failure (exit 1, as when the kernel refuses io_uring) whose message names the
// CMake option, never a crash.
TEST(ToolExitCodes, BackendLeftOutOfTheBuildIsExitCodeOneNamingTheOption) {
    struct Case {
        std::vector<std::string> args;
        const char* option;
    };
    std::vector<Case> cases;
#if !GALAY_TEST_WITH_URING
    cases.push_back(
        {{BENCH_CLIENT_BIN, "--backend", "io_uring", "-p", "9"}, "GALAY_WITH_URING=OFF"});
    cases.push_back({{BENCH_FILE_IO_BIN, "--backend", "io_uring"}, "GALAY_WITH_URING=OFF"});
    cases.push_back({{BENCH_LATENCY_BIN, "--backend", "io_uring"}, "GALAY_WITH_URING=OFF"});
    cases.push_back({{BENCH_UDP_BIN, "server", "--backend", "io_uring"}, "GALAY_WITH_URING=OFF"});
    cases.push_back({{AIO_BENCH_BIN, "-f", "/tmp/galay-no-such-file", "-e", "io_uring"},
                     "GALAY_WITH_URING=OFF"});
#endif
#if !GALAY_TEST_WITH_AIO
    cases.push_back(
        {{AIO_BENCH_BIN, "-f", "/tmp/galay-no-such-file", "-e", "libaio"}, "GALAY_WITH_AIO=OFF"});
#endif
    for (const Case& c : cases) {
        ProcessResult r = galay::test::run_process(c.args);
        EXPECT_TRUE(r.exited) << c.args[0] << ": " << r.err;
        EXPECT_EQ(r.exit_code, 1) << c.args[0] << ": " << r.err;
        EXPECT_NE(r.err.find(c.option), std::string::npos) << c.args[0] << ": " << r.err;
    }
}
#endif

} // namespace
