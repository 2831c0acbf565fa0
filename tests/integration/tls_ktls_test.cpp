// kTLS, on every backend: the keys galay would hand to the kernel (key, nonce parts, record
// sequence number per direction) are proven by decrypting the records galay actually put on the
// wire with them, in user space, for TLS 1.2 and 1.3 with AES-128-GCM and AES-256-GCM, both
// directions, full and resumed handshakes. Where the kernel has TLS, streams hand their keys to
// it and carry data through it; where it has not (this kernel), that test skips with the reason
// and the user-space fallback is checked, including that it is said once per process.
#include "support/process.hpp"
#include "support/raw_tls.hpp"
#include "support/tls_pair.hpp"

#include "../src/tls/ktls.hpp" // (the hand-off's derivation, checked against the wire)

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

using namespace galay;
using namespace galay::test;
using namespace std::chrono_literals;

namespace {

// Contexts follow their handshakes here even without kernel kTLS, so that the derivation is
// checked against the wire on every kernel (the last test checks what they do by default).
class TlsKtlsTest : public test::BackendTest {
protected:
    void SetUp() override {
        test::BackendTest::SetUp();
        tls::detail::ktls_follow_always(true);
    }
    void TearDown() override { tls::detail::ktls_follow_always(false); }
};

struct Suite {
    int version;        // TLS1_2_VERSION / TLS1_3_VERSION
    const char* cipher; // the one suite both sides allow
    std::size_t key_len;
};

constexpr Suite kSuites[] = {
    {TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256", 16},
    {TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384", 32},
    {TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256", 16},
    {TLS1_2_VERSION, "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384", 32},
};

void restrict_to(const tls::Context& ctx, const Suite& s) {
    SSL_CTX* c = ctx.native();
    SSL_CTX_set_max_proto_version(c, s.version);
    if (s.version == TLS1_3_VERSION)
        SSL_CTX_set_ciphersuites(c, s.cipher);
    else
        SSL_CTX_set_cipher_list(c, s.cipher);
}

const tls::detail::Core& core(tls::Stream& s) {
    return *static_cast<const tls::detail::Core*>(SSL_get_app_data(s.native()));
}

tls::detail::KtlsKeys keys(tls::Stream& s, bool tx) {
    std::string why;
    std::optional<tls::detail::KtlsKeys> k = tls::detail::ktls_keys(core(s), tx, why);
    if (!k) throw std::runtime_error("no kTLS keys: " + why);
    return *k;
}

std::uint64_t seq_of(const tls::detail::KtlsKeys& k) {
    std::uint64_t v = 0;
    for (unsigned char b : k.rec_seq)
        v = v << 8 | b;
    return v;
}

/// One TLS record as it was on the wire.
struct Record {
    std::string header, body;
};

/// Receive exactly `count` records from the raw socket under a TLS stream.
Task<std::vector<Record>> capture(TcpStream& tcp, std::size_t count) {
    std::string wire;
    std::vector<Record> out;
    char buf[4096];
    while (out.size() < count) {
        std::size_t pos = 0;
        out.clear();
        while (wire.size() - pos >= 5) {
            const std::size_t len = static_cast<unsigned char>(wire[pos + 3]) << 8 |
                                    static_cast<unsigned char>(wire[pos + 4]);
            if (wire.size() - pos - 5 < len) break;
            out.push_back({wire.substr(pos, 5), wire.substr(pos + 5, len)});
            pos += 5 + len;
        }
        if (out.size() >= count) break;
        auto n = co_await tcp.recv(std::span(buf)).timeout(10s);
        if (!n || *n == 0) throw std::runtime_error("the capture ended before the records");
        wire.append(buf, *n);
    }
    out.resize(count);
    co_return out;
}

/// Decrypt `r` with `k` at sequence number `seq`, as the kernel would; nullopt when the tag
/// does not verify. TLS 1.3 gives the inner plaintext (content, type, padding).
std::optional<std::string> open_record(const tls::detail::KtlsKeys& k, std::uint64_t seq,
                                       const Record& r) {
    unsigned char nonce[12], aad[13];
    std::size_t aad_len = 0, skip = 0;
    std::memcpy(nonce, k.salt.data(), 4);
    if (k.version == TLS1_3_VERSION) {
        std::memcpy(nonce + 4, k.iv.data(), 8);
        for (int i = 0; i < 8; ++i)
            nonce[11 - i] ^= static_cast<unsigned char>(seq >> (8 * i));
        std::memcpy(aad, r.header.data(), 5);
        aad_len = 5;
    } else {
        if (r.body.size() < 8 + 16) return std::nullopt;
        std::memcpy(nonce + 4, r.body.data(), 8); // the explicit nonce
        skip = 8;
        for (int i = 0; i < 8; ++i)
            aad[7 - i] = static_cast<unsigned char>(seq >> (8 * i));
        std::memcpy(aad + 8, r.header.data(), 3); // type, version
        const std::size_t plain = r.body.size() - 8 - 16;
        aad[11] = static_cast<unsigned char>(plain >> 8);
        aad[12] = static_cast<unsigned char>(plain);
        aad_len = 13;
    }
    if (r.body.size() < skip + 16) return std::nullopt;
    const std::size_t ct_len = r.body.size() - skip - 16;
    const auto* ct = reinterpret_cast<const unsigned char*>(r.body.data()) + skip;
    std::string out(ct_len, '\0');
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    int n = 0;
    bool ok = EVP_DecryptInit_ex(ctx, k.key_len == 16 ? EVP_aes_128_gcm() : EVP_aes_256_gcm(),
                                 nullptr, k.key.data(), nonce) == 1 &&
              EVP_DecryptUpdate(ctx, nullptr, &n, aad, static_cast<int>(aad_len)) == 1 &&
              EVP_DecryptUpdate(ctx, reinterpret_cast<unsigned char*>(out.data()), &n, ct,
                                static_cast<int>(ct_len)) == 1 &&
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16,
                                  const_cast<unsigned char*>(ct + ct_len)) == 1 &&
              EVP_DecryptFinal_ex(ctx, reinterpret_cast<unsigned char*>(out.data()) + n, &n) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) return std::nullopt;
    return out;
}

/// TLS 1.3's inner plaintext -> (content type, content).
std::pair<int, std::string> unpad(std::string inner) {
    while (!inner.empty() && inner.back() == '\0')
        inner.pop_back();
    if (inner.empty()) return {-1, ""};
    const int type = static_cast<unsigned char>(inner.back());
    inner.pop_back();
    return {type, inner};
}

/// `from` sends `payload`; the records the peer's socket receives, from the first one after
/// the peer's hand-off point to the payload's, all open with the receiver's keys at their
/// sequence numbers, and the payload's also with the sender's keys.
Task<void> check_direction(tls::Stream& from, tls::Stream& to, const std::string& payload) {
    const tls::detail::KtlsKeys tx = keys(from, true), rx = keys(to, false);
    EXPECT_EQ(tx.key, rx.key);
    EXPECT_EQ(tx.salt, rx.salt);
    if (tx.version == TLS1_3_VERSION) {
        EXPECT_EQ(tx.iv, rx.iv);
    }
    CO_ASSERT(seq_of(tx) >= seq_of(rx)); // the receiver may have records still to read
    auto sent = co_await from.send_all(std::span(payload)).timeout(10s);
    CO_ASSERT(sent.has_value());
    const std::size_t count = seq_of(tx) - seq_of(rx) + 1;
    std::vector<Record> records = co_await capture(to.tcp(), count);
    for (std::size_t i = 0; i < count; ++i) {
        std::optional<std::string> plain = open_record(rx, seq_of(rx) + i, records[i]);
        CO_ASSERT(plain.has_value());
        const bool last = i + 1 == count;
        if (tx.version == TLS1_3_VERSION) {
            auto [type, content] = unpad(*plain);
            EXPECT_EQ(type, last ? 23 : 22); // before the payload: NewSessionTickets
            if (last) {
                EXPECT_EQ(content, payload);
            }
        } else {
            EXPECT_TRUE(last); // TLS 1.2 tickets go before ChangeCipherSpec
            EXPECT_EQ(*plain, payload);
            // The kernel would go on from OpenSSL's nonce counter: this record's explicit
            // nonce is the one the hand-off computed for the sender.
            EXPECT_EQ(records[i].body.substr(0, 8),
                      std::string(reinterpret_cast<const char*>(tx.iv.data()), 8));
        }
        if (last) {
            EXPECT_EQ(open_record(tx, seq_of(tx), records[i]), plain);
        }
    }
    // A wrong sequence number does not open the payload's record (the check can fail).
    EXPECT_FALSE(open_record(rx, seq_of(rx) + count, records[count - 1]).has_value());
}

TEST_P(TlsKtlsTest, the_derived_keys_open_the_records_galay_sends_both_ways) {
    for (const Suite& suite : kSuites) {
        SCOPED_TRACE(suite.cipher);
        const tls::Context sctx = server_context(pki().server());
        const tls::Context cctx = client_context();
        restrict_to(sctx, suite);
        restrict_to(cctx, suite);
        TcpListener listener = listen_loopback(); // (one port: the client's session cache key)
        for (int round = 0; round < 2; ++round) { // a full handshake, then a resumed one
            SCOPED_TRACE(round == 0 ? "full handshake" : "resumed");
            run([&]() -> Task<void> {
                Handshaken h = co_await tls_pair(sctx, cctx, "localhost", &listener);
                CO_ASSERT(h.client_result && h.server_result);
                EXPECT_EQ(h.client.version(),
                          suite.version == TLS1_3_VERSION ? "TLSv1.3" : "TLSv1.2");
                EXPECT_EQ(keys(h.client, true).key_len, suite.key_len);
                // TLS 1.2 resumes here; TLS 1.3 does when the client read a ticket first.
                if (round == 1 && suite.version == TLS1_2_VERSION) {
                    EXPECT_TRUE(h.client.session_reused());
                }
                co_await check_direction(h.server, h.client, pattern(1000, 1));
                co_await check_direction(h.client, h.server, pattern(3000, 2));
            }());
        }
    }
}

TEST_P(TlsKtlsTest, a_suite_the_kernel_is_not_given_is_refused_with_the_reason) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    for (const tls::Context* c : {&sctx, &cctx})
        SSL_CTX_set_ciphersuites(c->native(), "TLS_CHACHA20_POLY1305_SHA256");
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        std::string why;
        EXPECT_FALSE(tls::detail::ktls_keys(core(h.client), true, why).has_value());
        EXPECT_NE(why.find("is not AES-GCM"), std::string::npos) << why;
    }());
}

