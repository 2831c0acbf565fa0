// galay/tls/context.hpp: TLS configuration shared by many connections (OpenSSL 3 underneath).
//
//     auto server = galay::tls::Context::server({.cert_file = "cert.pem",
//                                                .key_file = "key.pem",
//                                                .alpn = {"http/1.1"}});
//     auto client = galay::tls::Context::client({.ca_file = "ca.pem"}); // + the system store
//
// A context is built once and shared by every stream made from it (copies share one OpenSSL
// context; it may be used from several threads). Building one checks everything that can be
// checked before a connection: a missing or unreadable file, PEM that does not parse, a key that
// does not match its certificate. Such a failure throws `galay::Error` whose what() carries
// OpenSSL's reason.
//
// Servers: TLS 1.2 at least, 1.3 preferred, the certificate chain and key from files or from PEM
// text, an ALPN list in preference order, session tickets for resumption. Clients: the system
// trust store through OpenSSL's default verify paths (so SSL_CERT_FILE / SSL_CERT_DIR work as for
// every OpenSSL program) plus an optional extra CA; the peer's certificate and host name are
// verified unless `verify = false`; SNI; ALPN; and a session cache, so that a second connection
// to the same host resumes its session.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct ssl_ctx_st;
struct ssl_session_st;

namespace galay::tls {

/// Kernel TLS (kTLS): after the handshake, a stream hands its AES-GCM keys to the kernel when the
/// kernel has TLS (probe_ktls()), and the socket then carries plaintext (Stream::ktls()).
enum class Ktls {
    off,       ///< never
    automatic, ///< when the kernel has it, silently falling back otherwise
    preferred, ///< as automatic, and say once per process on stderr when falling back
};

/// What probe_ktls() found.
struct KtlsProbe {
    /// The kernel accepts the "tls" upper-layer protocol.
    bool available = false;
    std::string reason; ///< why not, when not
};

/// Whether this kernel offers kTLS (setsockopt TCP_ULP "tls" on a connected loopback socket).
/// Probed once per process.
const KtlsProbe& probe_ktls();

/// What a server context is built from (Context::server).
struct ServerConfig {
    /// The certificate chain (leaf first), as a PEM file...
    std::string cert_file{};
    /// ... and its private key, as a PEM file.
    std::string key_file{};
    /// The certificate chain as PEM text (used when cert_file is empty).
    std::string cert_pem{};
    /// The private key as PEM text (used when key_file is empty).
    std::string key_pem{};
    /// ALPN protocols in preference order ("h2", "http/1.1"); empty: no ALPN.
    std::vector<std::string> alpn{};
    /// Session tickets (stateless resumption).
    bool session_tickets = true;
    /// Tickets sent after each full TLS 1.3 handshake (with session_tickets; a resumed one
    /// gets one either way). Each costs the server a session encryption, about 5% of a full
    /// handshake's CPU. OpenSSL's own default is 2 (nginx keeps it), so that a client opening
    /// two connections at once can resume both without reusing a ticket; Go's server sends 1.
    unsigned tickets = 1;
    /// Kernel TLS: off, automatic or preferred (see Ktls).
    Ktls ktls = Ktls::automatic;
};

/// What a client context is built from (Context::client).
struct ClientConfig {
    /// Verify the peer's certificate chain and that it names the host (SSL_set1_host).
    bool verify = true;
    /// Trust the system store (OpenSSL's default verify paths, SSL_CERT_FILE / SSL_CERT_DIR).
    bool system_trust = true;
    /// An extra CA to trust, as a PEM file...
    std::string ca_file{};
    /// ... or as PEM text.
    std::string ca_pem{};
    /// ALPN protocols to offer, in preference order.
    std::vector<std::string> alpn{};
    /// Keep the last session per host and port and offer it on the next connection.
    bool session_cache = true;
    /// Kernel TLS: off, automatic or preferred (see Ktls).
    Ktls ktls = Ktls::automatic;
};

namespace detail {
struct ContextState;
}

/// A TLS configuration (an OpenSSL SSL_CTX), shared by its copies and the streams made from it.
class Context {
public:
    /// Build a server context; throws galay::Error with OpenSSL's reason on bad input.
    static Context server(const ServerConfig& config);
    /// Build a client context; throws galay::Error with OpenSSL's reason on bad input.
    static Context client(const ClientConfig& config = {});

    /// Built by Context::server (else by Context::client).
    bool is_server() const noexcept;
    /// The kTLS setting it was built with.
    Ktls ktls() const noexcept;
    /// The OpenSSL context, for settings galay does not wrap (it stays owned by the Context).
    ssl_ctx_st* native() const noexcept;

    /// The shared state (what Stream keeps alive).
    const std::shared_ptr<detail::ContextState>& state() const noexcept { return state_; }

private:
    explicit Context(std::shared_ptr<detail::ContextState> s) noexcept
        : state_(std::move(s)) {}
    std::shared_ptr<detail::ContextState> state_;
};

} // namespace galay::tls
