// The kTLS key hand-off: following the handshake (record counts, TLS 1.3 traffic secrets, TLS
// 1.2's explicit nonce) and deriving each direction's key, nonce parts and sequence number.
#include "tls/ktls.hpp"

#include "galay/tls/stream.hpp"
#include "tls/context_state.hpp"

#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace galay::tls::detail {

namespace {

constexpr std::size_t kRandom = 32; // client_random, server_random

void on_message(int write_p, int, int content_type, const void* buf, std::size_t len, SSL* ssl,
                void* arg) {
    auto* t = static_cast<KtlsTrack*>(arg);
    std::uint64_t& records = write_p ? t->tx_records : t->rx_records;
    const auto* p = static_cast<const unsigned char*>(buf);
    const bool tls13 = SSL_version(ssl) == TLS1_3_VERSION;
    // OpenSSL reports a record's header before the messages in it, and switches keys after a
    // ChangeCipherSpec record (TLS 1.2) or a Finished message (TLS 1.3): the count restarts
    // there. (A TLS 1.3 compatibility ChangeCipherSpec comes before the Finished.)
    if (content_type == SSL3_RT_HEADER && len > 0 && p[0] == SSL3_RT_CHANGE_CIPHER_SPEC)
        records = 0;
    else if (content_type == SSL3_RT_HEADER)
        ++records;
    else if (content_type == SSL3_RT_HANDSHAKE && len > 0 && p[0] == SSL3_MT_FINISHED && tls13)
        records = 0;
    else if (content_type == SSL3_RT_HANDSHAKE && len > 0 && p[0] == SSL3_MT_KEY_UPDATE)
        t->key_update = true;
}

int unhex(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/// "LABEL <client_random hex> <secret hex>" -> the secret, when LABEL is `label`.
bool take_secret(std::string_view line, std::string_view label, std::array<unsigned char, 64>& out,
                 std::size_t& out_len) {
    if (!line.starts_with(label) || line.size() <= label.size() || line[label.size()] != ' ')
        return false;
    const std::size_t space = line.find(' ', label.size() + 1);
    if (space == std::string_view::npos) return false;
    const std::string_view hex = line.substr(space + 1);
    if (hex.size() % 2 != 0 || hex.size() / 2 > out.size()) return false;
    for (std::size_t i = 0; i < hex.size() / 2; ++i) {
        const int hi = unhex(hex[2 * i]), lo = unhex(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    out_len = hex.size() / 2;
    return true;
}

void on_keylog(const SSL* ssl, const char* line) {
    const auto* c = static_cast<const Core*>(SSL_get_app_data(ssl));
    if (c == nullptr || !c->ktls_track) return;
    KtlsTrack& t = *c->ktls_track;
    if (!take_secret(line, "CLIENT_TRAFFIC_SECRET_0", t.client_secret, t.client_secret_len))
        take_secret(line, "SERVER_TRAFFIC_SECRET_0", t.server_secret, t.server_secret_len);
}

bool derive(const char* kdf_name, OSSL_PARAM* params, unsigned char* out, std::size_t n) {
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, kdf_name, nullptr);
    EVP_KDF_CTX* kctx = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
    const bool ok = kctx != nullptr && EVP_KDF_derive(kctx, out, n, params) == 1;
    EVP_KDF_CTX_free(kctx);
    EVP_KDF_free(kdf);
    return ok;
}

/// HKDF-Expand-Label(secret, label, "", n) of RFC 8446, section 7.1.
bool expand_label(const EVP_MD* md, const unsigned char* secret, std::size_t secret_len,
                  std::string_view label, unsigned char* out, std::size_t n) {
    unsigned char info[2 + 1 + 6 + 16 + 1];
    std::size_t k = 0;
    info[k++] = static_cast<unsigned char>(n >> 8);
    info[k++] = static_cast<unsigned char>(n);
    info[k++] = static_cast<unsigned char>(6 + label.size());
    std::memcpy(info + k, "tls13 ", 6);
    k += 6;
    std::memcpy(info + k, label.data(), label.size());
    k += label.size();
    info[k++] = 0; // empty context
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
                           OSSL_PARAM_construct_utf8_string(
                               OSSL_KDF_PARAM_DIGEST, const_cast<char*>(EVP_MD_get0_name(md)), 0),
                           OSSL_PARAM_construct_octet_string(
                               OSSL_KDF_PARAM_KEY, const_cast<unsigned char*>(secret), secret_len),
                           OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, k),
                           OSSL_PARAM_construct_end()};
    return derive("HKDF", params, out, n);
}

/// The TLS 1.2 key block (RFC 5246, section 6.3): PRF(master, "key expansion", server_random
/// + client_random).
bool key_block(const SSL* ssl, const EVP_MD* md, unsigned char* out, std::size_t n) {
    unsigned char master[SSL_MAX_MASTER_KEY_LENGTH];
    const std::size_t master_len =
        SSL_SESSION_get_master_key(SSL_get_session(ssl), master, sizeof master);
    unsigned char seed[13 + 2 * kRandom];
    std::memcpy(seed, "key expansion", 13);
    SSL_get_server_random(ssl, seed + 13, kRandom);
    SSL_get_client_random(ssl, seed + 13 + kRandom, kRandom);
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
                                         const_cast<char*>(EVP_MD_get0_name(md)), 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SECRET, master, master_len),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SEED, seed, sizeof seed),
        OSSL_PARAM_construct_end()};
    const bool ok = master_len > 0 && derive("TLS1-PRF", params, out, n);
    OPENSSL_cleanse(master, sizeof master);
    return ok;
}

