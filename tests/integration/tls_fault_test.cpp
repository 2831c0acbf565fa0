// TLS bad input and faults, on every backend: garbage instead of a ClientHello, a client that
// stops mid-handshake, a thousand silent connections, a record arriving one byte at a time,
// timeouts and cancellation of every operation.
#include "support/fds.hpp"
#include "support/raw_tls.hpp"
#include "support/tls_pair.hpp"

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <cstring>

#include <openssl/err.h>

using namespace galay;
using namespace galay::test;
using namespace std::chrono_literals;

namespace {

class TlsFaultTest : public BackendTest {};

/// Serve TLS echo on `l`: accept `count` connections; each handshakes within `handshake_timeout`
/// and echoes until the peer ends. Results of the handshakes are counted.
struct EchoServer {
    int ok = 0, failed = 0;
    std::vector<std::error_code> errors;
    std::vector<std::string> reasons;

    Task<void> serve_one(const tls::Context& ctx, TcpStream conn, std::chrono::nanoseconds hs) {
        tls::Stream s = tls::Stream::server(ctx, std::move(conn));
        auto r = co_await s.handshake().timeout(hs);
        if (!r) {
            ++failed;
            errors.push_back(r.error());
            reasons.emplace_back(s.last_error());
            co_return; // (the stream, and its fd, go now)
        }
        ++ok;
        char buf[4096];
        for (;;) {
            auto n = co_await s.recv(buf).timeout(20s);
            if (!n || *n == 0) break;
            if (!co_await s.send_all(std::span(buf, *n)).timeout(20s)) break;
        }
        (void)co_await s.shutdown().timeout(1s);
    }

    Task<void> run(const tls::Context& ctx, TcpListener& l, int count,
                   std::chrono::nanoseconds hs = 20s) {
        TaskGroup group;
        for (int i = 0; i < count; ++i) {
            auto conn = co_await l.accept();
            if (!conn) throw Error(conn.error(), "accept");
            group.spawn(serve_one(ctx, std::move(*conn), hs));
        }
        co_await group.wait();
    }
};

/// A galay client: handshake and one echo of `n` bytes.
Task<bool> echo_client(const tls::Context& cctx, std::uint16_t port, std::size_t n) {
    auto tcp = co_await TcpStream::connect(SocketAddr::loopback_v4(port)).timeout(10s);
    if (!tcp) co_return false;
    tls::Stream c = tls::Stream::client(cctx, std::move(*tcp), "localhost");
    if (!co_await c.handshake().timeout(10s)) co_return false;
    const std::string out = pattern(n, 7);
    if (!co_await c.send_all(out).timeout(10s)) co_return false;
    auto back = co_await recv_exactly(c, n);
    if (!back || *back != out) co_return false;
    co_return (co_await c.shutdown().timeout(5s)).has_value();
}

TEST_P(TlsFaultTest, garbage_instead_of_a_client_hello_fails_cleanly_and_others_are_served) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        TcpListener l = listen_loopback();
        const std::uint16_t port = l.local_addr()->port();
        EchoServer server;
        auto garbage = [&]() -> Task<void> {
            auto tcp = co_await TcpStream::connect(SocketAddr::loopback_v4(port));
            CO_ASSERT(tcp.has_value());
            CO_ASSERT((co_await tcp->send_all(std::string_view("GET / HTTP/1.1\r\n\r\n"))));
            char b[256];
            for (;;) { // the server answers with an alert, then closes
                auto n = co_await tcp->recv(b).timeout(10s);
                CO_ASSERT(n.has_value());
                if (*n == 0) break;
            }
        };
        auto good = [&]() -> Task<void> { EXPECT_TRUE(co_await echo_client(cctx, port, 5000)); };
        co_await when_all(server.run(sctx, l, 2), [&]() -> Task<void> {
            co_await garbage();
            co_await good();
        }());
        EXPECT_EQ(server.ok, 1);
        CO_ASSERT(server.failed == 1);
        EXPECT_EQ(server.errors[0], tls::errc::handshake_failed);
        EXPECT_NE(server.reasons[0].find("error:"), std::string::npos) << server.reasons[0];
    }());
}