TEST_P(TlsKtlsTest, without_kernel_tls_streams_stay_in_user_space_and_say_why) {
    const tls::KtlsProbe& probe = tls::probe_ktls();
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = tls::Context::client(
        {.system_trust = false, .ca_file = pki().ca().cert, .ktls = tls::Ktls::off});
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        EXPECT_FALSE(h.client.ktls());
        EXPECT_NE(h.client.ktls_status().find("Ktls::off"), std::string::npos)
            << h.client.ktls_status();
        if (!probe.available) {
            EXPECT_FALSE(h.server.ktls());
            EXPECT_NE(h.server.ktls_status().find(probe.reason), std::string::npos)
                << h.server.ktls_status();
        }
        const std::string data = pattern(100000, 3);
        auto [sent, got] = co_await when_all(as_task(h.server.send_all(std::span(data))),
                                             recv_exactly(h.client, data.size()));
        CO_ASSERT(sent && got);
        EXPECT_EQ(*got, data);
    }());
}

// Following a handshake for the hand-off costs every handshake OpenSSL's key log (a formatted
// line per secret) and a message callback: a context does it only where the kernel has kTLS.
TEST_P(TlsKtlsTest, without_kernel_tls_a_context_does_not_follow_its_handshakes) {
    tls::detail::ktls_follow_always(false);
    const tls::KtlsProbe& probe = tls::probe_ktls();
    const tls::Context sctx = server_context(pki().server()); // (Ktls::automatic)
    const tls::Context cctx = client_context();
    EXPECT_EQ(SSL_CTX_get_keylog_callback(sctx.native()) != nullptr, probe.available);
    EXPECT_EQ(SSL_CTX_get_keylog_callback(cctx.native()) != nullptr, probe.available);
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        if (!probe.available) {
            for (tls::Stream* s : {&h.server, &h.client}) {
                EXPECT_EQ(core(*s).ktls_track, nullptr);
                EXPECT_FALSE(s->ktls());
                EXPECT_NE(s->ktls_status().find(probe.reason), std::string::npos)
                    << s->ktls_status();
            }
        }
        const std::string data = pattern(100000, 5);
        auto [sent, got] = co_await when_all(as_task(h.server.send_all(std::span(data))),
                                             recv_exactly(h.client, data.size()));
        CO_ASSERT(sent && got);
        EXPECT_EQ(*got, data);
    }());
}

