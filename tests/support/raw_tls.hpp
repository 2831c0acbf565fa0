// A hand-driven OpenSSL client for the TLS fault tests: its records are produced into memory
// and the test decides how they reach the wire (one byte at a time, half a ClientHello, ...).
#pragma once

#include <galay/galay.hpp>

#include <openssl/ssl.h>

#include <stdexcept>
#include <string>

namespace galay::test {

class RawTlsClient {
public:
    explicit RawTlsClient(const std::string& ca_file) {
        ctx_ = SSL_CTX_new(TLS_client_method());
        if (ctx_ == nullptr || SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr) != 1)
            throw std::runtime_error("raw TLS client: context");
        SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
        ssl_ = SSL_new(ctx_);
        in_ = BIO_new(BIO_s_mem());
        out_ = BIO_new(BIO_s_mem());
        SSL_set_bio(ssl_, in_, out_);
        SSL_set_connect_state(ssl_);
        SSL_set_tlsext_host_name(ssl_, "localhost");
        SSL_set1_host(ssl_, "localhost");
    }
    RawTlsClient(const RawTlsClient&) = delete;
    RawTlsClient& operator=(const RawTlsClient&) = delete;
    ~RawTlsClient() {
        SSL_free(ssl_);
        SSL_CTX_free(ctx_);
    }

    SSL* ssl() const noexcept { return ssl_; }
    /// The ciphertext OpenSSL has produced so far (taken).
    std::string take_output() {
        std::string s(static_cast<std::size_t>(BIO_ctrl_pending(out_)), '\0');
        if (!s.empty()) BIO_read(out_, s.data(), static_cast<int>(s.size()));
        return s;
    }
    void feed(std::span<const char> bytes) {
        BIO_write(in_, bytes.data(), static_cast<int>(bytes.size()));
    }
    /// Plaintext `data` as records, returned as the ciphertext they make.
    std::string encrypt(std::string_view data) {
        if (SSL_write(ssl_, data.data(), static_cast<int>(data.size())) !=
            static_cast<int>(data.size()))
            throw std::runtime_error("raw TLS client: SSL_write");
        return take_output();
    }

    /// The whole handshake over `tcp`: true when it completed.
    Task<bool> handshake(TcpStream& tcp) {
        char buf[16384];
        for (;;) {
            const int r = SSL_do_handshake(ssl_);
            const std::string out = take_output();
            if (!out.empty() && !co_await tcp.send_all(out).timeout(std::chrono::seconds(10)))
                co_return false;
            if (r == 1) co_return true;
            if (SSL_get_error(ssl_, r) != SSL_ERROR_WANT_READ) co_return false;
            auto n = co_await tcp.recv(buf).timeout(std::chrono::seconds(10));
            if (!n || *n == 0) co_return false;
            feed(std::span<const char>(buf, *n));
        }
    }

private:
    SSL_CTX* ctx_ = nullptr;
    SSL* ssl_ = nullptr;
    BIO* in_ = nullptr;
    BIO* out_ = nullptr;
};

} // namespace galay::test