TEST_P(TlsFaultTest, a_client_stopping_mid_handshake_hits_the_servers_timeout_and_leaks_nothing) {
    const tls::Context sctx = server_context(pki().server());
    run_paused([&]() -> Task<void> {
        TcpListener l = listen_loopback();
        int fds_before = 0;
        // The first round sets up what the scheduler keeps for later (io_uring: its lazily made
        // descriptors); the second must end where it began.
        for (int round = 0; round < 2; ++round) {
            fds_before = test::open_fds();
            auto [c, s] = co_await loopback_pair(&l);
            RawTlsClient raw(pki().ca().cert);
            (void)SSL_do_handshake(raw.ssl());
            const std::string hello = raw.take_output();
            CO_ASSERT(hello.size() > 10);
            CO_ASSERT((co_await c.send_all(std::string_view(hello).substr(0, hello.size() / 2))));
            tls::Stream server = tls::Stream::server(sctx, std::move(s));
            auto r = co_await server.handshake().timeout(200ms);
            CO_ASSERT(!r.has_value());
            EXPECT_EQ(r.error(), std::errc::timed_out);
            CO_ASSERT((co_await server.close()).has_value());
        }
        EXPECT_EQ(test::open_fds(), fds_before);
    }());
}

TEST_P(TlsFaultTest, a_thousand_silent_connections_do_not_stop_another_client_being_served) {
    constexpr int kSilent = 1000;
    if (test::fds_available(2 * kSilent + 200) < 2 * kSilent + 200)
        GTEST_SKIP() << "RLIMIT_NOFILE too low for " << kSilent << " silent connections";
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        TcpListener l = listen_loopback();
        const std::uint16_t port = l.local_addr()->port();
        const int fds_before = test::open_fds();
        EchoServer server;
        auto clients = [&]() -> Task<void> {
            std::vector<TcpStream> silent;
            for (int i = 0; i < kSilent; ++i) {
                auto c = co_await TcpStream::connect(SocketAddr::loopback_v4(port)).timeout(10s);
                CO_ASSERT(c.has_value());
                silent.push_back(std::move(*c));
            }
            EXPECT_TRUE(co_await echo_client(cctx, port, 100000));
            silent.clear(); // their handshakes now end (peer closed)
        };
        co_await when_all(server.run(sctx, l, kSilent + 1), clients());
        EXPECT_EQ(server.ok, 1);
        EXPECT_EQ(server.failed, kSilent);
        EXPECT_EQ(test::open_fds(), fds_before);
    }());
}

TEST_P(TlsFaultTest, a_16_kib_record_arriving_one_byte_at_a_time_is_read_whole) {
    const tls::Context sctx = server_context(pki().server());
    run([&]() -> Task<void> {
        auto [c, s] = co_await loopback_pair();
        CO_ASSERT(c.set_nodelay(true).has_value());
        RawTlsClient raw(pki().ca().cert);
        tls::Stream server = tls::Stream::server(sctx, std::move(s));
        const int server_fd = server.tcp().fd();
        auto [client_ok, server_ok] =
            co_await when_all(raw.handshake(c), as_task(server.handshake().timeout(10s)));
        CO_ASSERT(client_ok);
        CO_ASSERT(server_ok.has_value());
        const std::string plain = pattern(16384, 3);
        const std::string record = raw.encrypt(plain); // one full-size record
        CO_ASSERT(record.size() > 16384 && record.size() < 16384 + 64);
        int single_byte_reads = 0;
        auto feed = [&]() -> Task<void> {
            for (char byte : record) {
                CO_ASSERT((co_await c.send_all(std::span(&byte, 1))));
                // Next byte only once the server has taken this one off the socket.
                for (int spins = 0;; ++spins) {
                    int queued = 0;
                    CO_ASSERT(::ioctl(server_fd, SIOCINQ, &queued) == 0);
                    if (queued == 0) break;
                    CO_ASSERT(spins < 100000);
                    (void)co_await sleep(0ns);
                }
                ++single_byte_reads;
            }
        };
        auto [got, fed] = co_await when_all(recv_exactly(server, plain.size()), feed());
        CO_ASSERT(got.has_value());
        EXPECT_TRUE(*got == plain);
        EXPECT_EQ(single_byte_reads, static_cast<int>(record.size()));
    }());
}

