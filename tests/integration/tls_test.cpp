// TLS end to end, on every backend: galay's client against galay's server over loopback, with
// certificates made at run time (support/certs.hpp).
#include "support/tls_pair.hpp"

#include <cstring>
#include <string>
#include <vector>

using namespace galay;
using namespace galay::test;
using namespace std::chrono_literals;

namespace {

class TlsTest : public test::BackendTest {};

TEST(TlsContext, bad_inputs_fail_when_the_context_is_built_with_openssls_reason) {
    auto what = [](auto&& build) -> std::string {
        try {
            build();
        } catch (const Error& e) {
            return e.what();
        }
        return "(no error)";
    };
    const std::string missing = what([] {
        (void)tls::Context::server({.cert_file = "/nonexistent/cert.pem", .key_file = "/x"});
    });
    EXPECT_NE(missing.find("/nonexistent/cert.pem"), std::string::npos) << missing;
    EXPECT_NE(missing.find("error:"), std::string::npos) << missing; // OpenSSL's queued reason
    const std::string mismatch = what([] {
        (void)tls::Context::server(
            {.cert_file = pki().server().cert, .key_file = pki().self_signed().key});
    });
    EXPECT_NE(mismatch.find("key values mismatch"), std::string::npos) << mismatch;
    EXPECT_NE(mismatch.find("error:"), std::string::npos) << mismatch;
    const std::string bad_pem =
        what([] { (void)tls::Context::server({.cert_pem = "garbage", .key_pem = "garbage"}); });
    EXPECT_NE(bad_pem.find("cannot read the certificate PEM"), std::string::npos) << bad_pem;
    const std::string bad_ca =
        what([] { (void)tls::Context::client({.ca_file = "/nonexistent/ca.pem"}); });
    EXPECT_NE(bad_ca.find("/nonexistent/ca.pem"), std::string::npos) << bad_ca;
    const std::string no_key =
        what([] { (void)tls::Context::server({.cert_file = pki().server().cert}); });
    EXPECT_NE(no_key.find("private key"), std::string::npos) << no_key;
}

TEST(TlsContext, a_server_identity_can_come_from_pem_text) {
    EXPECT_NO_THROW((void)tls::Context::server(
        {.cert_pem = pki().server().cert_pem, .key_pem = pki().server().key_pem}));
    EXPECT_NO_THROW((void)tls::Context::client({.ca_pem = pki().ca().cert_pem}));
}

TEST_P(TlsTest, handshake_and_echo_from_one_byte_to_one_mebibyte) {
    const tls::Context sctx = server_context(pki().server(), {"h2", "http/1.1"});
    const tls::Context cctx = client_context({"http/1.1"});
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result.has_value());
        CO_ASSERT(h.server_result.has_value());
        EXPECT_EQ(h.client.version(), "TLSv1.3");
        EXPECT_EQ(h.client.alpn(), "http/1.1");
        EXPECT_EQ(h.server.alpn(), "http/1.1");
        EXPECT_FALSE(h.client.cipher().empty());
        EXPECT_EQ(h.client.peer_subject(), "CN=localhost");
        EXPECT_EQ(h.client.verify_result(), 0);
        unsigned seed = 0;
        for (std::size_t n : {std::size_t{1}, std::size_t{100}, std::size_t{16384},
                              std::size_t{16385}, std::size_t{65536}, std::size_t{1} << 20}) {
            const std::string out = pattern(n, ++seed);
            auto echo = [&]() -> Task<void> {
                auto got = co_await recv_exactly(h.server, n);
                CO_ASSERT(got.has_value());
                auto sent = co_await h.server.send_all(*got).timeout(20s);
                CO_ASSERT(sent && *sent == n);
            };
            auto drive = [&]() -> Task<void> {
                auto sent = co_await h.client.send_all(out).timeout(20s);
                CO_ASSERT(sent && *sent == n);
                auto back = co_await recv_exactly(h.client, n);
                CO_ASSERT(back.has_value());
                EXPECT_TRUE(*back == out) << "echo of " << n << " bytes differs";
            };
            co_await when_all(echo(), drive());
        }
        // A clean end: close_notify, then recv returns 0 on the other side.
        CO_ASSERT((co_await h.client.shutdown().timeout(5s)).has_value());
        char b[16];
        auto end = co_await h.server.recv(b).timeout(5s);
        CO_ASSERT(end.has_value());
        EXPECT_EQ(*end, 0u);
    }());
}

