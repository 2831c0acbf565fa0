// bench_latency run as a program: usage errors (exit 2), servers that misbehave (close early,
// echo other bytes: exit 1 with a message naming it), tiny verified runs on every backend whose
// --json output carries the raw samples of the five benchmarks, and the churn client with its
// fd accounting. The misbehaving servers are plain blocking sockets on a thread of this test.
#include "support/backends.hpp"
#include "support/files.hpp"
#include "support/process.hpp"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#ifndef BENCH_LATENCY_PATH
#error "BENCH_LATENCY_PATH must name the bench_latency binary"
#endif

namespace {

using ToolRun = galay::test::ProcessResult;

/// Run bench_latency with `args` to the end, its stdout and stderr captured.
ToolRun run_tool(const std::vector<std::string>& args) {
    std::vector<std::string> argv{BENCH_LATENCY_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return galay::test::run_process(std::move(argv));
}

/// A blocking loopback server on a thread of its own that answers each read in one of three
/// ways: echo it, close the connection without answering, or echo it with one byte changed.
class TestServer {
public:
    enum class Behaviour { echo, close_early, corrupt };

    explicit TestServer(Behaviour b)
        : behaviour_(b) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int one = 1;
        ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 1024))
            throw std::runtime_error("TestServer: bind/listen failed");
        socklen_t len = sizeof a;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~TestServer() {
        stop_ = true;
        ::shutdown(fd_, SHUT_RDWR); // wakes the blocked accept
        thread_.join();
        ::close(fd_);
    }
    std::uint16_t port() const { return port_; }

private:
    void serve() {
        while (!stop_) {
            int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) {
                if (stop_) return;
                continue;
            }
            char buf[4096];
            for (;;) {
                ssize_t n = ::read(c, buf, sizeof buf);
                if (n <= 0 || behaviour_ == Behaviour::close_early) break;
                if (behaviour_ == Behaviour::corrupt) buf[n - 1] ^= 0x5a;
                if (::write(c, buf, static_cast<std::size_t>(n)) != n) break;
            }
            ::close(c);
        }
    }

    Behaviour behaviour_;
    int fd_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

const std::vector<std::string> kTiny = {"-n", "3", "--sample-ms", "0.2", "--warmup-ms", "1"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

} // namespace

TEST(BenchLatencyCli, UsageErrorsExitTwo) {
    EXPECT_EQ(run_tool({"--no-such-flag"}).exit_code, 2);
    EXPECT_EQ(run_tool({"-n", "1"}).exit_code, 2); // fewer than 2 samples
    ToolRun r = run_tool({"--bench", "no_such_benchmark"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("unknown benchmark 'no_such_benchmark'"), std::string::npos) << r.err;
    EXPECT_EQ(run_tool({"churn"}).exit_code, 2); // -p is required
    EXPECT_EQ(run_tool({"--idle-spin", "-1"}).exit_code, 2);
    EXPECT_EQ(run_tool({"server", "--idle-spin", "soon"}).exit_code, 2);
    EXPECT_EQ(run_tool({"--help"}).exit_code, 0);
}

TEST(BenchLatencyCli, AServerThatClosesEarlyIsAnError) {
    TestServer server(TestServer::Behaviour::close_early);
    for (const char* bench : {"connection_strategy/reuse", "network_latency_100B"}) {
        ToolRun r = run_tool(with(kTiny, {"-p", std::to_string(server.port()), "--bench", bench}));
        EXPECT_EQ(r.exit_code, 1) << bench;
        EXPECT_NE(r.err.find("the server closed the connection after 0 of"), std::string::npos)
            << r.err;
        EXPECT_NE(r.err.find(bench), std::string::npos) << r.err;
    }
}

TEST(BenchLatencyCli, AServerThatEchoesOtherBytesIsAnError) {
    TestServer server(TestServer::Behaviour::corrupt);
    ToolRun r = run_tool(
        with(kTiny, {"-p", std::to_string(server.port()), "--bench", "network_latency_1000B"}));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("echo mismatch: byte"), std::string::npos) << r.err;
}