TEST_P(TlsFaultTest, a_timed_out_or_cancelled_recv_leaves_the_stream_usable) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run_paused([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        char b[64];
        auto timed = co_await h.client.recv(b).timeout(50ms);
        CO_ASSERT(!timed.has_value());
        EXPECT_EQ(timed.error(), std::errc::timed_out);
        auto raced = co_await when_any(as_task(h.client.recv(b)), sleep(20ms));
        EXPECT_EQ(raced.index(), 1u); // the recv lost and was cancelled
        CancelSource source;
        source.cancel();
        auto cancelled = co_await with_cancel(source, as_task(h.client.recv(b)));
        CO_ASSERT(!cancelled.has_value());
        EXPECT_EQ(cancelled.error(), std::errc::operation_canceled);
        // Still in step: the next bytes arrive whole.
        CO_ASSERT((co_await h.server.send_all(std::string_view("after")).timeout(5s)));
        auto got = co_await recv_exactly(h.client, 5);
        CO_ASSERT(got && *got == "after");
        // And the other way too.
        CO_ASSERT((co_await h.client.send_all(std::string_view("back")).timeout(5s)));
        auto back = co_await recv_exactly(h.server, 4);
        CO_ASSERT(back && *back == "back");
    }());
}

TEST_P(TlsFaultTest, a_send_that_times_out_after_encrypting_marks_the_stream_broken) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run_paused([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        CO_ASSERT(h.client.tcp().set_send_buffer_size(4096).has_value());
        CO_ASSERT(h.server.tcp().set_recv_buffer_size(4096).has_value());
        const std::string big(8 << 20, 'x'); // the server reads nothing: the socket fills
        auto r = co_await h.client.send_all(big).timeout(200ms);
        CO_ASSERT(!r.has_value());
        EXPECT_EQ(r.error(), std::errc::timed_out);
        auto next = co_await h.client.send(std::string_view("more")).timeout(1s);
        CO_ASSERT(!next.has_value());
        EXPECT_EQ(next.error(), tls::errc::broken);
        EXPECT_NE(h.client.last_error().find("encrypted"), std::string_view::npos)
            << h.client.last_error();
        char b[8];
        auto rd = co_await h.client.recv(b).timeout(1s);
        CO_ASSERT(!rd.has_value());
        EXPECT_EQ(rd.error(), tls::errc::broken);
    }());
}

TEST_P(TlsFaultTest, a_handshake_times_out_or_is_cancelled_when_the_peer_says_nothing) {
    const tls::Context cctx = client_context();
    run_paused([&]() -> Task<void> {
        auto [c, s] = co_await loopback_pair(); // `s` never answers
        tls::Stream client = tls::Stream::client(cctx, std::move(c), "localhost");
        auto r = co_await client.handshake().timeout(100ms);
        CO_ASSERT(!r.has_value());
        EXPECT_EQ(r.error(), std::errc::timed_out);
        auto raced = co_await when_any(as_task(client.handshake()), sleep(20ms));
        EXPECT_EQ(raced.index(), 1u);
        // Operations before the handshake are refused clearly.
        char b[4];
        auto early = co_await client.recv(b);
        CO_ASSERT(!early.has_value());
        EXPECT_EQ(early.error(), tls::errc::not_connected);
    }());
}

TEST_P(TlsFaultTest, an_aborted_task_cancels_the_tls_operation_it_waits_on) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        TaskGroup group;
        std::error_code seen;
        bool waiting = false, returned = false;
        auto reader = [&]() -> Task<void> { // (named: the closure outlives the task)
            char b[16];
            waiting = true;
            auto r = co_await h.client.recv(b);
            returned = true;
            if (!r) seen = r.error();
        };
        group.spawn(reader());
        for (int spins = 0; !waiting; ++spins) { // until it waits in recv
            CO_ASSERT(spins < 1000);
            (void)co_await sleep(0ns);
        }
        group.cancel();
        CO_ASSERT((co_await group.wait().timeout(10s)).has_value());
        EXPECT_TRUE(returned);
        EXPECT_EQ(seen, std::errc::operation_canceled);
        CO_ASSERT((co_await h.server.send_all(std::string_view("ok")).timeout(5s)));
        auto got = co_await recv_exactly(h.client, 2);
        CO_ASSERT(got && *got == "ok");
    }());
}