TEST_P(TlsTest, certificate_problems_are_clear_errors_on_the_client) {
    struct Case {
        const test::CertFiles* server;
        std::string host;
        std::string reason;
    };
    const Case cases[] = {
        {&pki().expired(), "localhost", "certificate has expired"},
        {&pki().server(), "wrong.example", "hostname mismatch"},
        {&pki().self_signed(), "localhost", "self-signed certificate"},
        {&pki().server(), "127.0.0.2", "IP address mismatch"},
    };
    const tls::Context cctx = client_context();
    for (const Case& c : cases) {
        const tls::Context sctx = server_context(*c.server);
        run([&]() -> Task<void> {
            Handshaken h = co_await tls_pair(sctx, cctx, c.host);
            CO_ASSERT(!h.client_result.has_value());
            EXPECT_EQ(h.client_result.error(), tls::errc::certificate_verify_failed);
            EXPECT_NE(h.client.last_error().find(c.reason), std::string_view::npos)
                << h.client.last_error();
            EXPECT_NE(h.client.verify_result(), 0);
            // The server hears why (the client's alert), and fails too.
            CO_ASSERT(!h.server_result.has_value());
            EXPECT_EQ(h.server_result.error(), tls::errc::handshake_failed);
            EXPECT_FALSE(h.server.last_error().empty());
        }());
    }
    // Verification off: the self-signed server is accepted.
    const tls::Context trusting = tls::Context::client({.verify = false});
    const tls::Context self = server_context(pki().self_signed());
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(self, trusting);
        EXPECT_TRUE(h.client_result.has_value()) << h.client.last_error();
    }());
}

TEST_P(TlsTest, the_ip_address_in_the_certificate_verifies) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx, "127.0.0.1");
        EXPECT_TRUE(h.client_result.has_value()) << h.client.last_error();
    }());
}

TEST_P(TlsTest, a_peer_closing_without_close_notify_is_truncation_not_end_of_stream) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        CO_ASSERT((co_await h.client.send_all(std::string_view("partial")).timeout(5s)));
        CO_ASSERT(h.client.tcp().shutdown(Shutdown::write).has_value()); // FIN, no close_notify
        auto got = co_await recv_exactly(h.server, 7);
        CO_ASSERT(got && *got == "partial");
        char b[16];
        auto end = co_await h.server.recv(b).timeout(5s);
        CO_ASSERT(!end.has_value());
        EXPECT_EQ(end.error(), tls::errc::truncated);
        EXPECT_NE(h.server.last_error().find("close_notify"), std::string_view::npos);
        auto again = co_await h.server.recv(b).timeout(5s); // and it stays that way
        CO_ASSERT(!again.has_value());
        EXPECT_EQ(again.error(), tls::errc::truncated);
    }());
}

// HTTP servers shut a stream down when they end a response and again when the connection ends:
// the second is a no-op, even after the peer has closed its side too (shutdown(2) would then
// fail with ENOTCONN, and cost a system call per connection).
TEST_P(TlsTest, a_second_shutdown_after_the_peer_closed_succeeds) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        CO_ASSERT((co_await h.server.shutdown().timeout(5s)).has_value());
        char b[16];
        auto notified = co_await h.client.recv(b).timeout(5s);
        CO_ASSERT(notified.has_value());
        EXPECT_EQ(*notified, 0u); // close_notify
        CO_ASSERT((co_await h.client.shutdown().timeout(5s)).has_value());
        auto end = co_await h.server.recv(b).timeout(5s);
        CO_ASSERT(end.has_value());
        EXPECT_EQ(*end, 0u);
        auto fin = co_await h.server.tcp().recv(b).timeout(5s); // the client's FIN: it is closed
        CO_ASSERT(fin.has_value());
        EXPECT_EQ(*fin, 0u);
        auto again = co_await h.server.shutdown().timeout(5s);
        EXPECT_TRUE(again.has_value()) << again.error().message();
    }());
}

