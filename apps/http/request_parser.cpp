#include "http/request_parser.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace http {

namespace {

constexpr std::size_t npos = std::string_view::npos;
/// Longer than any method we could implement: 501 (RFC 9112 3).
constexpr std::size_t kMaxMethod = 32;

/// tchar (RFC 9110 5.6.2): the characters of a token (method, header name, coding).
constexpr std::array<bool, 256> make_tchar_table() {
    std::array<bool, 256> t{};
    for (int c = '0'; c <= '9'; ++c)
        t[c] = true;
    for (int c = 'a'; c <= 'z'; ++c)
        t[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c)
        t[c] = true;
    for (char c : std::string_view("!#$%&'*+-.^_`|~"))
        t[static_cast<unsigned char>(c)] = true;
    return t;
}
constexpr std::array<bool, 256> kTchar = make_tchar_table();

bool is_tchar(char c) noexcept {
    return kTchar[static_cast<unsigned char>(c)];
}
bool is_token(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}
/// field-content characters: VCHAR, obs-text, SP, HTAB (no other control character).
bool is_field_char(char ch) noexcept {
    const auto c = static_cast<unsigned char>(ch);
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}
/// The first character from `p` that is not a field-content character (`end` if none).
/// Sixteen at a time where SSE2 is (every x86-64): a header value is most of a request's bytes.
const char* field_content_end(const char* p, const char* end) noexcept {
#ifdef __SSE2__
    const __m128i below_space = _mm_set1_epi8(0x1f);
    const __m128i tab = _mm_set1_epi8('\t');
    const __m128i del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        // x <= 0x1f (unsigned) and not a tab, or DEL: not field content
        const __m128i control = _mm_cmpeq_epi8(_mm_max_epu8(x, below_space), below_space);
        const __m128i stop =
            _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(x, tab), control), _mm_cmpeq_epi8(x, del));
        if (const int mask = _mm_movemask_epi8(stop); mask != 0) return p + __builtin_ctz(mask);
        p += 16;
    }
#endif
    while (p < end && is_field_char(*p))
        ++p;
    return p;
}
/// request-target characters: anything visible (a URI has no spaces or controls).
bool is_target_char(char ch) noexcept {
    const auto c = static_cast<unsigned char>(ch);
    return c > 0x20 && c != 0x7f;
}

