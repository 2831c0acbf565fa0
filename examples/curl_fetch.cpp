// Fetches many URLs at once from one thread: libcurl's multi interface on galay's loop
// (examples/curl/curl_multi.hpp), HTTPS included. Each body is streamed into a SHA-256, not kept.
//   ./curl_fetch [--parallel N] [--timeout SECS] [--cacert FILE] [--insecure] [--backend B] URL...
//   ./curl_fetch https://example.org/ http://127.0.0.1:8080/a.txt
// One line per URL on stdout, in the order given, once all are done:
//   STATUS BYTES sha256=HEX URL
// A URL that fails (no response, a timeout, a status of 400 or more) is one line on stderr,
//   curl_fetch: URL: WHY
// and the exit code is then 1. Exit 2 for a bad argument.
#include "curl/curl_multi.hpp"
#include "galay_cli_backend.hpp"

#include <openssl/evp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Options {
    int parallel = 50;
    double timeout = 30;
    std::string ca_file;
    bool insecure = false;
    galay::Backend backend = galay::Backend::automatic;
    std::vector<std::string> urls;
};

/// What came of one URL: its line for stdout, or why it failed.
struct Outcome {
    std::string line, failure;
};

std::string hex(const unsigned char* p, unsigned n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < n; ++i) {
        s += digits[p[i] >> 4];
        s += digits[p[i] & 15];
    }
    return s;
}

galay::Task<Outcome> fetch_one(galay_curl::CurlMulti& multi, const Options& o,
                               const std::string& url) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> sha(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr);
    galay_curl::FetchOptions fo;
    fo.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout * 1000));
    fo.ca_file = o.ca_file;
    fo.insecure = o.insecure;
    fo.on_body = [&](std::string_view piece) {
        return EVP_DigestUpdate(sha.get(), piece.data(), piece.size()) == 1;
    };
    auto r = co_await multi.fetch(url, std::move(fo));
    if (!r) co_return Outcome{{}, r.error().message};
    if (r->status >= 400) co_return Outcome{{}, "HTTP status " + std::to_string(r->status)};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(sha.get(), md, &len);
    co_return Outcome{std::to_string(r->status) + " " + std::to_string(r->body_bytes) +
                          " sha256=" + hex(md, len) + " " + url,
                      {}};
}

/// One of --parallel workers: takes the next URL until none is left.
galay::Task<void> worker(galay_curl::CurlMulti& multi, const Options& o, std::size_t& next,
                         std::vector<Outcome>& out) {
    while (next < o.urls.size()) {
        const std::size_t i = next++;
        out[i] = co_await fetch_one(multi, o, o.urls[i]);
    }
}

galay::Task<int> fetch_all(const Options& o) {
    galay_curl::CurlMulti multi({.cached_connections = 4L * o.parallel});
    std::vector<Outcome> out(o.urls.size());
    std::size_t next = 0;
    std::vector<galay::Task<void>> workers;
    const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(o.parallel), out.size());
    for (std::size_t i = 0; i < n; ++i)
        workers.push_back(worker(multi, o, next, out));
    co_await galay::when_all(std::move(workers));
    int failed = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i].failure.empty()) {
            std::printf("%s\n", out[i].line.c_str());
        } else {
            std::fprintf(stderr, "curl_fetch: %s: %s\n", o.urls[i].c_str(), out[i].failure.c_str());
            ++failed;
        }
    }
    co_return failed == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    cli::App app{
        "usage: curl_fetch [OPTIONS] URL...\nFetches every URL (GET) concurrently from one "
        "thread and prints one line per URL, STATUS BYTES sha256=HEX URL, in the order "
        "given. A failed URL (no response, a timeout, status >= 400) is one line on "
        "stderr; the exit code is then 1.",
        "curl_fetch"};
    app.add_option("URL", o.urls, "the URLs to fetch")->required();
    app.add_option("--parallel", o.parallel, "transfers at once")
        ->check(galay::tools::whole(1, 10000))
        ->capture_default_str();
    app.add_option("--timeout", o.timeout, "seconds each transfer may take")
        ->check(galay::tools::finite_range(0.001, 86400))
        ->capture_default_str();
    app.add_option("--cacert", o.ca_file, "CA certificates (PEM) to verify HTTPS peers with")
        ->check(galay::tools::non_empty());
    app.add_flag("--insecure", o.insecure, "do not verify HTTPS peers");
    galay::tools::add_backend_flag(app, &o.backend);
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "curl_fetch")) return *code;
    galay_curl::CurlGlobal global;
    if (!global.ok()) {
        std::fprintf(stderr, "curl_fetch: curl_global_init failed\n");
        return 1;
    }
    galay::Scheduler sched({.backend = o.backend});
    return sched.block_on(fetch_all(o));
}
