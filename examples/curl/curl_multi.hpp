// examples/curl/curl_multi.hpp: HTTP(S) through libcurl's multi interface on galay's loop, many
// transfers from one thread with no thread per call: `co_await multi.fetch(url)`.
//
//     galay_curl::CurlMulti multi;                      // one per scheduler thread
//     auto r = co_await multi.fetch("https://example.org/", {.timeout = 5s});
//     if (!r) std::printf("%s\n", r.error().message.c_str());      // "Could not resolve host: ..."
//     else std::printf("%ld, %zu bytes\n", r->status, r->body.size());
//
// libcurl does the HTTP; galay only says when its sockets are ready and when its timer is due.
// libcurl's socket callback gives each socket a record (a borrowing galay::AsyncFd and what
// libcurl wants: in, out or both) and resets the AsyncFd on CURL_POLL_REMOVE, before libcurl
// closes the socket; two small tasks per descriptor number wait for readability and
// writability and call curl_multi_socket_action. Its timer callback moves one deadline that a
// task sleeps towards.
// Callbacks only update records and wake tasks: libcurl is never called from inside libcurl.
//
// A transfer ends with its response, or with an error saying why (libcurl's message, "HTTP
// status" is not an error: a 404 is a response). Its timeout is libcurl's (CURLOPT_TIMEOUT_MS).
// Cancelling the task that awaits fetch() (galay::CancelToken with `with_cancel`, `when_any`,
// galay::timeout) takes the transfer out of the multi handle at once: its connection is closed
// or kept for reuse as libcurl decides, and the other transfers go on.
//
// A CurlMulti is used on the thread of the scheduler that made it; every fetch() must have ended
// before it is destroyed. curl_global_init must have run before (CurlGlobal below does it).
#pragma once

#include <galay/galay.hpp>

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace galay_curl {

/// curl_global_init for the lifetime of the object (one, in main, before any thread).
class CurlGlobal {
public:
    CurlGlobal() { ok_ = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }
    ~CurlGlobal() {
        if (ok_) curl_global_cleanup();
    }
    CurlGlobal(const CurlGlobal&) = delete;
    CurlGlobal& operator=(const CurlGlobal&) = delete;
    bool ok() const noexcept { return ok_; }

private:
    bool ok_ = false;
};

/// How one transfer is made. Everything not here is libcurl's default (connection reuse too).
struct FetchOptions {
    /// The whole transfer, connection included; 0: none.
    std::chrono::milliseconds timeout{30000};
    /// Extra request headers, "Name: value".
    std::vector<std::string> headers;
    /// Follow 3xx redirects (at most 10).
    bool follow_redirects = false;
    /// A CA bundle (PEM) to verify the server with instead of the system's; "": the system's.
    std::string ca_file;
    /// Do not verify the server's certificate (tests against a self-signed one only).
    bool insecure = false;
    /// Keep the response's header fields (Response::headers); false saves their copies.
    bool keep_headers = true;
    /// Streaming: called with each piece of the body as it arrives, instead of keeping it in
    /// Response::body; returning false aborts the transfer (an error, "body refused").
    std::function<bool(std::string_view)> on_body;
};

/// A finished transfer: what the server answered (any status; 404 is a response, not an error).
struct Response {
    long status = 0;
    /// The final response's header fields in order, names as sent (unless
    /// FetchOptions::keep_headers is false).
    std::vector<std::pair<std::string, std::string>> headers;
    /// The body, unless FetchOptions::on_body took it.
    std::string body;
    /// Body bytes received (kept or streamed).
    std::uint64_t body_bytes = 0;
    /// The URL it ended at (after redirects).
    std::string url;

    /// The first header named `name` (case-insensitive), or "" when there is none.
    std::string_view header(std::string_view name) const;
};

/// Why a transfer has no response.
struct FetchError {
    /// libcurl's code (CURLE_OPERATION_TIMEDOUT, CURLE_COULDNT_RESOLVE_HOST ...);
    /// CURLE_ABORTED_BY_CALLBACK when the transfer was cancelled.
    CURLcode code = CURLE_OK;
    /// One line: libcurl's own message with its detail ("Could not resolve host: x.invalid"),
    /// or "cancelled".
    std::string message;
    bool cancelled() const noexcept { return code == CURLE_ABORTED_BY_CALLBACK; }
};

using FetchResult = std::expected<Response, FetchError>;

namespace detail {
struct Core; // the multi handle, its socket records and timer (curl_multi.cpp)
} // namespace detail

/// The multi handle's limits; 0 leaves libcurl's default.
struct MultiLimits {
    /// Idle connections kept for reuse. libcurl's default is 4 x the transfers added at the
    /// moment a transfer ends, which a burst of finished transfers shrinks (fetch() adds
    /// the next one a loop turn later): set it for steady reuse.
    long cached_connections = 0;
    /// Connections to one host at once (more transfers wait for one).
    long host_connections = 0;
};

/// libcurl's multi handle driven by the current thread's galay scheduler (see the top).
class CurlMulti {
public:
    /// A multi handle on the current scheduler. Throws std::runtime_error when libcurl cannot
    /// make one.
    explicit CurlMulti(MultiLimits limits = {});
    ~CurlMulti();
    CurlMulti(const CurlMulti&) = delete;
    CurlMulti& operator=(const CurlMulti&) = delete;

    /// GET `url`. Ends with the response, or with why there is none; cancellable.
    galay::Task<FetchResult> fetch(std::string url, FetchOptions options = {});

    /// Transfers in flight now.
    std::size_t in_flight() const noexcept;
    /// Connections libcurl has opened so far (0 for a transfer that reused one).
    std::uint64_t connections_opened() const noexcept;

private:
    std::shared_ptr<detail::Core> core_;
};

} // namespace galay_curl
