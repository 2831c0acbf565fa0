// libFuzzer target: the metrics endpoint's request reader (galay::metrics::parse_scrape_request)
// on any bytes and any head limit. Invariants: "incomplete" only while the head has not ended
// and is under the limit; a complete answer does not change with more bytes behind it (the
// reader stops at the head's end); "metrics" only for GET /metrics.
#include <galay/metrics_endpoint.hpp>

#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    using galay::metrics::ScrapeRequest;
    const std::size_t max_head = 1 + data[0] * 4u; // 1 .. 1021: limits inside the inputs
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const ScrapeRequest r = galay::metrics::parse_scrape_request(text, max_head);
    const bool ended = text.find("\r\n\r\n") != std::string_view::npos;
    if (r == ScrapeRequest::incomplete && (ended || text.size() >= max_head)) __builtin_trap();
    if (r == ScrapeRequest::metrics && !text.starts_with("GET /metrics")) __builtin_trap();
    if ((r == ScrapeRequest::tasks || r == ScrapeRequest::tasks_json) &&
        !text.starts_with("GET /tasks"))
        __builtin_trap();
    if (r != ScrapeRequest::incomplete) {
        const std::string more = std::string(text) + "GET /metrics HTTP/1.1\r\n\r\n";
        if (galay::metrics::parse_scrape_request(more, max_head) != r) __builtin_trap();
    }
    return 0;
}
