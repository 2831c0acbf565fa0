// galay-top run as a program against a running bench_server --metrics: one snapshot that lists
// the connection task waiting on its receive, and the exit codes of an endpoint it cannot reach
// and of bad arguments.
#include "support/backends.hpp"
#include "support/process.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#if !defined(GALAY_TOP_PATH) || !defined(BENCH_SERVER_PATH)
#error "GALAY_TOP_PATH and BENCH_SERVER_PATH must name the programs"
#endif

namespace {

using namespace galay;

/// The port in the first "<prefix>HOST:PORT" of `text`, or 0.
std::uint16_t port_after(const std::string& text, const std::string& prefix) {
    const auto at = text.find(prefix);
    if (at == std::string::npos) return 0;
    const auto colon = text.find(':', at + prefix.size());
    return colon == std::string::npos
               ? 0
               : static_cast<std::uint16_t>(std::stoi(text.substr(colon + 1)));
}

/// A task waits on a receive on a socket (recv, or recv_pooled: bench_server's default).
bool waits_on_recv(const std::string& screen) {
    return screen.find("recv fd ") != std::string::npos ||
           screen.find("recv_pooled fd ") != std::string::npos;
}

using GalayTopTest = test::BackendTest;

TEST_P(GalayTopTest, OnceAgainstARunningBenchServerPrintsItsTasks) {
    test::Process server({BENCH_SERVER_PATH, "0", "--threads", "2", "--metrics", "0", "--backend",
                          backend_name(GetParam())});
    server.wait_for("/metrics\n"); // the second of the two lines it prints at start
    const std::string lines = server.out();
    const std::uint16_t port = port_after(lines, "listening on ");
    const std::uint16_t metrics = port_after(lines, "metrics on http://");
    ASSERT_NE(port, 0) << lines;
    ASSERT_NE(metrics, 0) << lines;
    // One idle connection: its task waits on a receive.
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const std::string endpoint = "127.0.0.1:" + std::to_string(metrics);
    test::ProcessResult r;
    for (int i = 0; i < 100; ++i) { // until the server's worker has taken the connection
        r = test::run_process({GALAY_TOP_PATH, "--once", endpoint});
        if (r.exit_code != 0 || waits_on_recv(r.out)) break;
    }
    ::close(fd);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("galay-top " + endpoint), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("WORKER  BACKEND"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("LONGEST TURN"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(backend_name(GetParam())), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("LONGEST WAITS"), std::string::npos) << r.out;
    EXPECT_TRUE(waits_on_recv(r.out)) << r.out;
    server.signal(SIGTERM);
    EXPECT_EQ(server.finish().exit_code, 0);
}

TEST_P(GalayTopTest, AJoinShowsItsPendingChildrenAndEachWorkerItsLongestTurn) {
    // A metrics endpoint in this process, and a task in when_all over three children of which
    // two wait on an Event.
    Runtime rt(rt_options(1));
    auto listening = serve(rt, SocketAddr::loopback_v4(0),
                           [&rt](TcpStream c) { return metrics::serve_scrape(std::move(c), rt); });
    ASSERT_TRUE(listening) << listening.error().message();
    Event ev;
    auto h = rt.spawn_on(0, [](Event& ev) -> Task<void> {
        auto child = [](Event& ev) -> Task<int> {
            (void)co_await ev.wait();
            co_return 1;
        };
        (void)co_await when_all(child(ev), child(ev), []() -> Task<int> { co_return 0; }());
    }(ev));
    const std::string endpoint = "127.0.0.1:" + std::to_string(listening->local_addr().port());
    test::ProcessResult r;
    for (int i = 0; i < 100; ++i) { // until the task waits in its join
        r = test::run_process({GALAY_TOP_PATH, "--once", endpoint});
        if (r.exit_code != 0 || r.out.find("when all") != std::string::npos) break;
    }
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("when all (2 of 3 children pending)"), std::string::npos) << r.out;
    // Worker 0's row: its longest loop turn since the previous scrape, in ms.
    const std::size_t row = r.out.find("\n0       ");
    ASSERT_NE(row, std::string::npos) << r.out;
    EXPECT_NE(r.out.substr(row, r.out.find('\n', row + 1) - row).find(" ms"), std::string::npos)
        << r.out;
    ev.set();
    h.join();
    listening->stop();
}

GALAY_INSTANTIATE_BACKENDS(GalayTopTest);

TEST(GalayTop, AnUnreachableEndpointIsAClearErrorAndExitsOne) {
    const test::ProcessResult bad_host =
        test::run_process({GALAY_TOP_PATH, "--once", "no-such-host.invalid:9100"});
    EXPECT_EQ(bad_host.exit_code, 1);
    EXPECT_NE(bad_host.err.find("galay-top: error: cannot resolve no-such-host.invalid"),
              std::string::npos)
        << bad_host.err;
    // A port nobody listens on: bind one, read its number, close it.
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    ::close(fd);
    const test::ProcessResult refused = test::run_process(
        {GALAY_TOP_PATH, "--once", "127.0.0.1:" + std::to_string(ntohs(a.sin_port))});
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_NE(refused.err.find("galay-top: error: cannot connect to"), std::string::npos)
        << refused.err;
}

TEST(GalayTop, BadArgumentsExitTwoWithOneLine) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--once", "localhost"},
          std::vector<std::string>{"--once", "localhost:99999"},
          std::vector<std::string>{"--once", "localhost:x"}, std::vector<std::string>{},
          std::vector<std::string>{"--interval-ms", "5", "localhost:1"}}) {
        std::vector<std::string> argv{GALAY_TOP_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        const test::ProcessResult r = test::run_process(argv);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_TRUE(r.err.starts_with("galay-top: error: ")) << r.err;
        EXPECT_NE(r.err.find("(see --help)"), std::string::npos) << r.err;
    }
}

} // namespace