char lower(char c) noexcept {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string_view trim_ows(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

ParseResult error(int status, const char* reason) noexcept {
    return {ParseStatus::error, 0, status, reason};
}

Method method_of(std::string_view m) noexcept {
    if (m == "GET") return Method::get;
    if (m == "HEAD") return Method::head;
    if (m == "POST") return Method::post;
    if (m == "PUT") return Method::put;
    if (m == "DELETE") return Method::delete_;
    if (m == "OPTIONS") return Method::options;
    if (m == "PATCH") return Method::patch;
    if (m == "TRACE") return Method::trace;
    return Method::other;
}

/// One line without its terminator: LF or CRLF. A CR anywhere else is an error (bare CR).
bool strip_line(std::string_view& line) noexcept {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line.find('\r') == npos;
}

/// The request line: method SP request-target SP HTTP-version. 0 or the status to answer.
int parse_request_line(std::string_view line, Request& out, const char*& reason) noexcept {
    if (!strip_line(line)) return reason = "bare CR in the request line", 400;
    const std::size_t sp1 = line.find(' ');
    if (sp1 == npos) return reason = "request line without spaces", 400;
    const std::string_view method = line.substr(0, sp1);
    if (!is_token(method)) return reason = "malformed method", 400;
    if (method.size() > kMaxMethod) return reason = "method too long", 501;
    const std::size_t sp2 = line.find(' ', sp1 + 1);
    if (sp2 == npos) return reason = "request line without a version", 400;
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    if (target.empty() || !std::all_of(target.begin(), target.end(), is_target_char))
        return reason = "malformed request target", 400;
    const std::string_view version = line.substr(sp2 + 1);
    if (version.size() < 6 || version.substr(0, 5) != "HTTP/")
        return reason = "malformed HTTP version", 400;
    const char major = version[5];
    if (major >= '0' && major <= '9' && major != '1') {
        // HTTP/2.0, HTTP/3, HTTP/0.9 spelled out: a version we do not speak, if well formed.
        const std::string_view rest = version.substr(6);
        const bool well_formed = rest.empty() || (rest.size() == 2 && rest[0] == '.' &&
                                                  rest[1] >= '0' && rest[1] <= '9');
        if (well_formed) return reason = "HTTP version not supported", 505;
        return reason = "malformed HTTP version", 400;
    }
    if (version.size() != 8 || major != '1' || version[6] != '.' || version[7] < '0' ||
        version[7] > '9')
        return reason = "malformed HTTP version", 400;
    out.method = method_of(method);
    out.method_name = method;
    out.target = target;
    out.version_minor = version[7] == '0' ? 0 : 1;
    return 0;
}

/// The bytes of a token list header (Connection, Transfer-Encoding), one token at a time.
template <class F>
void for_each_token(std::string_view list, F&& f) {
    while (!list.empty()) {
        const std::size_t comma = list.find(',');
        std::string_view item = trim_ows(list.substr(0, comma));
        if (!item.empty()) f(item);
        if (comma == npos) break;
        list.remove_prefix(comma + 1);
    }
}

/// The end of the head: the index just past the blank line that ends it, or npos. `from` is
/// where to start looking for line ends; `resume` receives where the next search must start.
std::size_t find_head_end(std::string_view b, std::size_t from, std::size_t& resume) noexcept {
    std::size_t i = from;
    for (;;) {
        const void* p = i < b.size() ? std::memchr(b.data() + i, '\n', b.size() - i) : nullptr;
        if (p == nullptr) {
            resume = b.size();
            return npos;
        }
        const std::size_t nl = static_cast<std::size_t>(static_cast<const char*>(p) - b.data());
        // A blank line follows: "\n\n" or "\n\r\n".
        if (nl + 1 >= b.size()) {
            resume = nl; // look at this line end again when more bytes arrive
            return npos;
        }
        if (b[nl + 1] == '\n') return nl + 2;
        if (b[nl + 1] == '\r') {
            if (nl + 2 >= b.size()) {
                resume = nl;
                return npos;
            }
            if (b[nl + 2] == '\n') return nl + 3;
        }
        i = nl + 1;
    }
}

/// A header line (without its line end, not blank) the careful way: nullptr and `name` and
/// `value` (trimmed), or why it is refused (400).
const char* split_header(std::string_view line, std::string_view& name,
                         std::string_view& value) noexcept {
    if (line[0] == ' ' || line[0] == '\t')
        return "obsolete line folding or whitespace before a header";
    const std::size_t colon = line.find(':');
    if (colon == npos) return "header line without a colon";
    name = line.substr(0, colon);
    if (!is_token(name)) return "malformed header name";
    value = trim_ows(line.substr(colon + 1));
    if (field_content_end(value.data(), value.data() + value.size()) != value.data() + value.size())
        return "control character in a header value";
    return nullptr;
}

/// A header line of the usual shape (token ":" OWS field-content OWS, then CRLF or LF) in one
/// pass: returns its length with the line end and sets `name` and `value` (trimmed), as the
/// careful path (split_header) would. 0 for any other line (blank, folded, malformed, a bare CR):
/// the careful path then decides what it is.
std::size_t common_header_line(std::string_view head, std::string_view& name,
                               std::string_view& value) noexcept {
    const char* const begin = head.data();
    const char* const end = begin + head.size();
    const char* p = begin;
    while (p < end && is_tchar(*p))
        ++p;
    if (p == begin || p == end || *p != ':') return 0;
    name = {begin, static_cast<std::size_t>(p - begin)};
    ++p;
    while (p < end && (*p == ' ' || *p == '\t'))
        ++p;
    const char* const v = p;
    p = field_content_end(p, end); // stops at CR, LF, any other control character
    const char* v_end = p;
    if (p < end && *p == '\r') ++p;
    if (p == end || *p != '\n') return 0;
    while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t'))
        --v_end;
    value = {v, static_cast<std::size_t>(v_end - v)};
    return static_cast<std::size_t>(p + 1 - begin);
}

/// What the header fields seen so far said, for the checks made once the head is complete.
struct HeaderFacts {
    bool host = false, length = false, te = false;
    bool close = false, keep_alive = false;
};

/// What one header field means for the request (Host, Content-Length, Transfer-Encoding,
/// Connection, Expect; others are only listed). 0, or the status to refuse the request with.
int apply_header(std::string_view name, std::string_view value, Request& out, HeaderFacts& seen,
                 const char*& reason) noexcept {
    switch (name.size()) { // (iequals needs equal lengths: look only at the name that can match)
    case 4:
        if (iequals(name, "host")) {
            if (seen.host) return reason = "more than one Host header", 400;
            seen.host = true;
            out.host = value;
        }
        return 0;
    case 14:
        if (iequals(name, "content-length")) {
            if (value.empty() || !std::all_of(value.begin(), value.end(),
                                              [](char c) { return c >= '0' && c <= '9'; }))
                return reason = "malformed Content-Length", 400;
            if (value.size() > 19) return reason = "body too large", 413; // would overflow
            std::uint64_t n = 0;
            for (char c : value)
                n = n * 10 + static_cast<std::uint64_t>(c - '0');
            if (seen.length && n != out.content_length)
                return reason = "conflicting Content-Length headers", 400;
            seen.length = true;
            out.content_length = n;
        }
        return 0;
    case 17:
        if (iequals(name, "transfer-encoding")) {
            // Only chunked, and only last, has a length we can find: anything else is 501 (a
            // coding we do not know) or 400 (chunked not last: the length is unknowable).
            int status = 0;
            bool last_chunked = false;
            for_each_token(value, [&](std::string_view coding) {
                if (last_chunked) status = 400; // something after chunked
                last_chunked = iequals(coding, "chunked");
                if (!last_chunked && status == 0) status = 501;
            });
            if (!last_chunked) return reason = "Transfer-Encoding without chunked last", 400;
            if (status != 0) {
                reason =
                    status == 501 ? "transfer coding not implemented" : "chunked applied twice";
                return status;
            }
            seen.te = true;
            out.chunked = true;
        }
        return 0;
    case 10:
        if (iequals(name, "connection")) {
            for_each_token(value, [&](std::string_view opt) {
                if (iequals(opt, "close")) seen.close = true;
                if (iequals(opt, "keep-alive")) seen.keep_alive = true;
            });
        }
        return 0;
    case 6:
        if (iequals(name, "expect")) {
            if (!iequals(value, "100-continue")) return reason = "unsupported expectation", 417;
            out.expect_continue = true;
        }
        return 0;
    default:
        return 0;
    }
}

/// The checks made once every header field is in. 0, or the status to refuse the request with.
int finish_head(const HeaderFacts& seen, Request& out, const Limits& limits,
                const char*& reason) noexcept {
    if (seen.te && seen.length) return reason = "both Transfer-Encoding and Content-Length", 400;
    if (seen.te && out.version_minor == 0) return reason = "Transfer-Encoding in HTTP/1.0", 400;
    if (out.version_minor >= 1 && !seen.host) return reason = "HTTP/1.1 request without Host", 400;
    if (out.content_length > limits.max_body) return reason = "body too large", 413;
    out.keep_alive = out.version_minor >= 1 ? !seen.close : seen.keep_alive && !seen.close;
    return 0;
}

/// The fields of `out` that a parse sets before the header fields.
void clear_header_fields(Request& out) noexcept {
    out.header_count = 0;
    out.host = {};
    out.content_length = 0;
    out.chunked = false;
    out.expect_continue = false;
}

} // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

std::string_view Request::header(std::string_view name) const noexcept {
    for (std::size_t i = 0; i < header_count; ++i)
        if (iequals(headers[i].name, name)) return headers[i].value;
    return {};
}

ParseResult RequestParser::parse(std::string_view buf, Request& out) noexcept {
    // A request's first call: most requests are all there and of the usual shape, and are read
    // in one pass. Anything else (more to come, empty lines first, a limit reached, a line the
    // one pass does not take, a refusal) is left to the careful path, which decides it from
    // scratch: the one pass changes nothing but `out`, which the careful path rewrites.
    if (buf.empty()) return {}; // (incomplete: what the careful path says, without its work)
    if (scanned_ == 0 && line_end_ == npos && !line_checked_) {
        if (const std::size_t taken = parse_whole(buf, out); taken != 0) {
#ifndef NDEBUG // (the tests and the fuzz target) the careful path agrees
            RequestParser careful(limits_);
            Request ref;
            const ParseResult r = careful.parse_careful(buf, ref);
            assert(r.status == ParseStatus::complete && r.consumed == taken);
            assert(ref.method == out.method && ref.method_name == out.method_name);
            assert(ref.target == out.target && ref.version_minor == out.version_minor);
            assert(ref.host == out.host && ref.content_length == out.content_length);
            assert(ref.chunked == out.chunked && ref.keep_alive == out.keep_alive);
            assert(ref.expect_continue == out.expect_continue);
            assert(ref.header_count == out.header_count);
            for (std::size_t i = 0; i < ref.header_count; ++i)
                assert(ref.headers[i].name.data() == out.headers[i].name.data() &&
                       ref.headers[i].name.size() == out.headers[i].name.size() &&
                       ref.headers[i].value.data() == out.headers[i].value.data() &&
                       ref.headers[i].value.size() == out.headers[i].value.size());
#endif
            return {ParseStatus::complete, taken, 0, ""};
        }
    }
    return parse_careful(buf, out);
}

std::size_t RequestParser::parse_whole(std::string_view buf, Request& out) const noexcept {
    const char* const begin = buf.data();
    const char* const end = begin + buf.size();
    const char* p = begin;
    // method SP
    while (p < end && is_tchar(*p))
        ++p;
    if (p == begin || p == end || *p != ' ' || static_cast<std::size_t>(p - begin) > kMaxMethod)
        return 0;
    const std::string_view method(begin, static_cast<std::size_t>(p - begin));
    // request-target SP
    const char* const t = ++p;
    while (p < end && is_target_char(*p))
        ++p;
    if (p == t || p == end || *p != ' ') return 0;
    const std::string_view target(t, static_cast<std::size_t>(p - t));
    // "HTTP/1." DIGIT, then CRLF or LF
    ++p;
    if (end - p < 9 || std::memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9') return 0;
    const int minor = p[7] == '0' ? 0 : 1;
    p += 8;
    if (*p == '\r') ++p;
    if (p == end || *p != '\n') return 0;
    if (static_cast<std::size_t>(p - begin) > limits_.max_request_line) return 0;
    ++p;
    out.method = method_of(method);
    out.method_name = method;
    out.target = target;
    out.version_minor = minor;
    clear_header_fields(out);
    // Header fields of the usual shape, then the blank line.
    const std::size_t max_headers = std::min(limits_.max_headers, Request::kMaxHeaders);
    HeaderFacts seen;
    for (;;) {
        if (p < end && *p == '\r') {
            if (end - p < 2 || p[1] != '\n') return 0;
            p += 2;
            break;
        }
        if (p < end && *p == '\n') {
            ++p;
            break;
        }
        std::string_view name, value;
        const std::size_t taken =
            common_header_line({p, static_cast<std::size_t>(end - p)}, name, value);
        if (taken == 0 || out.header_count == max_headers) return 0;
        p += taken;
        out.headers[out.header_count++] = {name, value};
        if (const char* reason = ""; apply_header(name, value, out, seen, reason) != 0) return 0;
    }
    const auto head = static_cast<std::size_t>(p - begin);
    if (head > limits_.max_head) return 0;
    if (const char* reason = ""; finish_head(seen, out, limits_, reason) != 0) return 0;
    return head;
}

ParseResult RequestParser::parse_careful(std::string_view buf, Request& out) noexcept {
    // Empty lines before a request line are skipped (RFC 9112 2.2), up to the head's limit.
    std::size_t start = 0;
    while (start < buf.size() && (buf[start] == '\n' || buf[start] == '\r')) {
        if (buf[start] == '\r') {
            if (start + 1 == buf.size()) break;
            if (buf[start + 1] != '\n') return error(400, "bare CR");
            ++start;
        }
        ++start;
        if (start > limits_.max_head) return error(400, "only empty lines");
    }
    const std::string_view b = buf.substr(start);
    if (b.empty() || b[0] == '\r') return {}; // incomplete

    std::size_t resume = 0;
    const std::size_t end = find_head_end(b, scanned_, resume); // npos: not all there yet
    if (end == npos) {
        const std::size_t searched = std::min(scanned_, b.size());
        scanned_ = resume;
        if (line_end_ == npos) {
            const void* p = std::memchr(b.data() + searched, '\n', b.size() - searched);
            if (p != nullptr)
                line_end_ = static_cast<std::size_t>(static_cast<const char*>(p) - b.data());
        }
    } else if (line_end_ == npos) {
        line_end_ = b.find('\n');
    }
    bool line_parsed = false; // into `out`, by this call
    if (ParseResult refused = check_head(b, end, out, line_parsed);
        refused.status == ParseStatus::error)
        return refused;
    if (end == npos) return {};

    // The head is complete: b[0, end). (The header array is not cleared: header_count says
    // how much of it is this request's.)
    std::string_view head = b.substr(0, end);
    const std::size_t nl = line_end_;
    if (!line_parsed) { // checked by an earlier call, perhaps into another Request
        const char* reason = "";
        (void)parse_request_line(head.substr(0, nl), out, reason);
    }
    clear_header_fields(out);
    head.remove_prefix(nl + 1);

    HeaderFacts seen;
    for (;;) {
        std::string_view name, value;
        if (const std::size_t taken = common_header_line(head, name, value); taken != 0) {
#ifndef NDEBUG // (the tests and the fuzz target) the careful path agrees
            std::string_view line = head.substr(0, taken - 1), n, v;
            assert(strip_line(line) && !line.empty());
            assert(split_header(line, n, v) == nullptr);
            assert(n.data() == name.data() && n.size() == name.size());
            assert(v.data() == value.data() && v.size() == value.size());
#endif
            head.remove_prefix(taken);
        } else {
            const std::size_t eol = head.find('\n');
            std::string_view line = head.substr(0, eol);
            head.remove_prefix(eol + 1);
            if (!strip_line(line)) return error(400, "bare CR in a header");
            if (line.empty()) break; // the blank line: end of the head
            if (const char* refused = split_header(line, name, value)) return error(400, refused);
        }
        if (out.header_count == std::min(limits_.max_headers, Request::kMaxHeaders))
            return error(431, "too many header fields");
        out.headers[out.header_count++] = {name, value};

        if (const char* reason = ""; int status = apply_header(name, value, out, seen, reason))
            return error(status, reason);
    }
    if (const char* reason = ""; int status = finish_head(seen, out, limits_, reason))
        return error(status, reason);
    return {ParseStatus::complete, start + end, 0, ""};
}

ParseResult RequestParser::check_head(std::string_view b, std::size_t head_end, Request& out,
                                      bool& parsed) noexcept {
    // What is already wrong is refused now, not when the head's limit is reached. Each refusal
    // here is decided at a position in the bytes, and the one decided earliest wins, so the same
    // bytes get the same answer however they arrive: all at once or a few at a time.
    std::size_t best_at = npos;
    ParseResult best;
    auto refuse = [&](std::size_t at, int status, const char* reason) {
        if (at < best_at) {
            best_at = at;
            best = error(status, reason);
        }
    };
    const std::size_t line_len = line_end_ == npos ? b.size() : line_end_;
    // The method: a token, and not longer than any we could implement.
    const std::size_t scan = std::min(line_len, kMaxMethod + 1);
    bool space = false;
    for (std::size_t i = 0; i < scan; ++i) {
        if (b[i] == ' ') {
            space = true;
            break;
        }
        if (!is_tchar(b[i])) {
            refuse(i, 400, "malformed method");
            space = true; // decided
            break;
        }
    }
    if (!space && scan == kMaxMethod + 1) refuse(kMaxMethod, 501, "method too long");
    // The request line: its length, then (once its end is there) the line itself.
    if (line_len > limits_.max_request_line) {
        refuse(limits_.max_request_line, 414, "request line too long");
    } else if (line_end_ != npos && !line_checked_) {
        const char* reason = "";
        if (int status = parse_request_line(b.substr(0, line_end_), out, reason); status != 0) {
            refuse(line_end_, status, reason);
        } else {
            line_checked_ = true;
            parsed = true;
        }
    }
    // The head's length.
    const std::size_t head_len = head_end == npos ? b.size() : head_end;
    if (head_len > limits_.max_head) refuse(limits_.max_head, 431, "request head too large");
    return best;
}

std::string_view reason_phrase(int status) noexcept {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 417:
        return "Expectation Failed";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "";
    }
}

} // namespace http
