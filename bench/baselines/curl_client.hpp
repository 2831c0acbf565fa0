// What the libcurl comparison clients (curl_multi_loop, curl_threads) share: their flags, one
// easy handle set up the same way in both (body bytes counted, not kept; no signals; a
// per-transfer timeout; everything else libcurl's default, connection reuse included), the check
// of a finished transfer (CURLE_OK, status 200, the body size asked for), and the report.
#pragma once

#include "foreign_client.hpp"

#include <curl/curl.h>

#include <cstdint>
#include <string>
#include <vector>

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

struct Options {
    std::vector<std::string> urls;
    int transfers = 50;
    std::uint64_t requests = 10000, warmup = 1000;
    long long expect_bytes = -1; ///< < 0: any size
    double timeout = 30;
    bool json = false;
    std::uint64_t total() const { return warmup + requests; }
    long timeout_ms() const { return static_cast<long>(timeout * 1000); }
};

/// The flags; `transfers_help` says what a transfer is in this client.
inline void add_options(CLI::App& app, Options& o, const char* transfers_help) {
    app.add_option("urls", o.urls, "URLs, fetched in turn")->required();
    app.add_option("--transfers", o.transfers, transfers_help)
        ->capture_default_str()
        ->check(CLI::Range(1, 10000));
    app.add_option("--requests", o.requests, "measured requests")
        ->capture_default_str()
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
    app.add_option("--warmup-requests", o.warmup, "requests before measuring")
        ->capture_default_str()
        ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 40));
    app.add_option("--expect-bytes", o.expect_bytes, "the body size every response must have")
        ->check(CLI::Range(0LL, 1LL << 50));
    app.add_option("--timeout", o.timeout, "seconds a transfer may take")
        ->capture_default_str()
        ->check(CLI::Range(0.001, 86400.0));
    app.add_flag("--json", o.json, "print one JSON object");
}

/// How a run went: the measured window, connections libcurl opened, errors.
struct Outcome {
    Mark from, to;
    std::uint64_t connects = 0, errors = 0;
    std::string first_error;
};

/// Prints the report (JSON with --json, else one line) and returns the exit code: 0 without
/// errors, else 1.
inline int report(const char* tool, const Options& o, const Outcome& r) {
    nlohmann::json j{{"implementation", tool},
                     {"transfers", o.transfers},
                     {"urls", o.urls.size()},
                     {"warmup_requests", o.warmup}};
    put_window(j, "requests", r.from, r.to);
    j["total_requests"] = o.total();
    j["connections_opened"] = r.connects;
    j["errors"] = r.errors;
    j["first_error"] = r.first_error;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s: %llu requests in %.2f s: %.0f requests/s, client CPU %.2f us/request, "
                  "%llu errors (%d transfers at once, %llu connections opened)",
                  tool, static_cast<unsigned long long>(o.requests), r.to.wall - r.from.wall,
                  j["requests_per_s"].get<double>(), j["client_cpu_us_per_request"].get<double>(),
                  static_cast<unsigned long long>(r.errors), o.transfers,
                  static_cast<unsigned long long>(r.connects));
    std::string human = line;
    if (!r.first_error.empty()) human += "; first error: " + r.first_error;
    print(j, o.json, human);
    return r.errors == 0 ? 0 : 1;
}

} // namespace foreign::curl
