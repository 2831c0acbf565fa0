// galay/metrics_endpoint.hpp: the Prometheus scrape endpoint, GET /metrics over HTTP/1.1, one
// answer per connection, with the whole request head bounded in time and size; GET /tasks on the
// same port answers a task dump (galay/task_dump.hpp): text, or JSON with `?format=json`.
//
//     galay::Runtime rt;
//     auto listening = galay::serve(rt, galay::SocketAddr::loopback_v4(9100),
//         [&rt](galay::TcpStream c) { return galay::metrics::serve_scrape(std::move(c), rt); });
//
// A scraper gets `galay::metrics::prometheus_text(rt)` (200); GET /tasks `task_dump(rt).text()`
// and GET /tasks?format=json `.json()` (200, taken on the blocking pool, so the worker serving
// the scrape answers too); any other target 404, a malformed
// request line 400, a head over `max_head` bytes 431. A client that has not sent its whole head
// within `head_timeout` of connecting is closed, however it spaces its bytes (each receive has no
// timeout of its own that a byte now and then would renew). The reading is the pure function
// parse_scrape_request (what the fuzzer calls).
#pragma once

#include "galay/net/tcp.hpp"
#include "galay/task.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace galay {

class Runtime;

namespace metrics {

/// The bounds of one scrape.
struct ScrapeOptions {
    /// From the connection's start to its request head's last byte; then the connection closes.
    std::chrono::milliseconds head_timeout{10'000};
    /// To send the whole answer.
    std::chrono::milliseconds send_timeout{10'000};
    /// The request head's largest size (request line, header fields, blank line).
    std::size_t max_head = 16 * 1024;
};

/// What the bytes received so far on a scrape connection ask for.
enum class ScrapeRequest : std::uint8_t {
    incomplete, ///< the head has not ended yet (and is within max_head)
    metrics,    ///< GET /metrics (with a query or not)
    tasks,      ///< GET /tasks: a task dump as text
    tasks_json, ///< GET /tasks?format=json
    not_found,  ///< a well-formed request for anything else
    bad,        ///< a malformed request line
    too_large,  ///< no end of the head within max_head bytes
};

/// What a GET of `target` asks for: `metrics` (/metrics, with a query or not), `tasks`,
/// `tasks_json` (/tasks with `format=json` among its query's parameters, whole) or `not_found`.
/// The scrape endpoint routes by it, and so can an HTTP server that serves the same pages.
ScrapeRequest scrape_target(std::string_view target) noexcept;

/// Reads the request at the start of `received` (bytes are never trusted: any content, any
/// length). Pure: no state, no allocation.
ScrapeRequest parse_scrape_request(std::string_view received, std::size_t max_head) noexcept;

/// Serve one scrape on `conn` (the handler for galay::serve): read its head (bounded by
/// `options`), answer, close.
[[nodiscard]] Task<void> serve_scrape(TcpStream conn, const Runtime& rt,
                                      ScrapeOptions options = {});

} // namespace metrics
} // namespace galay
