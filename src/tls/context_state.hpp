// What a tls::Context shares between its copies and its streams: the OpenSSL context and the
// client's session cache.
#pragma once

#include "galay/tls/context.hpp"

#include <openssl/ssl.h>

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace galay::tls::detail {

struct ContextState {
    ContextState(SSL_CTX* c, bool is_server, Ktls k) noexcept
        : ctx(c)
        , server(is_server)
        , ktls(k) {}
    ~ContextState();
    ContextState(const ContextState&) = delete;
    ContextState& operator=(const ContextState&) = delete;

    /// The session to offer to `key` (host:port), with a reference for the caller; or null.
    SSL_SESSION* find_session(const std::string& key);
    /// Keep `s` (whose reference this takes) as the session for `key`.
    void keep_session(const std::string& key, SSL_SESSION* s);

    SSL_CTX* ctx;
    bool server;
    bool verify = false;
    bool session_cache = false;
    Ktls ktls;
    /// Streams follow their handshakes for a kTLS hand-off (key log, message callback): only
    /// when the context allows kTLS and the kernel has it, since the key log costs OpenSSL a
    /// formatted line per secret on every handshake.
    bool follow = false;
    std::string alpn; // server: its ALPN list in wire form

    std::mutex sessions_mutex; // streams of several threads share one context
    std::unordered_map<std::string, SSL_SESSION*> sessions;
};

/// OpenSSL's queued errors as one line ("error:...:reason; error:...") and the queue emptied.
std::string drain_ssl_errors();

/// Say once per process, on stderr, that kTLS is not used and why (for Ktls::preferred).
void note_ktls_fallback(const std::string& reason);

} // namespace galay::tls::detail
