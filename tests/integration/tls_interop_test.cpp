// TLS against real peers, on every backend: galay's client against `openssl s_server`, galay's
// server against `openssl s_client` (TLS 1.3 and 1.2), Python's ssl module and Go's crypto/tls (a
// TLS stack that shares no code with OpenSSL), as processes on loopback ephemeral ports.
#include "support/process.hpp"
#include "support/tls_pair.hpp"

#include <optional>
#include <thread>
#include <vector>

using namespace galay;
using namespace galay::test;
using namespace std::chrono_literals;

namespace {

class TlsInteropTest : public BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (IsSkipped()) return;
        if (run_process({"openssl", "version"}).exit_code != 0)
            GTEST_SKIP() << "SKIP: the openssl program is not installed (Debian: openssl)";
    }
};

/// The port in s_server's "ACCEPT 127.0.0.1:PORT" line.
std::uint16_t accept_port(const std::string& out) {
    const std::size_t at = out.find("ACCEPT ");
    const std::size_t colon = out.find(':', at);
    return static_cast<std::uint16_t>(std::stoi(out.substr(colon + 1)));
}

/// One connection from `l` with its server handshake done (nullopt, the failure recorded, if not).
Task<std::optional<tls::Stream>> accept_handshaken(const tls::Context& sctx, TcpListener& l) {
    auto conn = co_await l.accept().timeout(30s);
    EXPECT_TRUE(conn.has_value());
    if (!conn) co_return std::nullopt;
    tls::Stream t = tls::Stream::server(sctx, std::move(*conn));
    auto hs = co_await t.handshake().timeout(30s);
    EXPECT_TRUE(hs.has_value()) << t.last_error();
    if (!hs) co_return std::nullopt;
    co_return std::optional<tls::Stream>(std::move(t));
}

/// A galay TLS server on its own thread and scheduler: accepts one connection on `l`, echoes
/// every byte (read `chunk` bytes at a time: less than a record's 16 KiB reads records in
/// pieces) until the client's close_notify, then sends its own.
struct TlsEchoServer {
    std::string alpn;         ///< what the handshake negotiated
    std::string echoed;       ///< every byte echoed, in order
    bool clean_close = false; ///< the client's close_notify arrived
    Result<void> shutdown;
    std::thread thread;

    TlsEchoServer(const tls::Context& sctx, TcpListener& l, SchedulerOptions options,
                  std::size_t chunk)
        : thread([this, &sctx, &l, options, chunk] {
            Scheduler s(options);
            s.block_on(serve(sctx, l, chunk));
        }) {}
    void join() { thread.join(); }

private:
    Task<void> serve(const tls::Context& sctx, TcpListener& l, std::size_t chunk) {
        std::optional<tls::Stream> accepted = co_await accept_handshaken(sctx, l);
        if (!accepted) co_return;
        tls::Stream& t = *accepted;
        alpn = t.alpn();
        std::vector<char> buf(chunk);
        for (;;) {
            auto n = co_await t.recv(std::span(buf)).timeout(30s);
            CO_ASSERT(n.has_value());
            if (*n == 0) break; // the client's close_notify
            echoed.append(buf.data(), *n);
            CO_ASSERT((co_await t.send_all(std::span(buf.data(), *n)).timeout(30s)));
        }
        clean_close = true;
        shutdown = co_await t.shutdown().timeout(10s);
    }
};

TEST_P(TlsInteropTest, galay_client_fetches_from_openssl_s_server) {
    for (const char* version : {"-tls1_3", "-tls1_2"}) {
        Process server({"openssl", "s_server", "-accept", "127.0.0.1:0", "-cert",
                        pki().server().cert, "-key", pki().server().key, "-www", version, "-alpn",
                        "http/1.1"});
        ASSERT_TRUE(server.wait_for("ACCEPT")) << server.err();
        ASSERT_TRUE(server.wait_for("\n")) << server.out();
        const std::uint16_t port = accept_port(server.out());
        const tls::Context cctx = client_context({"http/1.1"});
        std::string page, tls_version, alpn;
        run([&]() -> Task<void> {
            auto tcp = co_await TcpStream::connect(SocketAddr::loopback_v4(port)).timeout(10s);
            CO_ASSERT(tcp.has_value());
            tls::Stream c = tls::Stream::client(cctx, std::move(*tcp), "localhost");
            auto hs = co_await c.handshake().timeout(10s);
            EXPECT_TRUE(hs.has_value()) << c.last_error();
            CO_ASSERT(hs.has_value());
            tls_version = c.version();
            alpn = c.alpn();
            CO_ASSERT(
                (co_await c.send_all(std::string_view("GET / HTTP/1.0\r\n\r\n")).timeout(10s)));
            char buf[4096];
            for (;;) {
                auto n = co_await c.recv(buf).timeout(10s);
                if (!n) { // s_server -www may end without close_notify: what came is kept
                    EXPECT_EQ(n.error(), tls::errc::truncated) << n.error().message();
                    break;
                }
                if (*n == 0) break;
                page.append(buf, *n);
            }
        }());
        EXPECT_EQ(tls_version, std::string(version) == "-tls1_3" ? "TLSv1.3" : "TLSv1.2");
        EXPECT_EQ(alpn, "http/1.1");
        EXPECT_NE(page.find("HTTP/1.0 200 ok"), std::string::npos) << page.substr(0, 200);
    }
}

