// galay/metrics_endpoint.hpp: the scrape endpoint's request reader and its one answer (the
// Prometheus text, or a task dump).
#include "galay/metrics_endpoint.hpp"

#include "galay/metrics.hpp"
#include "galay/runtime.hpp"
#include "galay/task_dump.hpp"

#include <algorithm>
#include <array>
#include <string>

namespace galay::metrics {

namespace {

bool is_token_char(char c) noexcept {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '!' || c == '#' || c == '$' || c == '%' || c == '&' ||
           c == '\'' || c == '*' || c == '+' || c == '^' || c == '`' || c == '|' || c == '~';
}

} // namespace

ScrapeRequest parse_scrape_request(std::string_view received, std::size_t max_head) noexcept {
    const std::size_t end = received.find("\r\n\r\n");
    if (end == std::string_view::npos)
        return received.size() >= max_head ? ScrapeRequest::too_large : ScrapeRequest::incomplete;
    if (end + 4 > max_head) return ScrapeRequest::too_large;
    // "METHOD SP target SP HTTP/1.x": anything else is malformed.
    const std::string_view line = received.substr(0, received.find("\r\n"));
    const std::size_t sp1 = line.find(' ');
    if (sp1 == 0 || sp1 == std::string_view::npos) return ScrapeRequest::bad;
    const std::size_t sp2 = line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return ScrapeRequest::bad;
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    for (const char c : method)
        if (!is_token_char(c)) return ScrapeRequest::bad;
    for (const char c : target)
        if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return ScrapeRequest::bad;
    if (version.size() != 8 || !version.starts_with("HTTP/1.") || version[7] < '0' ||
        version[7] > '9')
        return ScrapeRequest::bad;
    if (method != "GET") return ScrapeRequest::not_found;
    return scrape_target(target);
}

ScrapeRequest scrape_target(std::string_view target) noexcept {
    if (target == "/metrics" || target.starts_with("/metrics?")) return ScrapeRequest::metrics;
    if (target == "/tasks") return ScrapeRequest::tasks;
    if (target.starts_with("/tasks?")) {
        // format=json among the query's parameters
        const std::string_view query = target.substr(7);
        for (std::size_t at = 0; at <= query.size();) {
            const std::size_t amp = std::min(query.find('&', at), query.size());
            if (query.substr(at, amp - at) == "format=json") return ScrapeRequest::tasks_json;
            at = amp + 1;
        }
        return ScrapeRequest::tasks;
    }
    return ScrapeRequest::not_found;
}

Task<void> serve_scrape(TcpStream conn, const Runtime& rt, ScrapeOptions options) {
    // One deadline for the whole head: a per-receive timeout would be renewed by every byte of
    // a client that sends one now and then, and hold the connection forever.
    const auto until = std::chrono::steady_clock::now() + options.head_timeout;
    std::string head;
    std::array<char, 2048> buf;
    ScrapeRequest req;
    while ((req = parse_scrape_request(head, options.max_head)) == ScrapeRequest::incomplete) {
        auto n = co_await conn.recv(buf).deadline(until);
        if (!n || *n == 0) co_return; // timed out, failed or closed: nothing to answer
        head.append(buf.data(), *n);
    }
    std::string out;
    std::string body;
    if (req == ScrapeRequest::tasks || req == ScrapeRequest::tasks_json) // (formatted off the loop)
        body = co_await task_dump_report_async(
            rt, req == ScrapeRequest::tasks ? TaskDumpFormat::text : TaskDumpFormat::json);
    switch (req) {
    case ScrapeRequest::metrics:
        body = prometheus_text(rt);
        out = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n";
        break;
    case ScrapeRequest::tasks:
        out = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n";
        break;
    case ScrapeRequest::tasks_json:
        out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
        break;
    case ScrapeRequest::too_large:
        body = "request head too large\n";
        out = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\n";
        break;
    case ScrapeRequest::bad:
        body = "bad request\n";
        out = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n";
        break;
    default:
        body = "not found\n";
        out = "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n";
        break;
    }
    out += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    out += body;
    (void)co_await conn.send_all(out).timeout(options.send_timeout);
}

} // namespace galay::metrics