/// Run by the next test in a child process (a fresh one: "once per process").
TEST(TlsKtlsChild, DISABLED_preferred_streams_in_a_fresh_process) {
    const char* name = std::getenv("GALAY_KTLS_CHILD_BACKEND");
    ASSERT_NE(name, nullptr);
    Backend backend = Backend::epoll;
    for (Backend b : built_backends())
        if (backend_name(b) == std::string_view(name)) backend = b;
    const tls::Context sctx = tls::Context::server({.cert_file = pki().server().cert,
                                                    .key_file = pki().server().key,
                                                    .ktls = tls::Ktls::preferred});
    const tls::Context cctx = client_context();
    Scheduler s({.backend = backend});
    for (int i = 0; i < 3; ++i)
        s.block_on([&]() -> Task<void> {
            Handshaken h = co_await tls_pair(sctx, cctx);
            CO_ASSERT(h.client_result && h.server_result);
        }());
}

TEST_P(TlsKtlsTest, the_fallback_is_said_once_per_process_with_the_reason) {
    char self[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT_GT(n, 0);
    self[n] = '\0';
    ProcessResult r = run_process(
        {"env", std::string("GALAY_KTLS_CHILD_BACKEND=") + std::string(backend_name(GetParam())),
         self, "--gtest_filter=TlsKtlsChild.*", "--gtest_also_run_disabled_tests"});
    ASSERT_TRUE(r.exited && r.exit_code == 0) << r.out << r.err;
    const std::string line = "galay tls: kTLS not used: ";
    std::size_t said = 0;
    for (std::size_t p = r.err.find(line); p != std::string::npos; p = r.err.find(line, p + 1))
        ++said;
    const tls::KtlsProbe& probe = tls::probe_ktls();
    EXPECT_EQ(said, probe.available ? 0u : 1u) << r.err;
    if (!probe.available) {
        EXPECT_NE(r.err.find(probe.reason), std::string::npos) << r.err;
    }
}

// A client's first request often arrives with its Finished, so OpenSSL holds it when the
// server's handshake ends: the hand-off waits until the application has read it and happens at
// the next receive that has to wait, with the sequence numbers of that moment.
TEST_P(TlsKtlsTest, a_hand_off_put_off_by_a_request_happens_at_the_next_waiting_receive) {
    const tls::KtlsProbe& probe = tls::probe_ktls();
    const tls::Context sctx = server_context(pki().server());
    run([&]() -> Task<void> {
        auto [c, s] = co_await loopback_pair();
        tls::Stream server = tls::Stream::server(sctx, std::move(s));
        RawTlsClient raw(pki().ca().cert);
        auto client = [&]() -> Task<bool> { // its Finished and a request in one send
            char buf[16384];
            for (;;) {
                const int r = SSL_do_handshake(raw.ssl());
                std::string out = raw.take_output();
                if (r == 1) out += raw.encrypt("request");
                if (!out.empty() && !co_await c.send_all(out).timeout(10s)) co_return false;
                if (r == 1) co_return true;
                if (SSL_get_error(raw.ssl(), r) != SSL_ERROR_WANT_READ) co_return false;
                auto n = co_await c.recv(std::span(buf)).timeout(10s);
                if (!n || *n == 0) co_return false;
                raw.feed(std::span<const char>(buf, *n));
            }
        };
        auto [hs, sent] = co_await when_all(as_task(server.handshake().timeout(10s)), client());
        CO_ASSERT(hs.has_value() && sent);
        EXPECT_NE(server.ktls_status().find("kTLS waits"), std::string::npos)
            << server.ktls_status();
        auto first = co_await recv_exactly(server, 7); // from OpenSSL's buffer
        CO_ASSERT(first.has_value());
        EXPECT_EQ(*first, "request");
        char b;
        auto idle = co_await server.recv(std::span(&b, 1)).timeout(1ms); // (nothing comes)
        EXPECT_EQ(idle.error(), std::errc::timed_out);
        if (probe.available) {
            EXPECT_TRUE(server.ktls()) << server.ktls_status();
            const std::string more = raw.encrypt("third");
            CO_ASSERT(co_await c.send_all(more).timeout(10s));
            auto third = co_await recv_exactly(server, 5);
            CO_ASSERT(third.has_value());
            EXPECT_EQ(*third, "third");
            co_return;
        }
        EXPECT_NE(server.ktls_status().find(probe.reason), std::string::npos)
            << server.ktls_status();
        const tls::detail::KtlsKeys rx = keys(server, false), tx = keys(server, true);
        EXPECT_EQ(seq_of(rx), 1u); // the request's record came first
        CO_ASSERT(co_await c.send_all(raw.encrypt("third")).timeout(10s));
        std::vector<Record> in = co_await capture(server.tcp(), 1);
        std::optional<std::string> third = open_record(rx, seq_of(rx), in[0]);
        CO_ASSERT(third.has_value());
        EXPECT_EQ(unpad(*third), std::pair(23, std::string("third")));
        CO_ASSERT(co_await server.send_all(std::string_view("reply")).timeout(10s));
        std::vector<Record> out = co_await capture(c, seq_of(tx) + 1); // tickets, then reply
        std::optional<std::string> reply = open_record(tx, seq_of(tx), out.back());
        CO_ASSERT(reply.has_value());
        EXPECT_EQ(unpad(*reply), std::pair(23, std::string("reply")));
    }());
}

// After a hand-off the socket carries plaintext and galay uses its ordinary socket operations.
// Without kernel TLS here, a stream whose handshake is done is switched to that path by hand and
// talks to the plain socket underneath its peer: what the kernel's TLS socket looks like for
// application data, and what the close_notify it would encrypt is made of.
TEST_P(TlsKtlsTest, after_the_hand_off_plaintext_moves_through_the_sockets_own_operations) {
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    run([&]() -> Task<void> {
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        // The client takes what the server sent in TLS (its session tickets) before the switch.
        auto [one, got_one] = co_await when_all(as_task(h.server.send_all(std::string_view("x"))),
                                                recv_exactly(h.client, 1));
        CO_ASSERT(one && got_one);
        auto& server = const_cast<tls::detail::Core&>(core(h.server));
        server.ktls_tx = server.ktls_rx = true;
        EXPECT_TRUE(h.server.ktls());
        TcpStream& peer = h.client.tcp(); // (plaintext from here)
        const std::string big = pattern(300000, 6);
        auto [sent, got] = co_await when_all(as_task(h.server.send_all(std::span(big))),
                                             [&]() -> Task<Result<std::size_t>> {
                                                 std::string in(big.size(), '\0');
                                                 auto r = co_await peer.recv_exact(std::span(in));
                                                 if (r && in != big)
                                                     ADD_FAILURE() << "bytes differ";
                                                 co_return r;
                                             }());
        CO_ASSERT(sent && got);
        const std::string hello = "hello through the socket";
        auto w = co_await peer.send_all(std::span(hello));
        CO_ASSERT(w.has_value());
        auto back = co_await recv_exactly(h.server, hello.size());
        CO_ASSERT(back.has_value());
        EXPECT_EQ(*back, hello);
        const iovec parts[] = {{const_cast<char*>("ab"), 2}, {const_cast<char*>("cde"), 3}};
        auto v = co_await h.server.writev(parts).timeout(5s);
        CO_ASSERT(v.has_value());
        // close_notify: the alert's two bytes (warning, close_notify) as one record of type 21,
        // which a plain socket passes as they are; then the TCP write shutdown.
        auto down = co_await h.server.shutdown().timeout(5s);
        CO_ASSERT(down.has_value());
        std::string rest(*v + 2, '\0');
        auto tail = co_await peer.recv_exact(std::span(rest)).timeout(5s);
        CO_ASSERT(tail.has_value());
        EXPECT_EQ(rest.substr(0, *v), std::string("abcde").substr(0, *v));
        EXPECT_EQ(rest.substr(*v), std::string("\x01\x00", 2));
        char c;
        auto eof = co_await peer.recv(std::span(&c, 1)).timeout(5s);
        CO_ASSERT(eof.has_value());
        EXPECT_EQ(*eof, 0u);
        // The peer ends without close_notify: truncation, as in user space.
        (void)peer.shutdown(Shutdown::write);
        auto cut = co_await h.server.recv(std::span(&c, 1)).timeout(5s);
        CO_ASSERT(!cut.has_value());
        EXPECT_EQ(cut.error(), tls::errc::truncated);
    }());
}

// What the kernel passes up that is not application data arrives in pieces as large as the
// caller's buffer: alerts and handshake messages are reassembled across them.
TEST(TlsKtlsControl, alerts_and_handshake_messages_are_read_across_any_split) {
    tls::detail::ktls_follow_always(true); // (the track reads the control records)
    struct Reset {
        ~Reset() { tls::detail::ktls_follow_always(false); }
    } reset;
    const tls::Context sctx = server_context(pki().server());
    const tls::Context cctx = client_context();
    Scheduler sched;
    sched.block_on([&]() -> Task<void> {
        auto control = [](tls::Stream& s, unsigned char type, std::string bytes) {
            auto& c = const_cast<tls::detail::Core&>(core(s));
            std::optional<Result<std::size_t>> last;
            for (char b : bytes) { // one byte at a time: the worst split
                const auto u = static_cast<unsigned char>(b);
                last = tls::detail::ktls_control(c, type, &u, 1);
                if (last) break;
            }
            return last;
        };
        Handshaken h = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h.client_result && h.server_result);
        // Two NewSessionTickets (type 4, 3-byte length, body) are skipped; a close_notify ends.
        std::string tickets =
            std::string("\x04\x00\x00\x05", 4) + "12345" + std::string("\x04\x00\x00\x01", 4) + "x";
        EXPECT_FALSE(control(h.client, 22, tickets).has_value());
        auto end = control(h.client, 21, std::string("\x01\x00", 2));
        CO_ASSERT(end.has_value() && end->has_value());
        EXPECT_EQ(**end, 0u);
        // A KeyUpdate cannot be given to the kernel: the stream ends with the reason.
        auto update = control(h.server, 22, std::string("\x18\x00\x00\x01\x00", 5));
        CO_ASSERT(update.has_value() && !update->has_value());
        EXPECT_EQ(update->error(), tls::errc::protocol_error);
        EXPECT_NE(h.server.last_error().find("KeyUpdate"), std::string::npos);
        // A fatal alert (bad_record_mac, 20) says which.
        Handshaken h2 = co_await tls_pair(sctx, cctx);
        CO_ASSERT(h2.client_result && h2.server_result);
        auto fatal = control(h2.client, 21, std::string("\x02\x14", 2));
        CO_ASSERT(fatal.has_value() && !fatal->has_value());
        EXPECT_NE(h2.client.last_error().find("alert 20"), std::string::npos)
            << h2.client.last_error();
    }());
}

