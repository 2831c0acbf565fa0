// What the raw-OpenSSL baselines share: OpenSSL's error queue as a fatal message, the server
// context from a certificate chain and key, and their --cert/--key/port options.
#pragma once

#include "galay_cli.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace baseline {

/// `tool: what: OpenSSL's queued errors` on stderr, exit 1.
[[noreturn]] inline void die_ssl(const char* tool, const std::string& what) {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        out += out.empty() ? "" : "; ";
        out += buf;
    }
    std::fprintf(stderr, "%s: %s: %s\n", tool, what.c_str(), out.c_str());
    std::exit(1);
}

/// A server context as any server's: TLS 1.2 minimum, no renegotiation, OpenSSL's default
/// suites and session tickets, `mode` added; the chain and key checked (exit 1 if unusable).
inline SSL_CTX* tls_server_context(const char* tool, const std::string& cert,
                                   const std::string& key, long mode) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) die_ssl(tool, "SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    if (mode != 0) SSL_CTX_set_mode(ctx, mode);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) die_ssl(tool, "--cert " + cert);
    if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1)
        die_ssl(tool, "--key " + key);
    if (SSL_CTX_check_private_key(ctx) != 1) die_ssl(tool, "--key does not match --cert");
    return ctx;
}

/// The positional port and the required --cert and --key of a TLS server baseline.
inline void tls_server_options(cli::App& app, std::string& port, std::string& cert,
                               std::string& key) {
    namespace tools = galay::tools;
    app.add_option("port", port, "TCP port (0: any free port)")
        ->check(tools::whole(0, 65535))
        ->capture_default_str();
    app.add_option("--cert", cert, "certificate chain (PEM)")
        ->required()
        ->check(tools::non_empty());
    app.add_option("--key", key, "private key (PEM)")->required()->check(tools::non_empty());
}

} // namespace baseline
