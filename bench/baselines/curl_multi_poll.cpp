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
#include "curl_client.hpp"

#include <memory>
#include <vector>

namespace {

constexpr const char* kTool = "curl_multi_loop";

/// Runs the transfers; false (after one line on stderr) when libcurl fails outside a transfer.
bool run(const foreign::curl::Options& o, foreign::curl::Outcome& r) {
    CURLM* multi = curl_multi_init();
    if (multi == nullptr) {
        std::fprintf(stderr, "%s: curl_multi_init failed\n", kTool);
        return false;
    }
    const std::uint64_t total = o.total();
    std::vector<std::unique_ptr<foreign::curl::Transfer>> transfers;
    std::uint64_t started = 0, completed = 0;
    auto start = [&](foreign::curl::Transfer& t) {
        t.aim(o.urls[started++ % o.urls.size()]);
        return curl_multi_add_handle(multi, t.easy) == CURLM_OK;
    };
    bool ok = true;
    for (int i = 0; ok && i < o.transfers && started < total; ++i) {
        transfers.push_back(std::make_unique<foreign::curl::Transfer>());
        ok = transfers.back()->init(o.timeout_ms()) && start(*transfers.back());
        if (!ok) std::fprintf(stderr, "%s: cannot set up a transfer\n", kTool);
    }
    r.from = foreign::Mark::now(0);
    while (ok && completed < total) {
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
                if (r.errors++ == 0) r.first_error = wrong;
            r.connects += static_cast<std::uint64_t>(t->connects());
            if (++completed == o.warmup) r.from = foreign::Mark::now(completed);
            if (completed == total) r.to = foreign::Mark::now(completed);
            if (started < total && !start(*t)) mc = CURLM_INTERNAL_ERROR;
        }
        if (completed < total && mc == CURLM_OK)
            mc = curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
        if (mc != CURLM_OK) {
            std::fprintf(stderr, "%s: %s\n", kTool, curl_multi_strerror(mc));
            ok = false;
        }
    }
    transfers.clear(); // the easy handles before the multi handle that cached their connections
    curl_multi_cleanup(multi);
    return ok;
}

} // namespace

int main(int argc, char** argv) {
    foreign::curl::Options o;
    CLI::App app{"curl_multi_loop: GETs over libcurl's multi interface on curl_multi_poll "
                 "(the floor of the HTTP-client comparison)"};
    foreign::curl::add_options(app, o, "transfers at once");
    if (auto code = foreign::parse(app, argc, argv, kTool)) return *code;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        std::fprintf(stderr, "%s: curl_global_init failed\n", kTool);
        return 1;
    }
    foreign::curl::Outcome r;
    const bool ok = run(o, r);
    curl_global_cleanup();
    return ok ? foreign::curl::report(kTool, o, r) : 1;
}
