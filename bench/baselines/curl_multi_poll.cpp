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

namespace {

constexpr const char* kTool = "curl_multi_loop";

/// Runs the transfers; false (after one line on stderr) when libcurl fails outside a transfer.
bool run(const foreign::curl::Options& o, foreign::curl::Outcome& r) {
    CURLM* multi = curl_multi_init();
    if (multi == nullptr) {
        std::fprintf(stderr, "%s: curl_multi_init failed\n", kTool);
        return false;
    }
    foreign::curl::MultiTransfers transfers(o, r, multi);
    bool ok = transfers.start_all(kTool);
    while (ok && !transfers.done()) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (!transfers.reap()) mc = CURLM_INTERNAL_ERROR;
        if (!transfers.done() && mc == CURLM_OK)
            mc = curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
        if (mc != CURLM_OK) {
            std::fprintf(stderr, "%s: %s\n", kTool, curl_multi_strerror(mc));
            ok = false;
        }
    }
    transfers.clear();
    curl_multi_cleanup(multi);
    return ok;
}

} // namespace

int main(int argc, char** argv) {
    return foreign::curl::multi_main(
        argc, argv, kTool,
        "curl_multi_loop: GETs over libcurl's multi interface on curl_multi_poll (the floor of "
        "the HTTP-client comparison)",
        &run);
}
