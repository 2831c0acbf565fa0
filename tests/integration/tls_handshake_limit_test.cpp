// The handshake limit of the TLS servers (http_server --tls-* and tls_proxy, as programs, on
// every backend): clients that connect and say nothing hold at most --max-handshakes handshakes;
// a connection beyond them is closed at once and counted, and a real client (curl) completes its
// handshake while the limit is not reached and again once slots are free.
#include "support/process.hpp"
#include "support/tcp_pair.hpp"
#include "support/tls_pair.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

using namespace galay;
using namespace galay::test;

namespace {

constexpr int kLimit = 3;
constexpr int kBeyond = 3;

/// The port in a "... 0.0.0.0:PORT ..." line.
std::uint16_t port_of(const std::string& out) {
    const std::size_t at = out.find("0.0.0.0:");
    return at == std::string::npos ? 0 : static_cast<std::uint16_t>(std::stoi(out.substr(at + 8)));
}

/// Whether the server has closed `fd`: waits up to `ms` for it (0: only what has happened).
bool closed_by_peer(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return false;
    char b;
    return ::recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

class TlsHandshakeLimitTest : public BackendTest {
protected:
    std::string backend() const { return backend_name(GetParam()); }

    bool curl(std::uint16_t port) const {
        return run_process({"curl", "-sS", "--http1.1", "--max-time", "20", "--cacert",
                            pki().ca().cert, "https://localhost:" + std::to_string(port) + "/"})
                   .out == "Hello, World!";
    }

    /// The walk both programs take, against the TLS port `port` with --max-handshakes kLimit.
    /// (The connections of test::connect_blocking say nothing: no ClientHello.)
    void walk(std::uint16_t port) {
        std::vector<int> held;
        for (int i = 0; i < kLimit - 1; ++i)
            held.push_back(test::connect_blocking(port));
        EXPECT_TRUE(curl(port)) << "a handshake within the limit";
        held.push_back(test::connect_blocking(port)); // the limit reached
        std::vector<int> beyond;
        for (int i = 0; i < kBeyond; ++i)
            beyond.push_back(test::connect_blocking(port));
        for (int fd : beyond) // (the handshake timeout is far longer than this wait)
            EXPECT_TRUE(closed_by_peer(fd, 20'000))
                << "a connection beyond the limit was not closed";
        for (int fd : held)
            EXPECT_FALSE(closed_by_peer(fd, 0)) << "a connection within the limit was closed";
        EXPECT_FALSE(curl(port)) << "a handshake beyond the limit";
        for (int fd : held)
            ::close(fd);
        // The server frees the slots when it reads the end of those connections: a client that
        // comes a moment too early is refused, one of the next attempts is served.
        bool served = false;
        for (int attempt = 0; attempt < 50 && !served; ++attempt)
            served = curl(port);
        EXPECT_TRUE(served) << "no handshake once the silent connections were gone";
        for (int fd : beyond)
            ::close(fd);
    }

    void SetUp() override {
        BackendTest::SetUp();
        if (run_process({"curl", "--version"}).exit_code != 0)
            GTEST_SKIP() << "SKIP: curl is not installed";
    }
};

TEST_P(TlsHandshakeLimitTest, http_server_closes_connections_beyond_max_handshakes) {
    Process p({HTTP_SERVER_BIN, "0", "--backend", backend(), "--tls-cert", pki().server().cert,
               "--tls-key", pki().server().key, "--max-handshakes", std::to_string(kLimit),
               "--header-timeout", "120"});
    ASSERT_TRUE(p.wait_for("listening on") && p.wait_for("\n")) << p.err();
    walk(port_of(p.out()));
    p.signal(SIGTERM);
    const ProcessResult r = p.finish(std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // "..., N handshakes refused": the kBeyond silent ones and the curl at the limit, at least.
    const std::size_t at = r.err.find(" handshakes refused");
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::size_t from = r.err.rfind(' ', at - 1) + 1;
    EXPECT_GE(std::stoul(r.err.substr(from, at - from)), std::size_t{kBeyond + 1}) << r.err;
}

TEST_P(TlsHandshakeLimitTest, tls_proxy_closes_connections_beyond_max_handshakes) {
    Process upstream({HTTP_SERVER_BIN, "0", "--backend", backend()});
    ASSERT_TRUE(upstream.wait_for("listening on") && upstream.wait_for("\n")) << upstream.err();
    Process proxy({"env", "GALAY_BACKEND=" + backend(), TLS_PROXY_BIN, "0",
                   "127.0.0.1:" + std::to_string(port_of(upstream.out())), "--tls-cert",
                   pki().server().cert, "--tls-key", pki().server().key, "--max-handshakes",
                   std::to_string(kLimit)});
    ASSERT_TRUE(proxy.wait_for("tls_proxy: ") && proxy.wait_for("\n")) << proxy.err();
    walk(port_of(proxy.out()));
    EXPECT_TRUE(
        proxy.wait_for("handshakes in progress (--max-handshakes)", true, std::chrono::seconds(20)))
        << proxy.err();
    proxy.signal(SIGTERM);
    (void)proxy.finish(std::chrono::seconds(30));
    upstream.signal(SIGTERM);
    EXPECT_EQ(upstream.finish(std::chrono::seconds(30)).exit_code, 0);
}

GALAY_INSTANTIATE_BACKENDS(TlsHandshakeLimitTest);

} // namespace
