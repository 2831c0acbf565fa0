// Certificates for the TLS tests, made at run time with OpenSSL's C API (no private key is ever
// in the repository): an ECDSA P-256 CA, a server certificate for "localhost" and 127.0.0.1
// signed by it, an expired one signed by it, and a self-signed one. Each is written as PEM files
// into a temp dir and also kept as PEM text.
#pragma once

#include "support/files.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <stdexcept>
#include <string>

namespace galay::test {

struct CertFiles {
    std::string cert, key;         // paths
    std::string cert_pem, key_pem; // the same as text
};

class TestPki {
public:
    TestPki() {
        EVP_PKEY* ca_key = new_key();
        X509* ca = new_cert(ca_key, nullptr, nullptr, "galay test CA", "", true, 0, 30);
        ca_ = write("ca", ca, ca_key);
        server_ = issue("server", ca, ca_key, "localhost", "DNS:localhost,IP:127.0.0.1", 0, 30);
        expired_ = issue("expired", ca, ca_key, "localhost", "DNS:localhost,IP:127.0.0.1", -30, -1);
        EVP_PKEY* self_key = new_key();
        X509* self = new_cert(self_key, nullptr, nullptr, "localhost", "DNS:localhost,IP:127.0.0.1",
                              false, 0, 30);
        self_signed_ = write("self", self, self_key);
        X509_free(self);
        EVP_PKEY_free(self_key);
        X509_free(ca);
        EVP_PKEY_free(ca_key);
    }

    const CertFiles& ca() const { return ca_; }
    const CertFiles& server() const { return server_; }
    const CertFiles& expired() const { return expired_; }
    const CertFiles& self_signed() const { return self_signed_; }
    const std::filesystem::path& dir() const { return dir_.path(); }

private:
    static EVP_PKEY* new_key() {
        EVP_PKEY* k = EVP_EC_gen("P-256");
        if (k == nullptr) throw std::runtime_error("EVP_EC_gen failed");
        return k;
    }

    static void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
        if (ext == nullptr) throw std::runtime_error("X509V3_EXT_conf_nid " + value);
        X509_add_ext(cert, ext, -1);
        X509_EXTENSION_free(ext);
    }

    /// A certificate for `key`, signed by `issuer_key` (self-signed when null), valid from
    /// `from_days` to `to_days` relative to now.
    static X509* new_cert(EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, const std::string& cn,
                          const std::string& san, bool is_ca, long from_days, long to_days) {
        static long serial = 1;
        X509* c = X509_new();
        X509_set_version(c, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(c), ++serial);
        X509_gmtime_adj(X509_getm_notBefore(c), from_days * 86400 - 60);
        X509_gmtime_adj(X509_getm_notAfter(c), to_days * 86400);
        X509_set_pubkey(c, key);
        X509_NAME* name = X509_get_subject_name(c);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
        X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name);
        X509* iss = issuer ? issuer : c;
        add_ext(c, iss, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "CA:FALSE");
        add_ext(c, iss, NID_subject_key_identifier, "hash");
        if (is_ca) add_ext(c, iss, NID_key_usage, "critical,keyCertSign,cRLSign");
        if (!san.empty()) add_ext(c, iss, NID_subject_alt_name, san);
        if (X509_sign(c, issuer_key ? issuer_key : key, EVP_sha256()) == 0)
            throw std::runtime_error("X509_sign failed");
        return c;
    }

    CertFiles issue(const std::string& name, X509* ca, EVP_PKEY* ca_key, const std::string& cn,
                    const std::string& san, long from_days, long to_days) {
        EVP_PKEY* key = new_key();
        X509* cert = new_cert(key, ca, ca_key, cn, san, false, from_days, to_days);
        CertFiles f = write(name, cert, key);
        X509_free(cert);
        EVP_PKEY_free(key);
        return f;
    }

    CertFiles write(const std::string& name, X509* cert, EVP_PKEY* key) {
        CertFiles f;
        BIO* b = BIO_new(BIO_s_mem());
        PEM_write_bio_X509(b, cert);
        f.cert_pem = drain(b);
        PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
        f.key_pem = drain(b);
        BIO_free(b);
        f.cert = (dir_ / (name + ".crt")).string();
        f.key = (dir_ / (name + ".key")).string();
        std::ofstream(f.cert) << f.cert_pem;
        std::ofstream(f.key) << f.key_pem;
        return f;
    }

    static std::string drain(BIO* b) {
        char* p = nullptr;
        const long n = BIO_get_mem_data(b, &p);
        std::string s(p, static_cast<std::size_t>(n));
        (void)BIO_reset(b);
        return s;
    }

    TempDir dir_;
    CertFiles ca_, server_, expired_, self_signed_;
};

} // namespace galay::test