TEST_P(TlsFaultTest, join_handle_abort_cancels_a_handshake_in_progress) {
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        auto [c, s] = co_await loopback_pair(); // `s` never answers
        tls::Stream client = tls::Stream::client(cctx, std::move(c), "localhost");
        bool waiting = false;
        auto handshake = [&]() -> Task<std::error_code> { // (named: outlives the task)
            waiting = true;
            auto r = co_await client.handshake();
            co_return r ? std::error_code() : r.error();
        };
        JoinHandle<std::error_code> h = spawn(handshake());
        for (int spins = 0; !waiting; ++spins) {
            CO_ASSERT(spins < 1000);
            (void)co_await sleep(0ns);
        }
        h.abort();
        const std::error_code e = co_await h;
        EXPECT_EQ(e, std::errc::operation_canceled);
    }());
}

TEST_P(TlsFaultTest, a_key_update_the_peer_requests_is_answered) {
    const tls::Context sctx = server_context(pki().server());
    run([&]() -> Task<void> {
        auto [c, s] = co_await loopback_pair();
        RawTlsClient raw(pki().ca().cert);
        tls::Stream server = tls::Stream::server(sctx, std::move(s));
        auto [client_ok, server_ok] =
            co_await when_all(raw.handshake(c), as_task(server.handshake().timeout(10s)));
        CO_ASSERT(client_ok);
        CO_ASSERT(server_ok.has_value());
        // The client updates its keys and asks the server to update its own: reading the request
        // makes the server write a KeyUpdate, which must reach the client before its next record.
        CO_ASSERT(SSL_key_update(raw.ssl(), SSL_KEY_UPDATE_REQUESTED) == 1);
        CO_ASSERT((co_await c.send_all(raw.encrypt("ping")).timeout(10s)));
        auto got = co_await recv_exactly(server, 4);
        CO_ASSERT(got && *got == "ping");
        CO_ASSERT((co_await server.send_all(std::string_view("pong")).timeout(10s)));
        std::string plain;
        char b[4096];
        while (plain.size() < 4) {
            auto n = co_await c.recv(b).timeout(10s);
            CO_ASSERT(n && *n > 0);
            raw.feed(std::span<const char>(b, *n));
            char p[64];
            const int r = SSL_read(raw.ssl(), p, sizeof p);
            if (r > 0)
                plain.append(p, static_cast<std::size_t>(r));
            else
                CO_ASSERT(SSL_get_error(raw.ssl(), r) == SSL_ERROR_WANT_READ);
        }
        EXPECT_EQ(plain, "pong");
    }());
}

TEST_P(TlsFaultTest, renegotiation_is_refused) {
    const tls::Context sctx = server_context(pki().server());
    run([&]() -> Task<void> {
        auto [c, s] = co_await loopback_pair();
        RawTlsClient raw(pki().ca().cert);
        SSL_set_max_proto_version(raw.ssl(), TLS1_2_VERSION); // (TLS 1.3 has no renegotiation)
        tls::Stream server = tls::Stream::server(sctx, std::move(s));
        auto [client_ok, server_ok] =
            co_await when_all(raw.handshake(c), as_task(server.handshake().timeout(10s)));
        CO_ASSERT(client_ok);
        CO_ASSERT(server_ok.has_value());
        EXPECT_EQ(server.version(), "TLSv1.2");
        // The client asks for a new handshake, then sends data; the server answers the request
        // with a no_renegotiation alert and reads the data as before.
        CO_ASSERT(SSL_renegotiate(raw.ssl()) == 1);
        (void)SSL_do_handshake(raw.ssl());
        std::string wire = raw.take_output();
        CO_ASSERT(!wire.empty()); // the new ClientHello
        CO_ASSERT((co_await c.send_all(wire)));
        char b[64];
        auto r = co_await server.recv(b).timeout(300ms);
        CO_ASSERT(!r.has_value()); // no data: the request was refused, nothing renegotiated
        EXPECT_EQ(r.error(), std::errc::timed_out);
        // The alert reached the client: its renegotiation fails.
        auto n = co_await c.recv(b).timeout(10s);
        CO_ASSERT(n && *n > 0);
        raw.feed(std::span<const char>(b, *n));
        const int hs = SSL_do_handshake(raw.ssl());
        EXPECT_NE(hs, 1);
        const unsigned long err = ERR_peek_error();
        char text[256];
        ERR_error_string_n(err, text, sizeof text);
        EXPECT_NE(std::string(text).find("renegotiation"), std::string::npos) << text;
        ERR_clear_error();
        EXPECT_EQ(SSL_renegotiate_pending(raw.ssl()), 1); // never completed
        EXPECT_FALSE(server.session_reused());
    }());
}

} // namespace

GALAY_INSTANTIATE_BACKENDS(TlsFaultTest);