TEST_P(TlsInteropTest, openssl_s_client_talks_to_the_galay_server) {
    for (const char* version : {"-tls1_3", "-tls1_2"}) {
        const tls::Context sctx = server_context(pki().server(), {"http/1.1"});
        TcpListener l = listen_loopback();
        const std::uint16_t port = l.local_addr()->port();
        std::string received, negotiated;
        Result<void> handshake;
        std::thread server([&] {
            Scheduler s(options());
            s.block_on([&]() -> Task<void> {
                auto conn = co_await l.accept().timeout(30s);
                CO_ASSERT(conn.has_value());
                tls::Stream t = tls::Stream::server(sctx, std::move(*conn));
                handshake = co_await t.handshake().timeout(30s);
                if (!handshake) co_return;
                negotiated = t.version();
                char buf[256];
                while (received.find('\n') == std::string::npos) {
                    auto n = co_await t.recv(buf).timeout(30s);
                    CO_ASSERT(n && *n > 0);
                    received.append(buf, *n);
                }
                std::string reply = received;
                for (char& ch : reply)
                    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
                CO_ASSERT((co_await t.send_all(reply).timeout(10s)));
                CO_ASSERT((co_await t.shutdown().timeout(10s)));
            }());
        });
        // -ign_eof: after its stdin ends, s_client reads on until the server closes.
        ProcessResult r = run_process(
            {"sh", "-c",
             "printf 'hello from s_client\\n' | openssl s_client -connect 127.0.0.1:" +
                 std::to_string(port) + " -CAfile '" + pki().ca().cert +
                 "' -verify_return_error -servername localhost " +
                 "-verify_hostname localhost -alpn http/1.1 -ign_eof -quiet " + version});
        server.join();
        EXPECT_TRUE(handshake.has_value()) << handshake.error().message();
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(received, "hello from s_client\n");
        EXPECT_NE(r.out.find("HELLO FROM S_CLIENT"), std::string::npos) << r.out << r.err;
        EXPECT_EQ(negotiated, std::string(version) == "-tls1_3" ? "TLSv1.3" : "TLSv1.2");
    }
}

// ServerConfig::tickets: what `openssl s_client` counts after a full TLS 1.3 handshake (one by
// default, where OpenSSL's own default is two), none without session_tickets, and the one ticket
// resumes the next connection.
TEST_P(TlsInteropTest, s_client_gets_the_configured_number_of_session_tickets_and_resumes) {
    struct Case {
        tls::ServerConfig config;
        int tickets;
    };
    const CertFiles& id = pki().server();
    const std::vector<Case> cases = {
        {{.cert_file = id.cert, .key_file = id.key}, 1},
        {{.cert_file = id.cert, .key_file = id.key, .tickets = 2}, 2},
        {{.cert_file = id.cert, .key_file = id.key, .session_tickets = false}, 0},
    };
    const TempDir dir;
    const std::string sess = (dir / "session.pem").string();
    for (const Case& k : cases) {
        const tls::Context sctx = tls::Context::server(k.config);
        TcpListener l = listen_loopback();
        const std::uint16_t port = l.local_addr()->port();
        const int connections = k.tickets > 0 ? 2 : 1;
        std::vector<bool> reused;
        std::thread server([&] {
            Scheduler s(options());
            s.block_on([&]() -> Task<void> {
                for (int i = 0; i < connections; ++i) {
                    std::optional<tls::Stream> accepted = co_await accept_handshaken(sctx, l);
                    if (!accepted) co_return;
                    tls::Stream& t = *accepted;
                    reused.push_back(t.session_reused());
                    std::string line;
                    char buf[256];
                    while (line.find('\n') == std::string::npos) {
                        auto n = co_await t.recv(buf).timeout(30s);
                        CO_ASSERT(n && *n > 0);
                        line.append(buf, *n);
                    }
                    // The reply comes after the tickets: s_client has read them when it ends.
                    CO_ASSERT((co_await t.send_all(std::string_view("bye\n")).timeout(10s)));
                    CO_ASSERT((co_await t.shutdown().timeout(10s)));
                }
            }());
        });
        const std::string client =
            "printf 'hi\\n' | openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
            " -CAfile '" + pki().ca().cert + "' -servername localhost -tls1_3 -ign_eof ";
        ProcessResult first = run_process({"sh", "-c", client + "-sess_out '" + sess + "'"});
        ProcessResult second;
        if (connections == 2)
            second = run_process({"sh", "-c", client + "-sess_in '" + sess + "'"});
        server.join();
        EXPECT_EQ(first.exit_code, 0) << first.err;
        std::size_t count = 0;
        for (std::size_t at = 0;
             (at = first.out.find("New Session Ticket arrived", at)) != std::string::npos; ++at)
            ++count;
        EXPECT_EQ(count, static_cast<std::size_t>(k.tickets)) << first.out;
        EXPECT_NE(first.out.find("bye"), std::string::npos) << first.out << first.err;
        if (connections == 2) {
            EXPECT_EQ(second.exit_code, 0) << second.err;
            EXPECT_NE(second.out.find("Reused, TLSv1.3"), std::string::npos) << second.out;
            EXPECT_EQ(reused, (std::vector<bool>{false, true}));
        }
    }
}

