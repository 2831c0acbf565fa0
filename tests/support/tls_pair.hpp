// What the TLS tests share: the run-time PKI, contexts made from it, a loopback pair wrapped in
// TLS with both handshakes run together, and exact reads.
#pragma once

#include "support/backends.hpp"
#include "support/certs.hpp"
#include "support/tcp_pair.hpp"

#include <galay/tls/stream.hpp>

#include <string>
#include <vector>

namespace galay::test {

using namespace std::chrono_literals;

inline const TestPki& pki() {
    static const TestPki p;
    return p;
}

inline tls::Context server_context(const CertFiles& id, std::vector<std::string> alpn = {}) {
    return tls::Context::server({.cert_file = id.cert, .key_file = id.key, .alpn = alpn});
}

inline tls::Context client_context(std::vector<std::string> alpn = {}) {
    return tls::Context::client({.system_trust = false, .ca_file = pki().ca().cert, .alpn = alpn});
}

inline TcpListener listen_loopback() {
    auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
    if (!l) throw Error(l.error(), "bind");
    return std::move(*l);
}

struct Handshaken {
    tls::Stream client, server;
    Result<void> client_result, server_result;
};

/// A TCP pair wrapped in TLS, both handshakes run together.
inline Task<Handshaken> tls_pair(const tls::Context& sctx, const tls::Context& cctx,
                                 std::string host = "localhost", TcpListener* listener = nullptr) {
    auto [c, s] = co_await loopback_pair(listener);
    Handshaken h{tls::Stream::client(cctx, std::move(c), host),
                 tls::Stream::server(sctx, std::move(s)),
                 {},
                 {}};
    auto [cr, sr] = co_await when_all(as_task(h.client.handshake().timeout(10s)),
                                      as_task(h.server.handshake().timeout(10s)));
    h.client_result = cr;
    h.server_result = sr;
    co_return h;
}

inline std::string pattern(std::size_t n, unsigned seed) {
    std::string s(n, '\0');
    std::uint32_t x = seed * 2654435761u + 1;
    for (char& c : s) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c = static_cast<char>(x);
    }
    return s;
}

/// Read exactly `n` bytes (several recvs) or fail.
inline Task<Result<std::string>> recv_exactly(tls::Stream& s, std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
        auto r = co_await s.recv(std::span(out.data() + got, n - got)).timeout(20s);
        if (!r) co_return std::unexpected(r.error());
        if (*r == 0) co_return std::unexpected(make_error_code(errc::unexpected_eof));
        got += *r;
    }
    co_return out;
}

} // namespace galay::test
