// tls::Context: building the OpenSSL context from a ServerConfig / ClientConfig, with every input
// checked up front, and the TLS error category.
#include "tls/context_state.hpp"
#include "tls/ktls.hpp"

#include "galay/error.hpp"
#include "galay/tls/error.hpp"
#include "galay/tls/stream.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <memory>

namespace galay::tls {

namespace {

class TlsCategory : public std::error_category {
public:
    const char* name() const noexcept override { return "galay.tls"; }
    std::string message(int c) const override {
        switch (static_cast<errc>(c)) {
        case errc::handshake_failed:
            return "TLS handshake failed";
        case errc::certificate_verify_failed:
            return "TLS certificate verify failed";
        case errc::truncated:
            return "TLS connection closed without close_notify (truncated)";
        case errc::protocol_error:
            return "TLS protocol error";
        case errc::broken:
            return "TLS stream broken by an earlier failure after encryption (close it)";
        case errc::not_connected:
            return "TLS handshake not done";
        }
        return "unknown TLS error";
    }
};

[[noreturn]] void fail_build(const std::string& what) {
    std::string reason = detail::drain_ssl_errors();
    throw Error(std::make_error_code(std::errc::invalid_argument),
                "tls context: " + what + (reason.empty() ? "" : ": " + reason));
}

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;

BioPtr pem_bio(const std::string& pem) {
    return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
}

/// The wire form of an ALPN list: each protocol prefixed by its length.
std::string alpn_wire(const std::vector<std::string>& protocols) {
    std::string out;
    for (const std::string& p : protocols) {
        if (p.empty() || p.size() > 255) fail_build("bad ALPN protocol name '" + p + "'");
        out.push_back(static_cast<char>(p.size()));
        out += p;
    }
    return out;
}

void load_server_identity(SSL_CTX* ctx, const ServerConfig& c) {
    if (!c.cert_file.empty()) {
        if (SSL_CTX_use_certificate_chain_file(ctx, c.cert_file.c_str()) != 1)
            fail_build("cannot load the certificate chain from '" + c.cert_file + "'");
    } else if (!c.cert_pem.empty()) {
        BioPtr bio = pem_bio(c.cert_pem);
        X509Ptr leaf(PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr), X509_free);
        if (!leaf || SSL_CTX_use_certificate(ctx, leaf.get()) != 1)
            fail_build("cannot read the certificate PEM");
        while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
            if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
                X509_free(extra);
                fail_build("cannot add a chain certificate");
            }
        }
        ERR_clear_error(); // (the loop ends on "no start line")
    } else {
        fail_build("a server needs a certificate (cert_file or cert_pem)");
    }
    if (!c.key_file.empty()) {
        if (SSL_CTX_use_PrivateKey_file(ctx, c.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
            fail_build("cannot load the private key from '" + c.key_file + "'");
    } else if (!c.key_pem.empty()) {
        BioPtr bio = pem_bio(c.key_pem);
        EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
        if (key == nullptr) fail_build("cannot read the private key PEM");
        const int ok = SSL_CTX_use_PrivateKey(ctx, key);
        EVP_PKEY_free(key);
        if (ok != 1) fail_build("cannot use the private key");
    } else {
        fail_build("a server needs a private key (key_file or key_pem)");
    }
    if (SSL_CTX_check_private_key(ctx) != 1)
        fail_build("the private key does not match the certificate");
}

int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void* arg) {
    const auto* ours = static_cast<const std::string*>(arg);
    unsigned char* chosen = nullptr;
    // The server's order decides: the first of ours that the client offers.
    if (SSL_select_next_proto(&chosen, outlen, reinterpret_cast<const unsigned char*>(ours->data()),
                              static_cast<unsigned>(ours->size()), in,
                              inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL; // no protocol in common (RFC 7301)
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

int on_new_session(SSL* ssl, SSL_SESSION* session) {
    auto* core = static_cast<detail::Core*>(SSL_get_app_data(ssl));
    if (core == nullptr || core->session_key.empty()) return 0;
    core->ctx->keep_session(core->session_key, session);
    return 1; // the cache keeps the reference
}

std::shared_ptr<detail::ContextState> new_state(bool server, Ktls ktls) {
    SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (ctx == nullptr) fail_build("SSL_CTX_new");
    auto state = std::make_shared<detail::ContextState>(ctx, server, ktls);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    state->follow = ktls != Ktls::off && (probe_ktls().available || detail::ktls_follow_always());
    if (state->follow) detail::ktls_keylog(ctx); // (TLS 1.3 traffic secrets for kTLS)
    return state;
}

} // namespace

const std::error_category& tls_category() noexcept {
    static const TlsCategory category;
    return category;
}

namespace detail {

ContextState::~ContextState() {
    for (auto& [key, s] : sessions)
        SSL_SESSION_free(s);
    SSL_CTX_free(ctx);
}

SSL_SESSION* ContextState::find_session(const std::string& key) {
    std::lock_guard lock(sessions_mutex);
    auto it = sessions.find(key);
    if (it == sessions.end()) return nullptr;
    SSL_SESSION_up_ref(it->second);
    return it->second;
}

void ContextState::keep_session(const std::string& key, SSL_SESSION* s) {
    std::lock_guard lock(sessions_mutex);
    SSL_SESSION*& slot = sessions[key];
    if (slot != nullptr) SSL_SESSION_free(slot);
    slot = s;
}

std::string drain_ssl_errors() {
    std::string out;
    while (unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        if (!out.empty()) out += "; ";
        out += buf;
    }
    return out;
}

} // namespace detail

Context Context::server(const ServerConfig& config) {
    ERR_clear_error();
    auto state = new_state(true, config.ktls);
    SSL_CTX* ctx = state->ctx;
    load_server_identity(ctx, config);
    static const unsigned char sid[] = "galay";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
    if (!config.session_tickets) {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    } else {
        SSL_CTX_set_num_tickets(ctx, config.tickets);
    }
    if (!config.alpn.empty()) {
        state->alpn = alpn_wire(config.alpn); // (the callback's argument: the state outlives it)
        SSL_CTX_set_alpn_select_cb(ctx, select_alpn, &state->alpn);
    }
    return Context(std::move(state));
}

Context Context::client(const ClientConfig& config) {
    ERR_clear_error();
    auto state = new_state(false, config.ktls);
    SSL_CTX* ctx = state->ctx;
    if (config.system_trust && SSL_CTX_set_default_verify_paths(ctx) != 1)
        fail_build("cannot load the system trust store");
    if (!config.ca_file.empty() &&
        SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1)
        fail_build("cannot load the CA file '" + config.ca_file + "'");
    if (!config.ca_pem.empty()) {
        BioPtr bio = pem_bio(config.ca_pem);
        X509_STORE* store = SSL_CTX_get_cert_store(ctx);
        int added = 0;
        while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
            const int ok = X509_STORE_add_cert(store, ca);
            X509_free(ca);
            if (ok != 1) fail_build("cannot add the CA certificate");
            ++added;
        }
        if (added == 0) fail_build("cannot read the CA PEM");
        ERR_clear_error();
    }
    state->verify = config.verify;
    SSL_CTX_set_verify(ctx, config.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
    if (!config.alpn.empty()) {
        const std::string wire = alpn_wire(config.alpn);
        if (SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(wire.data()),
                                    static_cast<unsigned>(wire.size())) != 0)
            fail_build("cannot set the ALPN list");
    }
    if (config.session_cache) {
        state->session_cache = true;
        SSL_CTX_set_session_cache_mode(ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    }
    return Context(std::move(state));
}

bool Context::is_server() const noexcept {
    return state_->server;
}
Ktls Context::ktls() const noexcept {
    return state_->ktls;
}
ssl_ctx_st* Context::native() const noexcept {
    return state_->ctx;
}

} // namespace galay::tls