TEST_P(TlsTest, a_second_connection_resumes_the_session) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        TcpListener l = listen_loopback(); // (the client's cache is per host and port)
        for (int i = 0; i < 2; ++i) {
            Handshaken h = co_await tls_pair(sctx, cctx, "localhost", &l);
            CO_ASSERT(h.client_result && h.server_result);
            EXPECT_EQ(h.client.session_reused(), i == 1) << "connection " << i;
            EXPECT_EQ(h.server.session_reused(), i == 1) << "connection " << i;
            // TLS 1.3 tickets come after the handshake: one exchange lets the client read them.
            CO_ASSERT((co_await h.server.send_all(std::string_view("hi")).timeout(5s)));
            auto got = co_await recv_exactly(h.client, 2);
            CO_ASSERT(got && *got == "hi");
        }
    }());
}

static_assert(io::ReadStream<tls::Stream> && io::WriteStream<tls::Stream> &&
              io::DuplexStream<tls::Stream>);
static_assert(io::DuplexStream<TcpStream>); // (the awaited shutdown did not change TcpStream's)

TEST_P(TlsTest, buf_reader_and_buf_writer_work_on_a_tls_stream_unchanged) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        auto write = [&]() -> Task<void> {
            io::BufWriter writer(h.client, 4096);
            for (int i = 0; i < 200; ++i) {
                const std::string line = "line " + std::to_string(i) + "\n";
                CO_ASSERT((co_await writer.write(line).timeout(5s)));
            }
            const std::string big(20000, 'b'); // larger than the writer: one writev
            CO_ASSERT((co_await writer.write(big).timeout(5s)));
            CO_ASSERT((co_await writer.write(std::string_view("\nend\n")).timeout(5s)));
            CO_ASSERT((co_await writer.flush().timeout(5s)));
        };
        auto read = [&]() -> Task<void> {
            io::BufReader reader(h.server, 32768);
            for (int i = 0; i < 200; ++i) {
                auto line = co_await reader.read_line().timeout(5s);
                CO_ASSERT(line.has_value());
                EXPECT_EQ(*line, "line " + std::to_string(i));
            }
            auto big = co_await reader.read_line().timeout(5s);
            CO_ASSERT(big && big->size() == 20000);
            auto end = co_await reader.read_line().timeout(5s);
            CO_ASSERT(end && *end == "end");
        };
        co_await when_all(write(), read());
    }());
}

TEST_P(TlsTest, copy_bidirectional_proxies_tls_to_plain_tcp) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        // client --TLS--> proxy (tls side | tcp side) --plain--> upstream echo
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        auto [to_upstream, upstream] = co_await loopback_pair();
        auto echo = [&]() -> Task<void> {
            char buf[8192];
            for (;;) {
                auto n = co_await upstream.recv(buf).timeout(20s);
                CO_ASSERT(n.has_value());
                if (*n == 0) break;
                CO_ASSERT((co_await upstream.send_all(std::span(buf, *n)).timeout(20s)));
            }
            CO_ASSERT(upstream.shutdown(Shutdown::write).has_value());
        };
        io::CopyStats stats;
        auto proxy = [&]() -> Task<void> {
            auto r = co_await io::copy_bidirectional(h.server, to_upstream, {.idle_timeout = 20s});
            CO_ASSERT(r.has_value());
            stats = *r;
        };
        const std::string out = pattern(300000, 11);
        auto client = [&]() -> Task<void> {
            auto send = [&]() -> Task<void> {
                CO_ASSERT((co_await h.client.send_all(out).timeout(20s)));
                // The end of the client's data: close_notify, passed on as a TCP half-close.
                CO_ASSERT((co_await h.client.shutdown().timeout(5s)));
            };
            auto receive = [&]() -> Task<void> {
                auto back = co_await recv_exactly(h.client, out.size());
                CO_ASSERT(back.has_value());
                EXPECT_TRUE(*back == out);
                char b[16];
                auto end = co_await h.client.recv(b).timeout(20s); // the proxy's close_notify
                CO_ASSERT(end.has_value());
                EXPECT_EQ(*end, 0u);
            };
            co_await when_all(send(), receive());
        };
        co_await when_all(echo(), proxy(), client());
        EXPECT_EQ(stats.a_to_b, out.size());
        EXPECT_EQ(stats.b_to_a, out.size());
    }());
}

} // namespace

GALAY_INSTANTIATE_BACKENDS(TlsTest);
