// curl_multi_loop: libcurl's multi interface on its own loop, with no galay code: the floor the
// HTTP-client comparison measures an event loop driving curl against. One thread; --transfers
// easy handles in one multi handle; curl_multi_perform, then curl_multi_info_read for the
// finished transfers (each checked, removed, pointed at the next URL and added again, so it
// keeps its connection in the multi's cache as libcurl does by default), then curl_multi_poll.
//
//   curl_multi_loop URL... [--transfers 50] [--requests 10000] [--warmup-requests 1000]
//                   [--expect-bytes N] [--timeout 30] [--json]
//
// GETs go to the URLs in turn. A transfer is an error when libcurl fails it (the timeout
// included), when the status is not 200, or when --expect-bytes is given and the body has
// another size. Measured: the --requests after the first --warmup-requests, their wall time and
// this process's CPU (getrusage). Exit 0 with no error, 1 with errors, 2 on bad flags.
#include "curl_transfer.hpp"
#include "foreign_client.hpp"

#include <memory>
#include <vector>

namespace {

constexpr const char* kTool = "curl_multi_loop";

struct Options {
    std::vector<std::string> urls;
    int transfers = 50;
    std::uint64_t requests = 10000, warmup = 1000;
    long long expect_bytes = -1;
    double timeout = 30;
    bool json = false;
};

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"curl_multi_loop: GETs over libcurl's multi interface on curl_multi_poll "
                 "(the floor of the HTTP-client comparison)"};
    app.add_option("urls", o.urls, "URLs, fetched in turn")->required();
    app.add_option("--transfers", o.transfers, "transfers at once")
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

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        std::fprintf(stderr, "%s: curl_global_init failed\n", kTool);
        return 1;
    }
    CURLM* multi = curl_multi_init();
    const std::uint64_t total = o.warmup + o.requests;
    const std::size_t n = static_cast<std::size_t>(
        std::min<std::uint64_t>(static_cast<std::uint64_t>(o.transfers), total));
    std::vector<std::unique_ptr<foreign::curl::Transfer>> transfers;
    std::uint64_t started = 0, completed = 0, errors = 0, connects = 0;
    std::string first_error;
    auto start = [&](foreign::curl::Transfer& t) {
        t.aim(o.urls[started++ % o.urls.size()]);
        return curl_multi_add_handle(multi, t.easy) == CURLM_OK;
    };
    for (std::size_t i = 0; i < n; ++i) {
        transfers.push_back(std::make_unique<foreign::curl::Transfer>());
        if (multi == nullptr || !transfers.back()->init(static_cast<long>(o.timeout * 1000)) ||
            !start(*transfers.back())) {
            std::fprintf(stderr, "%s: cannot set up a transfer\n", kTool);
            return 1;
        }
    }
    foreign::Mark from = foreign::Mark::now(0), to;
    while (completed < total) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(multi, &running);
        int queued = 0;
        while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
            if (msg->msg != CURLMSG_DONE) continue;
            foreign::curl::Transfer* t = nullptr;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
            const CURLcode rc = msg->data.result; // msg is invalid once the handle is removed
            curl_multi_remove_handle(multi, t->easy);
            if (const std::string wrong = t->verdict(rc, o.expect_bytes); !wrong.empty())
                if (errors++ == 0) first_error = wrong;
            connects += static_cast<std::uint64_t>(t->connects());
            if (++completed == o.warmup) from = foreign::Mark::now(completed);
            if (completed == total) to = foreign::Mark::now(completed);
            if (started < total && !start(*t)) {
                std::fprintf(stderr, "%s: curl_multi_add_handle failed\n", kTool);
                return 1;
            }
        }
        if (completed < total && mc == CURLM_OK)
            mc = curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
        if (mc != CURLM_OK) {
            std::fprintf(stderr, "%s: %s\n", kTool, curl_multi_strerror(mc));
            return 1;
        }
    }
    transfers.clear(); // easy handles before the multi handle that cached their connections
    curl_multi_cleanup(multi);
    curl_global_cleanup();

    nlohmann::json j{{"implementation", kTool},
                     {"transfers", o.transfers},
                     {"urls", o.urls.size()},
                     {"warmup_requests", o.warmup}};
    foreign::put_window(j, "requests", from, to);
    j["total_requests"] = total;
    j["connections_opened"] = connects;
    j["errors"] = errors;
    j["first_error"] = first_error;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s: %llu requests in %.2f s: %.0f requests/s, client CPU %.2f us/request, %llu "
                  "errors (%d transfers at once, %llu connections opened)",
                  kTool, static_cast<unsigned long long>(o.requests), to.wall - from.wall,
                  j["requests_per_s"].get<double>(), j["client_cpu_us_per_request"].get<double>(),
                  static_cast<unsigned long long>(errors), o.transfers,
                  static_cast<unsigned long long>(connects));
    std::string human = line;
    if (!first_error.empty()) human += "; first error: " + first_error;
    foreign::print(j, o.json, human);
    return errors == 0 ? 0 : 1;
}
