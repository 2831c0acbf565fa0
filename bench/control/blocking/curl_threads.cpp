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
#include "curl_client.hpp"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr const char* kTool = "curl_threads";

struct Shared {
    std::atomic<std::uint64_t> issued{0}, completed{0};
    std::mutex mu;
    foreign::curl::Outcome r;
    bool setup_failed = false;
};

void worker(const foreign::curl::Options& o, Shared& s) {
    foreign::curl::Transfer t;
    if (!t.init(o.timeout_ms())) {
        std::lock_guard lock(s.mu);
        s.setup_failed = true;
        return;
    }
    const std::uint64_t total = o.total();
    std::uint64_t connects = 0;
    for (std::uint64_t i; (i = s.issued.fetch_add(1, std::memory_order_relaxed)) < total;) {
        t.aim(o.urls[i % o.urls.size()]);
        const CURLcode rc = curl_easy_perform(t.easy);
        const std::string wrong = t.verdict(rc, o.expect_bytes);
        connects += static_cast<std::uint64_t>(t.connects());
        const std::uint64_t done = s.completed.fetch_add(1, std::memory_order_acq_rel) + 1;
        if (!wrong.empty() || done == o.warmup || done == total) {
            std::lock_guard lock(s.mu);
            if (!wrong.empty() && s.r.errors++ == 0) s.r.first_error = wrong;
            if (done == o.warmup) s.r.from = foreign::Mark::now(done);
            if (done == total) s.r.to = foreign::Mark::now(done);
        }
    }
    std::lock_guard lock(s.mu);
    s.r.connects += connects;
}

} // namespace

int main(int argc, char** argv) {
    foreign::curl::Options o;
    cli::App app{"curl_threads: GETs from threads each running curl_easy_perform in a loop "
                 "(a control of the HTTP-client comparison)"};
    foreign::curl::add_options(app, o, "threads, one transfer at a time each");
    if (auto code = foreign::parse(app, argc, argv, kTool)) return *code;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) { // before any thread
        std::fprintf(stderr, "%s: curl_global_init failed\n", kTool);
        return 1;
    }
    Shared s;
    s.r.from = foreign::Mark::now(0);
    std::vector<std::thread> threads;
    for (int i = 0; i < o.transfers; ++i)
        threads.emplace_back(worker, std::cref(o), std::ref(s));
    for (std::thread& t : threads)
        t.join();
    curl_global_cleanup();
    if (s.setup_failed) {
        std::fprintf(stderr, "%s: cannot set up a transfer\n", kTool);
        return 1;
    }
    return foreign::curl::report(kTool, o, s.r);
}
