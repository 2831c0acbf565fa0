// What the libcurl comparison clients (curl_multi_loop, curl_threads) share: one easy handle set
// up the same way in both (body bytes counted, not kept; no signals; a per-transfer timeout;
// everything else libcurl's default, connection reuse included), and the check of a finished
// transfer: CURLE_OK, status 200, and the body size asked for.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <string>

namespace foreign::curl {

struct Transfer {
    CURL* easy = nullptr;
    std::uint64_t bytes = 0; ///< body bytes of the current transfer
    char error[CURL_ERROR_SIZE] = {};
    std::string url;

    Transfer() = default;
    Transfer(const Transfer&) = delete;
    Transfer& operator=(const Transfer&) = delete;
    ~Transfer() {
        if (easy != nullptr) curl_easy_cleanup(easy);
    }

    /// Creates the handle; false when libcurl cannot.
    bool init(long timeout_ms) {
        easy = curl_easy_init();
        if (easy == nullptr) return false;
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Transfer::on_body);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, this);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, this);
        curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
        return true;
    }

    /// Points the handle at `u` for its next transfer.
    void aim(const std::string& u) {
        url = u;
        bytes = 0;
        error[0] = '\0';
        curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    }

    /// "" when the transfer that ended with `rc` is what was asked for, else what is wrong.
    /// `expect_bytes` < 0: any body size.
    std::string verdict(CURLcode rc, long long expect_bytes) const {
        if (rc != CURLE_OK) return url + ": " + (error[0] != '\0' ? error : curl_easy_strerror(rc));
        long status = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (status != 200) return url + ": HTTP status " + std::to_string(status);
        if (expect_bytes >= 0 && bytes != static_cast<std::uint64_t>(expect_bytes))
            return url + ": a body of " + std::to_string(bytes) + " bytes, expected " +
                   std::to_string(expect_bytes);
        return "";
    }

    /// The connections libcurl opened for the transfer that just ended (0 when it reused one).
    long connects() const {
        long n = 0;
        curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &n);
        return n;
    }

private:
    static std::size_t on_body(char*, std::size_t size, std::size_t n, void* self) {
        static_cast<Transfer*>(self)->bytes += size * n;
        return size * n;
    }
};

} // namespace foreign::curl