void big_endian(std::uint64_t v, std::array<unsigned char, 8>& out) {
    for (int i = 7; i >= 0; --i, v >>= 8)
        out[static_cast<std::size_t>(i)] = static_cast<unsigned char>(v);
}

} // namespace

void KtlsTrack::sent(const unsigned char* p, std::size_t n) noexcept {
    while (n > 0) {
        if (header_have < header.size()) {
            header[header_have++] = *p++;
            --n;
            if (header_have == header.size()) {
                body_left = std::size_t{header[3]} << 8 | header[4];
                body_seen = 0;
            }
            continue;
        }
        const std::size_t k = std::min(n, body_left);
        // The first eight bytes of an encrypted TLS 1.2 record are its explicit nonce.
        for (std::size_t i = 0; i < k && body_seen + i < last_nonce.size() && encrypting; ++i)
            last_nonce[body_seen + i] = p[i];
        if (encrypting && body_seen < last_nonce.size() && body_seen + k >= last_nonce.size())
            have_nonce = true;
        body_seen += k;
        body_left -= k;
        p += k;
        n -= k;
        if (body_left == 0) {
            if (header[0] == SSL3_RT_CHANGE_CIPHER_SPEC) encrypting = true;
            header_have = 0;
        }
    }
}

void ktls_follow(Core& c) {
    c.ktls_track = std::make_unique<KtlsTrack>();
    SSL_set_msg_callback_arg(c.ssl, c.ktls_track.get());
    SSL_set_msg_callback(c.ssl, on_message);
}

void ktls_sent(Core& c, const char* p, std::size_t n) noexcept {
    if (c.ktls_track && c.ktls_track->following)
        c.ktls_track->sent(reinterpret_cast<const unsigned char*>(p), n);
}

void ktls_unfollow(Core& c) {
    SSL_set_msg_callback(c.ssl, nullptr);
    c.ktls_track->following = false;
}

void ktls_keylog(SSL_CTX* ctx) {
    SSL_CTX_set_keylog_callback(ctx, on_keylog);
}

std::optional<KtlsKeys> ktls_keys(const Core& c, bool tx, std::string& why) {
    if (!c.ktls_track) {
        why = "kTLS is turned off for this context";
        return std::nullopt;
    }
    const KtlsTrack& t = *c.ktls_track;
    const SSL_CIPHER* cipher = SSL_get_current_cipher(c.ssl);
    KtlsKeys k;
    k.version = SSL_version(c.ssl);
    const int nid = cipher != nullptr ? SSL_CIPHER_get_cipher_nid(cipher) : NID_undef;
    k.key_len = nid == NID_aes_128_gcm ? 16 : nid == NID_aes_256_gcm ? 32 : 0;
    const EVP_MD* md = cipher != nullptr ? SSL_CIPHER_get_handshake_digest(cipher) : nullptr;
    if (k.key_len == 0 || md == nullptr) {
        why = std::string("the cipher suite ") +
              (cipher != nullptr ? SSL_CIPHER_get_name(cipher) : "(none)") + " is not AES-GCM";
        return std::nullopt;
    }
    const bool client_side = tx != c.server; // the client's keys: what it sends
    const std::uint64_t seq = tx ? t.tx_records : t.rx_records;
    big_endian(seq, k.rec_seq);
    if (k.version == TLS1_3_VERSION) {
        const auto& secret = client_side ? t.client_secret : t.server_secret;
        const std::size_t len = client_side ? t.client_secret_len : t.server_secret_len;
        if (t.key_update) {
            why = "a KeyUpdate changed the traffic keys during the handshake";
            return std::nullopt;
        }
        unsigned char iv[12];
        if (len == 0 || !expand_label(md, secret.data(), len, "key", k.key.data(), k.key_len) ||
            !expand_label(md, secret.data(), len, "iv", iv, sizeof iv)) {
            why = "the TLS 1.3 traffic secrets are not known (the context's key-log callback "
                  "was replaced?)";
            return std::nullopt;
        }
        std::memcpy(k.salt.data(), iv, 4);
        std::memcpy(k.iv.data(), iv + 4, 8);
        return k;
    }
    if (k.version != TLS1_2_VERSION) {
        why = std::string("kTLS takes TLS 1.2 and 1.3, not ") + SSL_get_version(c.ssl);
        return std::nullopt;
    }
    // AES-GCM has no MAC keys: client key, server key, client salt, server salt.
    unsigned char block[2 * 32 + 2 * 4];
    if (!key_block(c.ssl, md, block, 2 * k.key_len + 8)) {
        why = "the TLS 1.2 key block could not be derived";
        return std::nullopt;
    }
    std::memcpy(k.key.data(), block + (client_side ? 0 : k.key_len), k.key_len);
    std::memcpy(k.salt.data(), block + 2 * k.key_len + (client_side ? 0 : 4), 4);
    OPENSSL_cleanse(block, sizeof block);
    if (tx) {
        // The kernel goes on from OpenSSL's nonce counter, so no nonce is used twice.
        if (!t.have_nonce) {
            why = "the explicit nonce of the last record sent is not known";
            return std::nullopt;
        }
        k.iv = t.last_nonce;
        for (int i = 7; i >= 0 && ++k.iv[static_cast<std::size_t>(i)] == 0; --i) {
        }
    } else {
        k.iv = k.rec_seq; // (unused: each received record carries its nonce)
    }
    return k;
}

} // namespace galay::tls::detail