TEST(BenchLatencyCli, AClosedPortIsAnError) {
    int port = 0;
    { // a port that was free a moment ago
        TestServer s(TestServer::Behaviour::echo);
        port = s.port();
    }
    ToolRun r = run_tool(with(kTiny, {"-p", std::to_string(port)}));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("connect to 127.0.0.1"), std::string::npos) << r.err;
}

TEST(BenchLatencyCli, AgainstACorrectServerEveryBenchmarkHasItsSamples) {
    TestServer server(TestServer::Behaviour::echo);
    ToolRun r = run_tool(with(kTiny, {"-p", std::to_string(server.port()), "--json"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["schema"], "galay-latency/1");
    ASSERT_EQ(j["benchmarks"].size(), 5u);
    EXPECT_EQ(j["benchmarks"][0]["name"], "network_latency_100B");
    EXPECT_EQ(j["benchmarks"][4]["name"], "throughput_100_messages");
    for (const auto& b : j["benchmarks"]) {
        ASSERT_EQ(b["sample_ns"].size(), 3u);
        ASSERT_EQ(b["sample_iterations"].size(), 3u);
        const std::uint64_t iterations = b["sample_iterations"][0];
        EXPECT_EQ(b["iteration_ns"].size(), 3 * iterations);
        for (const auto& ns : b["sample_ns"])
            EXPECT_GT(ns.get<std::int64_t>(), 0);
    }
}

class BenchLatencyBackend : public galay::test::BackendTest {};

TEST_P(BenchLatencyBackend, StartsItsOwnServerAndPrintsTheStudyTable) {
    const std::string be = galay::backend_name(GetParam());
    ToolRun r =
        run_tool(with(kTiny, {"--backend", be, "--server-cpu", "-1", "--client-cpu", "-1"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("galay " + be + " client"), std::string::npos) << r.out;
    for (const char* name :
         {"network_latency_100B", "network_latency_1000B", "connection_strategy/new_connection",
          "connection_strategy/reuse", "throughput_100_messages"})
        EXPECT_NE(r.out.find(name), std::string::npos) << name;
    EXPECT_NE(r.out.find("±"), std::string::npos);
}

TEST_P(BenchLatencyBackend, WithAnIdleSpinBothEndsSpinAndEveryByteIsChecked) {
    const std::string be = galay::backend_name(GetParam());
    ToolRun r = run_tool(with(kTiny, {"--backend", be, "--server-cpu", "-1", "--client-cpu", "-1",
                                      "--idle-spin", "50", "--json"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["implementation"], "galay-" + be + "-spin");
    EXPECT_EQ(j["idle_spin_us"], 50);
    EXPECT_NE(j["server"].get<std::string>().find("idle spin 50 us"), std::string::npos)
        << j["server"];
    EXPECT_EQ(j["benchmarks"].size(), 5u);
}

TEST_P(BenchLatencyBackend, ChurnCountsConnectionsAndTheServersFds) {
    TestServer server(TestServer::Behaviour::echo);
    ToolRun r = run_tool({"churn", "-p", std::to_string(server.port()), "-c", "4", "-n", "300",
                          "--backend", galay::backend_name(GetParam()), "--server-pid",
                          std::to_string(::getpid()), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["connections"], 300);
    EXPECT_EQ(j["errors"], 0);
    EXPECT_EQ(j["leaked_fds"], 0);
    EXPECT_GT(j["latency_us"]["p99"].get<double>(), 0);
    // Its own CPU per connection (what a client-side change is measured by): 300 connections
    // cannot take less than a system call each.
    ASSERT_TRUE(j.contains("client_cpu_us_per_conn")) << r.out;
    EXPECT_GT(j["client_cpu_us_per_conn"].get<double>(), 0);
}

TEST_P(BenchLatencyBackend, ChurnAgainstAServerThatEchoesOtherBytesFails) {
    TestServer server(TestServer::Behaviour::corrupt);
    ToolRun r = run_tool({"churn", "-p", std::to_string(server.port()), "-c", "2", "-n", "20",
                          "--backend", galay::backend_name(GetParam())});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("echo mismatch"), std::string::npos) << r.err;
}

GALAY_INSTANTIATE_BACKENDS(BenchLatencyBackend);
