// What the libcurl comparison clients (curl_multi_loop, curl_threads) share: their flags, one
// easy handle set up the same way in both (body bytes counted, not kept; no signals; a
// per-transfer timeout; everything else libcurl's default, connection reuse included), the check
// of a finished transfer (CURLE_OK, status 200, the body size asked for), and the report.
#pragma once

#include "foreign_client.hpp"

#include <curl/curl.h>

#include <cstdint>
#include <memory>
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
inline void add_options(cli::App& app, Options& o, const char* transfers_help) {
    app.add_option("urls", o.urls, "URLs, fetched in turn")->required();
    app.add_option("--transfers", o.transfers, transfers_help)
        ->capture_default_str()
        ->check(cli::Range(1, 10000));
    app.add_option("--requests", o.requests, "measured requests")
        ->capture_default_str()
        ->check(cli::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
    app.add_option("--warmup-requests", o.warmup, "requests before measuring")
        ->capture_default_str()
        ->check(cli::Range(std::uint64_t{0}, std::uint64_t{1} << 40));
    app.add_option("--expect-bytes", o.expect_bytes, "the body size every response must have")
        ->check(cli::Range(0LL, 1LL << 50));
    app.add_option("--timeout", o.timeout, "seconds a transfer may take")
        ->capture_default_str()
        ->check(cli::Range(0.001, 86400.0));
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

/// The transfers of a client on one multi handle (curl_multi_loop, raw_curl): --transfers easy
/// handles, each pointed at the next URL and added again when it finishes (so it keeps its
/// connection in the multi's cache, as libcurl does by default), the finished ones checked and
/// counted into `r`.
class MultiTransfers {
public:
    MultiTransfers(const Options& o, Outcome& r, CURLM* multi)
        : o_(o)
        , r_(r)
        , multi_(multi) {}
    MultiTransfers(const MultiTransfers&) = delete;
    MultiTransfers& operator=(const MultiTransfers&) = delete;

    /// Makes and adds every transfer; false (after one line on stderr) when libcurl cannot.
    bool start_all(const char* tool) {
        for (int i = 0; i < o_.transfers && started_ < o_.total(); ++i) {
            list_.push_back(std::make_unique<Transfer>());
            if (!list_.back()->init(o_.timeout_ms()) || !start(*list_.back())) {
                std::fprintf(stderr, "%s: cannot set up a transfer\n", tool);
                return false;
            }
        }
        r_.from = Mark::now(0);
        return true;
    }

    /// Checks, counts and restarts the finished transfers; false when one cannot be added again.
    bool reap() {
        int queued = 0;
        while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
            if (msg->msg != CURLMSG_DONE) continue;
            Transfer* t = nullptr;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
            const CURLcode rc = msg->data.result; // msg is invalid once the handle is removed
            curl_multi_remove_handle(multi_, t->easy);
            if (const std::string wrong = t->verdict(rc, o_.expect_bytes); !wrong.empty())
                if (r_.errors++ == 0) r_.first_error = wrong;
            r_.connects += static_cast<std::uint64_t>(t->connects());
            if (++completed_ == o_.warmup) r_.from = Mark::now(completed_);
            if (completed_ == o_.total()) r_.to = Mark::now(completed_);
            if (started_ < o_.total() && !start(*t)) return false;
        }
        return true;
    }

    bool done() const { return completed_ >= o_.total(); }
    /// The easy handles go before the multi handle that cached their connections.
    void clear() { list_.clear(); }

private:
    bool start(Transfer& t) {
        t.aim(o_.urls[started_++ % o_.urls.size()]);
        return curl_multi_add_handle(multi_, t.easy) == CURLM_OK;
    }
    const Options& o_;
    Outcome& r_;
    CURLM* multi_;
    std::vector<std::unique_ptr<Transfer>> list_;
    std::uint64_t started_ = 0, completed_ = 0;
};

/// A multi-handle client's main(): flags, curl_global_init, `run`, the report.
inline int multi_main(int argc, char** argv, const char* tool, const char* about,
                      bool (*run)(const Options&, Outcome&)) {
    Options o;
    cli::App app{about};
    add_options(app, o, "transfers at once");
    if (auto code = parse(app, argc, argv, tool)) return *code;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        std::fprintf(stderr, "%s: curl_global_init failed\n", tool);
        return 1;
    }
    Outcome r;
    const bool ok = run(o, r);
    curl_global_cleanup();
    return ok ? report(tool, o, r) : 1;
}

} // namespace foreign::curl