TEST_P(TlsKtlsTest, with_kernel_tls_the_kernel_carries_the_records) {
    const tls::KtlsProbe& probe = tls::probe_ktls();
    if (!probe.available)
        GTEST_SKIP() << "SKIP: kTLS unavailable, the kernel hand-off is not exercised: "
                     << probe.reason;
    for (const Suite& suite : kSuites) {
        SCOPED_TRACE(suite.cipher);
        const tls::Context sctx = server_context(pki().server());
        const tls::Context cctx = client_context();
        restrict_to(sctx, suite);
        restrict_to(cctx, suite);
        run([&]() -> Task<void> {
            Handshaken h = co_await tls_pair(sctx, cctx);
            CO_ASSERT(h.client_result && h.server_result);
            EXPECT_TRUE(h.server.ktls()) << h.server.ktls_status();
            EXPECT_TRUE(h.client.ktls()) << h.client.ktls_status();
            for (std::size_t size : {std::size_t{1}, std::size_t{16384}, std::size_t{1} << 20}) {
                const std::string a = pattern(size, 4), b = pattern(size, 5);
                auto [s1, g1] = co_await when_all(as_task(h.server.send_all(std::span(a))),
                                                  recv_exactly(h.client, a.size()));
                auto [s2, g2] = co_await when_all(as_task(h.client.send_all(std::span(b))),
                                                  recv_exactly(h.server, b.size()));
                CO_ASSERT(s1 && g1 && s2 && g2);
                EXPECT_EQ(*g1, a);
                EXPECT_EQ(*g2, b);
            }
            // close_notify as an alert record through the kernel: the peer sees a clean end.
            auto down = co_await h.client.shutdown().timeout(5s);
            CO_ASSERT(down.has_value());
            char c;
            auto end = co_await h.server.recv(std::span(&c, 1)).timeout(5s);
            CO_ASSERT(end.has_value());
            EXPECT_EQ(*end, 0u);
        }());
    }
}

} // namespace

GALAY_INSTANTIATE_BACKENDS(TlsKtlsTest);
