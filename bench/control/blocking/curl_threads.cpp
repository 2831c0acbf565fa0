// curl_threads: HTTP calls the way a program without an event loop makes them: --transfers
// threads, each with its own easy handle (which keeps its connection between transfers) running
// curl_easy_perform in a loop until the requests are done.
//
//   curl_threads URL... [--transfers 50] [--requests 10000] [--warmup-requests 1000]
//                [--expect-bytes N] [--timeout 30] [--json]
//
// The same flags, checks and JSON fields as curl_multi_loop (bench/baselines/curl_multi_poll.cpp):
// GETs to the URLs in turn; an error is a failed transfer, a status other than 200, or a body of
// another size than --expect-bytes. Measured from the completion of the --warmup-requests'th
// request to that of the last: wall time and this process's CPU (getrusage, all threads). Exit
// 0 with no error, 1 with errors, 2 on bad flags.
#include "curl_transfer.hpp"
#include "foreign_client.hpp"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr const char* kTool = "curl_threads";

struct Options {
    std::vector<std::string> urls;
    int transfers = 50;
    std::uint64_t requests = 10000, warmup = 1000;
    long long expect_bytes = -1;
    double timeout = 30;
    bool json = false;
};

struct Shared {
    std::atomic<std::uint64_t> issued{0}, completed{0};
    std::mutex mu;
    foreign::Mark from, to;
    std::uint64_t errors = 0, connects = 0;
    std::string first_error;
    bool setup_failed = false;
};

void worker(const Options& o, std::uint64_t total, Shared& s) {
    foreign::curl::Transfer t;
    if (!t.init(static_cast<long>(o.timeout * 1000))) {
        std::lock_guard lock(s.mu);
        s.setup_failed = true;
        return;
    }
    std::uint64_t connects = 0;
    for (std::uint64_t i; (i = s.issued.fetch_add(1, std::memory_order_relaxed)) < total;) {
        t.aim(o.urls[i % o.urls.size()]);
        const CURLcode rc = curl_easy_perform(t.easy);
        const std::string wrong = t.verdict(rc, o.expect_bytes);
        connects += static_cast<std::uint64_t>(t.connects());
        const std::uint64_t done = s.completed.fetch_add(1, std::memory_order_acq_rel) + 1;
        if (!wrong.empty() || done == o.warmup || done == total) {
            std::lock_guard lock(s.mu);
            if (!wrong.empty() && s.errors++ == 0) s.first_error = wrong;
            if (done == o.warmup) s.from = foreign::Mark::now(done);
            if (done == total) s.to = foreign::Mark::now(done);
        }
    }
    std::lock_guard lock(s.mu);
    s.connects += connects;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"curl_threads: GETs from threads each running curl_easy_perform in a loop "
                 "(a control of the HTTP-client comparison)"};
    app.add_option("urls", o.urls, "URLs, fetched in turn")->required();
    app.add_option("--transfers", o.transfers, "threads, one transfer at a time each")
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
    if (auto code = foreign::parse(app, argc, argv, kTool)) return *code;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) { // before any thread
        std::fprintf(stderr, "%s: curl_global_init failed\n", kTool);
        return 1;
    }
    const std::uint64_t total = o.warmup + o.requests;
    Shared s;
    s.from = foreign::Mark::now(0);
    std::vector<std::thread> threads;
    for (int i = 0; i < o.transfers; ++i)
        threads.emplace_back(worker, std::cref(o), total, std::ref(s));
    for (std::thread& t : threads)
        t.join();
    curl_global_cleanup();
    if (s.setup_failed) {
        std::fprintf(stderr, "%s: cannot set up a transfer\n", kTool);
        return 1;
    }

    nlohmann::json j{{"implementation", kTool},
                     {"transfers", o.transfers},
                     {"urls", o.urls.size()},
                     {"warmup_requests", o.warmup}};
    foreign::put_window(j, "requests", s.from, s.to);
    j["total_requests"] = total;
    j["connections_opened"] = s.connects;
    j["errors"] = s.errors;
    j["first_error"] = s.first_error;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s: %llu requests in %.2f s: %.0f requests/s, client CPU %.2f us/request, %llu "
                  "errors (%d threads, %llu connections opened)",
                  kTool, static_cast<unsigned long long>(o.requests), s.to.wall - s.from.wall,
                  j["requests_per_s"].get<double>(), j["client_cpu_us_per_request"].get<double>(),
                  static_cast<unsigned long long>(s.errors), o.transfers,
                  static_cast<unsigned long long>(s.connects));
    std::string human = line;
    if (!s.first_error.empty()) human += "; first error: " + s.first_error;
    foreign::print(j, o.json, human);
    return s.errors == 0 ? 0 : 1;
}