// Python's ssl module (OpenSSL underneath too, but its own state machine driving and a blocking
// socket): a client that verifies galay's server and sends 1 MiB in pieces of odd sizes.
TEST_P(TlsInteropTest, a_python_ssl_client_echoes_through_the_galay_server) {
    if (run_process({"python3", "-c", "import ssl"}).exit_code != 0)
        GTEST_SKIP() << "SKIP: python3 with the ssl module is not installed";
    const tls::Context sctx = server_context(pki().server(), {"http/1.1"});
    TcpListener l = listen_loopback();
    const std::uint16_t port = l.local_addr()->port();
    TlsEchoServer server(sctx, l, options(), 7000);
    const std::string script = R"(
import hashlib, socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])
raw = socket.create_connection(("127.0.0.1", port), timeout=30)
s = ctx.wrap_socket(raw, server_hostname="localhost")
data = bytes((i * 7 + i // 251) % 256 for i in range(1 << 20))
sent, got, sizes, k = 0, bytearray(), [1, 5, 4096, 16384, 16385, 100000, 3], 0
while sent < len(data):
    n = sizes[k % len(sizes)]; k += 1
    s.sendall(data[sent:sent + n]); sent += n
    while len(got) < min(sent, len(data)):
        got += s.recv(65536)
version, alpn = s.version(), s.selected_alpn_protocol()
s.unwrap()  # close_notify, and the server's in return
print("ok" if bytes(got) == data else "mismatch", version, alpn)
)";
    ProcessResult r = run_process({"python3", "-c", script, std::to_string(port), pki().ca().cert});
    server.join();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ok TLSv1.3 http/1.1\n") << r.err;
    EXPECT_EQ(server.echoed.size(), 1u << 20);
    EXPECT_EQ(server.alpn, "http/1.1");
    EXPECT_TRUE(server.clean_close);
    EXPECT_TRUE(server.shutdown.has_value()) << server.shutdown.error().message();
}

// Go's crypto/tls (bench/control/go_https/client, built by CMake when go is on the PATH): its own
// handshake, record layer and certificate verification. 1 MiB echoed in one go, both directions
// at once, then close_notify.
TEST_P(TlsInteropTest, a_go_crypto_tls_client_echoes_through_the_galay_server) {
#ifndef GO_TLS_CLIENT_BIN
    GTEST_SKIP() << "SKIP: go_tls_client was not built (no go on the PATH at configure time; "
                    "Debian: golang-go)";
#else
    const tls::Context sctx = server_context(pki().server(), {"h2", "http/1.1"});
    TcpListener l = listen_loopback();
    const std::uint16_t port = l.local_addr()->port();
    constexpr std::size_t kBytes = std::size_t{1} << 20;
    TlsEchoServer server(sctx, l, options(), 16384);
    ProcessResult r = run_process({GO_TLS_CLIENT_BIN, "-addr", "127.0.0.1:" + std::to_string(port),
                                   "-ca", pki().ca().cert, "-name", "localhost", "-bytes",
                                   std::to_string(kBytes), "-alpn", "http/1.1", "-timeout", "30s"});
    server.join();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("ok: 1048576 bytes echoed, TLS 1.3"), std::string::npos) << r.out << r.err;
    EXPECT_EQ(server.alpn, "http/1.1");
    EXPECT_TRUE(server.clean_close);
    ASSERT_EQ(server.echoed.size(), kBytes);
    for (std::size_t i = 0; i < kBytes; ++i)
        if (server.echoed[i] != static_cast<char>('a' + i % 26)) {
            ADD_FAILURE() << "byte " << i << " differs";
            break;
        }
#endif
}

} // namespace

GALAY_INSTANTIATE_BACKENDS(TlsInteropTest);
