// libFuzzer target for http_server's HTTP/1.1 request parser
// (apps/http/request_parser.hpp). `make fuzz` runs it for FUZZ_SECONDS from fuzz/corpus/.
//
// Besides "no crash, no sanitizer report", it checks what the server relies on:
//  - a complete request's views lie inside the input and `consumed` covers them;
//  - a refusal carries one of the statuses the server knows how to send;
//  - parsing the same bytes as they trickle in (split at points taken from the input) reaches
//    the same outcome as parsing them at once: the same status, the same length, the same
//    fields. The incremental path (resumed searches, early request-line checks) is where a
//    parser that is right on whole requests goes wrong.
#include "http/request_parser.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace {

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "http_parser_fuzz: %s\n", what);
        std::abort();
    }
}

bool inside(std::string_view part, std::string_view whole) {
    if (part.empty()) return true;
    return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

void check_result(const http::ParseResult& r, const http::Request& req, std::string_view in,
                  const http::Limits& lim) {
    if (r.status == http::ParseStatus::complete) {
        check(r.consumed > 0 && r.consumed <= in.size(), "consumed out of range");
        const std::string_view head = in.substr(0, r.consumed);
        check(inside(req.method_name, head) && !req.method_name.empty(), "method outside");
        check(inside(req.target, head) && !req.target.empty(), "target outside");
        check(req.header_count <= lim.max_headers, "too many headers accepted");
        for (std::size_t i = 0; i < req.header_count; ++i)
            check(inside(req.headers[i].name, head) && inside(req.headers[i].value, head),
                  "header outside");
        check(req.content_length <= lim.max_body, "body over the limit accepted");
        check(!(req.chunked && req.content_length != 0), "both framings accepted");
        check(r.consumed <= lim.max_head * 2 + 2, "head over the limit accepted");
    } else if (r.status == http::ParseStatus::error) {
        const int s = r.error_status;
        check(s == 400 || s == 413 || s == 414 || s == 417 || s == 431 || s == 501 || s == 505,
              "unexpected refusal status");
        check(!http::reason_phrase(s).empty(), "status without a reason phrase");
    }
}

bool same_request(const http::Request& a, const http::Request& b) {
    if (a.method != b.method || a.method_name != b.method_name || a.target != b.target ||
        a.version_minor != b.version_minor || a.header_count != b.header_count ||
        a.content_length != b.content_length || a.chunked != b.chunked ||
        a.keep_alive != b.keep_alive || a.host != b.host || a.expect_continue != b.expect_continue)
        return false;
    for (std::size_t i = 0; i < a.header_count; ++i)
        if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value)
            return false;
    return true;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    // The first two bytes choose the limits and the split step; the rest is the request.
    http::Limits lim;
    lim.max_request_line = 16 + (data[0] & 0x3f) * 8; // 16..520
    lim.max_head = lim.max_request_line + (data[1] & 0x3f) * 16;
    lim.max_headers = 1 + (data[0] >> 6) * 4;
    lim.max_body = 1000;
    const std::size_t step = 1 + (data[1] >> 6) * 5; // 1, 6, 11, 16 bytes per arrival
    const std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);

    http::RequestParser whole(lim);
    http::Request req_whole;
    const http::ParseResult all = whole.parse(in, req_whole);
    check_result(all, req_whole, in, lim);

    http::RequestParser trickle(lim);
    http::Request req;
    for (std::size_t n = std::min(step, in.size());; n = std::min(n + step, in.size())) {
        const http::ParseResult r = trickle.parse(in.substr(0, n), req);
        check_result(r, req, in.substr(0, n), lim);
        if (r.status == http::ParseStatus::error) {
            // Refused early: the whole input must be refused too, for the same reason class.
            check(all.status == http::ParseStatus::error,
                  "refused a prefix of an accepted request");
            check(all.error_status == r.error_status, "different status for a prefix");
            break;
        }
        if (r.status == http::ParseStatus::complete) {
            check(all.status == http::ParseStatus::complete, "accepted a prefix, not the whole");
            check(r.consumed == all.consumed, "different length for a prefix");
            check(same_request(req, req_whole), "different fields for a prefix");
            break;
        }
        if (n == in.size()) {
            check(all.status == http::ParseStatus::incomplete, "incomplete only when trickled");
            break;
        }
    }
    return 0;
}
