// An HTTP/1.1 request-head parser (RFC 9112) for http_server: the request line and the
// header fields, with limits, and the HTTP status to answer when a request is refused.
//
//     http::RequestParser parser(limits);
//     http::Request req;
//     http::ParseResult r = parser.parse(reader.buffered(), req);
//     switch (r.status) {
//     case http::ParseStatus::complete:   reader.consume(r.consumed); ... serve req ...;
//                                         parser.reset(); break;
//     case http::ParseStatus::incomplete: ... receive more, parse again ...; break;
//     case http::ParseStatus::error:      ... answer r.error_status, close ...; break;
//     }
//
// It parses from a buffer that holds the request from its first byte; the views in `Request`
// point into that buffer. Between calls for one request it remembers how far it searched for the
// end of the head, so a request arriving a byte at a time costs O(n), not O(n^2). It does not
// allocate, and it knows nothing of sockets (it is fuzzed on its own: fuzz/http_parser_fuzz.cpp).
//
// Strict where laxness lets two parsers disagree on where a request ends (request smuggling):
// whitespace before a header's colon, obs-fold, both Content-Length and Transfer-Encoding, a
// malformed or conflicting Content-Length, and a bare CR are all 400. Lenient where the RFC asks:
// a bare LF ends a line, and empty lines before the request line are skipped.
//
// This lives next to the server rather than in the library: galay is an I/O runtime, and this is
// only as much HTTP as the server and its benchmark need (no client side, no response parsing, no
// body decoding), not an API the library should promise.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace http {

enum class Method : std::uint8_t { get, head, post, put, delete_, options, patch, trace, other };

struct Limits {
    std::size_t max_request_line = 4096; ///< longer: 414 (URI Too Long)
    std::size_t max_head = 8192;         ///< request line + header fields + blank line; more: 431
    std::size_t max_headers = 64;        ///< header fields (at most kMaxHeaders); more: 431
    std::uint64_t max_body = 1 << 20;    ///< a larger Content-Length: 413
};

struct Header {
    std::string_view name;
    std::string_view value; ///< without surrounding whitespace
};

struct Request {
    static constexpr std::size_t kMaxHeaders = 64;

    // What the server reads for every request first (the first two cache lines), the headers'
    // array after it.
    Method method = Method::other;
    int version_minor = 1;        ///< HTTP/1.<minor>; 0 or 1 (higher minors are answered as 1.1)
    bool chunked = false;         ///< Transfer-Encoding: chunked (the body length is not known)
    bool keep_alive = true;       ///< HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with
                                  ///< "Connection: keep-alive"
    bool expect_continue = false; ///< "Expect: 100-continue"
    std::size_t header_count = 0;
    std::uint64_t content_length = 0;
    std::string_view method_name;
    std::string_view target; ///< as sent (origin-form "/a/b?q", absolute-form, "*")
    std::string_view host;
    std::array<Header, kMaxHeaders> headers;

    /// The value of the first header named `name` (case-insensitive), or an empty view.
    std::string_view header(std::string_view name) const noexcept;
};

enum class ParseStatus : std::uint8_t { complete, incomplete, error };

struct ParseResult {
    ParseStatus status = ParseStatus::incomplete;
    std::size_t consumed = 0; ///< complete: bytes of the head (including empty lines before it)
    int error_status = 0;     ///< error: the status to answer (400, 413, 414, 431, 501, 505)
    const char* reason = "";  ///< error: what was wrong, for a log or the response body
};

class RequestParser {
public:
    explicit RequestParser(const Limits& limits = {}) noexcept
        : limits_(limits) {}

    /// Parse the request at the start of `buf`. Incomplete: call again with the same bytes and
    /// more. After a complete or failed request, call reset() before parsing the next.
    ParseResult parse(std::string_view buf, Request& out) noexcept;
    void reset() noexcept {
        scanned_ = 0;
        line_end_ = std::string_view::npos;
        line_checked_ = false;
    }

private:
    /// The careful path: any request, in any number of pieces, resuming where the last call
    /// stopped.
    ParseResult parse_careful(std::string_view buf, Request& out) noexcept;
    /// The one pass for a request that is all in `buf` and has the usual shape (no empty lines
    /// first, each line "token: value" ending in CRLF or LF, within the limits, not refused):
    /// the head's length, or 0 to leave the request to the careful path.
    std::size_t parse_whole(std::string_view buf, Request& out) const noexcept;
    /// Refusals decided before the header fields: the method, the request line, the head's
    /// length (`head_end`: npos while incomplete). Parses the request line into `out` (and sets
    /// `parsed`) the first time it is complete.
    ParseResult check_head(std::string_view b, std::size_t head_end, Request& out,
                           bool& parsed) noexcept;

    Limits limits_;
    std::size_t scanned_ = 0;                       // where the search for the head's end resumes
    std::size_t line_end_ = std::string_view::npos; // the request line's LF, once seen
    bool line_checked_ = false;                     // the request line was parsed and is valid
};

/// "OK", "Not Found", ... for the statuses the server sends ("" for others).
std::string_view reason_phrase(int status) noexcept;

/// Case-insensitive ASCII comparison.
bool iequals(std::string_view a, std::string_view b) noexcept;

} // namespace http
