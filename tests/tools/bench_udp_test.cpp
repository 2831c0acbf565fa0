// bench_udp run as a program, on each backend: busy ports, Ctrl-C, host errors, bad numbers,
// memory limits.
#include "support/backends.hpp"
#include "support/process.hpp"

#include <nlohmann/json.hpp>

#ifndef BENCH_UDP_BIN
#error "BENCH_UDP_BIN must name the bench_udp binary"
#endif

namespace {

using galay::test::Process;
using galay::test::ProcessResult;

class BenchUdpRun : public galay::test::BackendTest {
protected:
    std::vector<std::string> args(std::vector<std::string> a) const {
        a.insert(a.begin(), BENCH_UDP_BIN);
        a.insert(a.end(), {"--backend", galay::backend_name(GetParam())});
        return a;
    }
};

/// "listening on 127.0.0.1:40123 (...)" -> "40123"
std::string listening_port(const std::string& out) {
    const auto at = out.find("listening on ");
    if (at == std::string::npos) return {};
    const auto end = out.find(' ', at + 13);
    const auto colon = out.rfind(':', end);
    return out.substr(colon + 1, end - colon - 1);
}

// With SO_REUSEPORT open to any process, a second server on the port of a leftover one would start
// silently and the kernel would split the traffic between them. Binding a port another process
// holds is one clear error, exit code 1.
TEST_P(BenchUdpRun, ServerRefusesAPortAnotherServerHolds) {
    Process first(args({"server", "-p", "0", "-w", "2", "-h", "127.0.0.1"}));
    ASSERT_TRUE(first.wait_for(")\n")) << first.out() << first.err();
    const std::string port = listening_port(first.out());
    Process second(args({"server", "-p", port, "-w", "2", "-h", "127.0.0.1"}));
    // Before the fix the second server said "listening on ..." and ran.
    const bool started = second.wait_for("listening on", false, std::chrono::seconds(20));
    if (started) second.signal(SIGKILL);
    ProcessResult r = second.finish();
    EXPECT_FALSE(started) << "a second server shares port " << port << ": " << r.out;
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("Address already in use"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("port " + port), std::string::npos) << r.err;
    first.signal(SIGTERM);
    ProcessResult f = first.finish();
    EXPECT_EQ(f.exit_code, 0) << f.err;
}

// A server on a free port (-p 0) prints the port it got; SIGTERM stops it with its counters.
TEST_P(BenchUdpRun, ServerPrintsItsPortAndStopsOnSigterm) {
    Process server(args({"server", "-p", "0", "-w", "2", "-h", "127.0.0.1"}));
    ASSERT_TRUE(server.wait_for(")\n")) << server.out() << server.err();
    const std::string port = listening_port(server.out());
    EXPECT_NE(port, "0") << server.out();
    EXPECT_NE(port, "") << server.out();
    ProcessResult c = galay::test::run_process(
        args({"client", "-h", "127.0.0.1", "-p", port, "-c", "2", "-n", "200", "--json"}));
    EXPECT_EQ(c.exit_code, 0) << c.err;
    server.signal(SIGTERM);
    ProcessResult r = server.finish();
    EXPECT_TRUE(r.exited) << "killed by signal " << r.signal;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("stopped by SIGTERM: 400 datagrams received, 400 echoed"),
              std::string::npos)
        << r.out;
}

// Ctrl-C must not lose the results: the first SIGINT stops the clients, lets the datagrams in
// flight come back, and prints the report.
TEST_P(BenchUdpRun, FirstSigintPrintsTheReportOfWhatWasMeasured) {
    Process p(args({"-d", "60", "-c", "2", "-w", "1"}));
    ASSERT_TRUE(p.wait_for("[1s] Sent:")) << p.out() << p.err();
    p.signal(SIGINT);
    ProcessResult r = p.finish();
    ASSERT_FALSE(r.timed_out);
    EXPECT_TRUE(r.exited) << "killed by signal " << r.signal;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Interrupted: SIGINT"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Total Packets Received:"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("Total Packets Received: 0\n"), std::string::npos) << r.out;
}

// The same in message mode, with JSON, and the double SIGTERM of `timeout`.
TEST_P(BenchUdpRun, TimeoutsDoubleSigtermStillGivesTheReport) {
    Process p(args({"-n", "100000000", "-c", "2", "-w", "1", "--json"}));
    // With --json nothing is printed before the report: wait for the stop handlers instead.
    ASSERT_TRUE(p.wait_catches(SIGTERM));
    p.signal(SIGTERM);
    p.signal(SIGTERM);
    ProcessResult r = p.finish();
    ASSERT_FALSE(r.timed_out);
    EXPECT_TRUE(r.exited) << "killed by signal " << r.signal;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out << r.err;
    EXPECT_EQ(j["interrupted"], true);
    EXPECT_LT(j["packets_sent"].get<std::uint64_t>(), 200000000u);
}

// An unresolvable host is reported as such, not as "No route to host".
TEST_P(BenchUdpRun, UnresolvableHostSaysSo) {
    ProcessResult r =
        galay::test::run_process(args({"client", "-h", "no-such-host.invalid", "-p", "9"}));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("cannot resolve no-such-host.invalid"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("No route to host"), std::string::npos) << r.err;
}

GALAY_INSTANTIATE_BACKENDS(BenchUdpRun);

// nan, inf and denormals are usage errors: unchecked, --drain-timeout nan reports 100% loss,
// --max-loss nan is ignored, -d 1e-300 switches to duration mode with a window of 0 ns.
TEST(BenchUdpFlags, NanInfAndDenormalNumbersAreUsageErrors) {
    const std::vector<std::vector<std::string>> cases = {
        {"--drain-timeout", "nan"},
        {"--stall-timeout", "nan"},
        {"--max-loss", "nan"},
        {"-d", "nan"},
        {"-d", "1e-300"},
        {"-d", "inf"},
        {"--warmup", "nan"},
        {"--max-loss", "1e-320"},
        {"--drain-timeout", "1e-400"},
        {"client", "-p", "9", "--drain-timeout", "nan"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> a{BENCH_UDP_BIN};
        a.insert(a.end(), c.begin(), c.end());
        ProcessResult r = galay::test::run_process(a);
        const std::string& flag = c[c.size() - 2];
        EXPECT_EQ(r.exit_code, 2) << flag << " " << c.back() << ": " << r.err;
        EXPECT_NE(r.err.find(flag), std::string::npos) << flag << ": " << r.err;
    }
}

// Client buffers and loss ledgers larger than the machine are refused up front.
TEST(BenchUdpFlags, MemoryLargerThanTheMachineIsRefusedUpFront) {
    ProcessResult r = galay::test::run_process(
        {BENCH_UDP_BIN, "client", "-p", "9", "-c", "100000", "-n", "1099511627776"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("of memory"), std::string::npos) << r.err;
}

} // namespace
