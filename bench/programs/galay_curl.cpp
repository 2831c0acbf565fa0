// galay_curl: GETs through libcurl's multi interface driven by galay's loop (examples/curl's
// CurlMulti: socket callback on AsyncFd, timer callback on a galay timer), the galay side of the
// HTTP-client comparison whose floor is curl_multi_loop (curl multi on curl_multi_poll) and whose
// control is curl_threads (curl_easy_perform on a thread per transfer). The same command line,
// checks and JSON as those two (bench/baselines/curl_client.hpp), plus --backend:
//
//   galay_curl URL... [--transfers 50] [--requests 10000] [--warmup-requests 1000]
//              [--expect-bytes N] [--timeout 30] [--backend io_uring|epoll|auto] [--json]
//
// One thread: --transfers tasks, each awaiting one fetch() after another (URLs in turn), so that
// --transfers GETs are in flight at once. Body bytes are counted, not kept. A transfer is an
// error when libcurl fails it (the timeout included), when the status is not 200, or when
// --expect-bytes is given and the body has another size. Measured: the --requests after the
// first --warmup-requests, their wall time and this process's CPU. Exit 0 with no error, 1 with
// errors, 2 on bad flags.
#include "curl/curl_multi.hpp"
#include "curl_client.hpp"

#include <string>
#include <vector>

namespace {

constexpr const char* kTool = "galay_curl";

struct Run {
    const foreign::curl::Options& o;
    galay_curl::CurlMulti& multi;
    foreign::curl::Outcome& r;
    std::uint64_t started = 0, completed = 0;

    void count(const std::string& wrong) {
        if (!wrong.empty() && r.errors++ == 0) r.first_error = wrong;
        if (++completed == o.warmup) r.from = foreign::Mark::now(completed);
        if (completed == o.total()) r.to = foreign::Mark::now(completed);
    }

    /// One transfer slot: a GET after another until every request has been started.
    galay::Task<void> transfer() {
        std::uint64_t bytes = 0;
        galay_curl::FetchOptions fo;
        fo.timeout = std::chrono::milliseconds(o.timeout_ms());
        fo.keep_headers = false; // as curl_multi_loop: the body's bytes counted, nothing kept
        fo.on_body = [&bytes](std::string_view piece) {
            bytes += piece.size();
            return true;
        };
        while (started < o.total()) {
            const std::string& url = o.urls[started++ % o.urls.size()];
            bytes = 0;
            auto res = co_await multi.fetch(url, fo);
            if (!res) {
                count(url + ": " + res.error().message);
            } else if (res->status != 200) {
                count(url + ": HTTP status " + std::to_string(res->status));
            } else if (o.expect_bytes >= 0 && bytes != static_cast<std::uint64_t>(o.expect_bytes)) {
                count(url + ": a body of " + std::to_string(bytes) + " bytes, expected " +
                      std::to_string(o.expect_bytes));
            } else {
                count("");
            }
        }
    }
};

galay::Task<void> run(const foreign::curl::Options& o, foreign::curl::Outcome& r) {
    // The connection cache curl_multi_loop's --transfers handles, always added, give libcurl by
    // default (4 each), so that both keep every connection.
    galay_curl::CurlMulti multi({.cached_connections = 4L * o.transfers});
    Run state{o, multi, r};
    r.from = foreign::Mark::now(0);
    std::vector<galay::Task<void>> slots;
    for (int i = 0; i < o.transfers; ++i)
        slots.push_back(state.transfer());
    co_await galay::when_all(std::move(slots));
    r.connects = multi.connections_opened();
}

} // namespace

int main(int argc, char** argv) {
    foreign::curl::Options o;
    std::string backend = "auto";
    cli::App app{"galay_curl: GETs over libcurl's multi interface on galay's loop"};
    foreign::curl::add_options(app, o, "transfers at once");
    app.add_option("--backend", backend, "io_uring, epoll or auto")
        ->capture_default_str()
        ->check(cli::IsMember({"io_uring", "epoll", "auto"}));
    if (auto code = foreign::parse(app, argc, argv, kTool)) return *code;
    galay_curl::CurlGlobal global;
    if (!global.ok()) {
        std::fprintf(stderr, "%s: curl_global_init failed\n", kTool);
        return 1;
    }
    galay::Scheduler sched({.backend = *galay::parse_backend(backend)});
    foreign::curl::Outcome r;
    sched.block_on(run(o, r));
    return foreign::curl::report(kTool, o, r);
}
