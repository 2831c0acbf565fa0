// bench_client run as a program against an echo server in this process (its own thread and
// scheduler), on each backend: large messages, Ctrl-C, host errors, buffer limits, bad numbers.
#include "support/backends.hpp"
#include "support/echo_server.hpp"
#include "support/process.hpp"

#include <nlohmann/json.hpp>

#ifndef BENCH_CLIENT_BIN
#error "BENCH_CLIENT_BIN must name the bench_client binary"
#endif

namespace {

using galay::test::Process;
using galay::test::ProcessResult;

std::vector<std::string> client_args(std::uint16_t port, galay::Backend b,
                                     std::vector<std::string> more) {
    std::vector<std::string> a{BENCH_CLIENT_BIN,     "-h",        "127.0.0.1",           "-p",
                               std::to_string(port), "--backend", galay::backend_name(b)};
    a.insert(a.end(), more.begin(), more.end());
    return a;
}

class BenchClientRun : public galay::test::BackendTest {};

// A client that sent a whole batch before reading any echo would stall once size x pipeline is
// larger than the socket buffers of both ends (and blame the server). A 16 MiB message echoes.
TEST_P(BenchClientRun, SixteenMebibyteMessagesEchoWhileTheClientSends) {
    galay::test::EchoServerThread server(GetParam());
    ProcessResult r = galay::test::run_process(
        client_args(server.port(), GetParam(),
                    {"-c", "1", "-d", "0.3", "-s", "16777216", "--timeout", "3", "--json"}));
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out << r.err;
    EXPECT_EQ(j["errors"], 0);
    EXPECT_GT(j["successful"].get<std::uint64_t>(), 0u) << r.out;
    EXPECT_EQ(j["interrupted"], false);
}

// The same with a deep pipeline of smaller messages (size x pipeline = 16 MiB).
TEST_P(BenchClientRun, DeepPipelinesBeyondTheSocketBuffersEcho) {
    galay::test::EchoServerThread server(GetParam());
    ProcessResult r = galay::test::run_process(
        client_args(server.port(), GetParam(),
                    {"-c", "2", "-d", "0.3", "-s", "65536", "-P", "256", "--timeout", "3"}));
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("Errors: 0"), std::string::npos) << r.out;
}

// Ctrl-C must not lose the figures: the first SIGINT ends the run and prints the summary of what
// was measured.
TEST_P(BenchClientRun, FirstSigintPrintsTheSummaryOfWhatWasMeasured) {
    galay::test::EchoServerThread server(GetParam());
    Process p(client_args(server.port(), GetParam(), {"-c", "4", "-d", "60"}));
    ASSERT_TRUE(p.wait_for("[1s] QPS:")) << p.out() << p.err(); // measuring
    p.signal(SIGINT);
    ProcessResult r = p.finish();
    ASSERT_FALSE(r.timed_out);
    EXPECT_TRUE(r.exited) << "killed by signal " << r.signal;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("=== Final Results ==="), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Interrupted: SIGINT"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Errors: 0"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("Successful: 0\n"), std::string::npos) << r.out;
}

// SIGTERM twice from one sender at once (what `timeout` does: the child, then its process
// group) is one request: the summary is printed, as JSON here.
TEST_P(BenchClientRun, TimeoutsDoubleSigtermStillGivesTheSummary) {
    galay::test::EchoServerThread server(GetParam());
    Process p(client_args(server.port(), GetParam(), {"-c", "2", "-d", "60", "--json"}));
    ASSERT_TRUE(p.wait_for("[1s] QPS:", true)) << p.err(); // per-second lines go to stderr
    p.signal(SIGTERM);
    p.signal(SIGTERM);
    ProcessResult r = p.finish();
    ASSERT_FALSE(r.timed_out);
    EXPECT_TRUE(r.exited) << "killed by signal " << r.signal;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["interrupted"], true);
    EXPECT_GT(j["successful"].get<std::uint64_t>(), 0u);
}

// A second signal (here a different one, both delivered at once while the process is stopped)
// exits at once, without a summary, killed by that signal.
TEST_P(BenchClientRun, SecondSignalExitsAtOnce) {
    galay::test::EchoServerThread server(GetParam());
    Process p(client_args(server.port(), GetParam(), {"-c", "2", "-d", "60"}));
    ASSERT_TRUE(p.wait_for("========================\n")) << p.out() << p.err();
    p.signal(SIGSTOP);
    p.signal(SIGINT);
    p.signal(SIGTERM);
    p.signal(SIGCONT);
    ProcessResult r = p.finish();
    ASSERT_FALSE(r.timed_out);
    EXPECT_FALSE(r.exited) << r.out;
    EXPECT_TRUE(r.signal == SIGINT || r.signal == SIGTERM) << r.signal;
    EXPECT_EQ(r.out.find("=== Final Results ==="), std::string::npos) << r.out;
}

// An unresolvable host is reported as such, not as "No route to host".
TEST_P(BenchClientRun, UnresolvableHostSaysSo) {
    ProcessResult r =
        galay::test::run_process({BENCH_CLIENT_BIN, "-h", "no-such-host.invalid", "-p", "9", "-d",
                                  "0.1", "--backend", galay::backend_name(GetParam())});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("cannot resolve no-such-host.invalid"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("No route to host"), std::string::npos) << r.err;
}

GALAY_INSTANTIATE_BACKENDS(BenchClientRun);

// 1 connection x 64 MiB x 4096 in flight needs 512 GiB of buffers: refused up front as a usage
// error, not an uncaught std::bad_alloc (exit 134).
TEST(BenchClientFlags, BuffersLargerThanMemoryAreRefusedUpFront) {
    ProcessResult r = galay::test::run_process(
        {BENCH_CLIENT_BIN, "-c", "1", "-s", "67108864", "-P", "4096", "-p", "9"});
    EXPECT_TRUE(r.exited) << "killed by signal " << r.signal;
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("of memory"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("512.0 GiB"), std::string::npos) << r.err;
}

// nan passes a naive floating-point range check (-d nan ignored, --timeout nan failing every
// receive); nan, inf, denormals and values that round to 0 ns are usage errors.
TEST(BenchClientFlags, NanInfAndDenormalSecondsAreUsageErrors) {
    const std::pair<const char*, const char*> cases[] = {
        {"-d", "nan"},         {"-d", "inf"},        {"-d", "1e-310"},
        {"--warmup", "nan"},   {"--timeout", "nan"}, {"--timeout", "inf"},
        {"--warmup", "1e-12"}, {"-d", "0x1p-1074"},  {"--timeout", "1e-400"},
    };
    for (auto [flag, value] : cases) {
        ProcessResult r = galay::test::run_process({BENCH_CLIENT_BIN, "-p", "9", flag, value});
        EXPECT_EQ(r.exit_code, 2) << flag << " " << value << ": " << r.err;
        EXPECT_NE(r.err.find(flag), std::string::npos) << flag << " " << value << ": " << r.err;
    }
}

} // namespace
