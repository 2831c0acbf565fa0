// https_get's parsers: the URL, the response head and the chunked body (RFC 9112), strictly.
#include "http_response.hpp"

#include <algorithm>
#include <charconv>

namespace http_response {

namespace {

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/// tchar (RFC 9110, 5.6.2).
bool is_tchar(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c)) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}

bool is_ows(char c) {
    return c == ' ' || c == '\t';
}

/// A byte a field value may hold: VCHAR, obs-text, SP, HTAB.
bool is_field_byte(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == ' ' || u == '\t' || (u > 0x20 && u != 0x7f);
}

std::string_view trim_ows(std::string_view s) {
    while (!s.empty() && is_ows(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && is_ows(s.back()))
        s.remove_suffix(1);
    return s;
}

char ascii_lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return ascii_lower(x) == ascii_lower(y);
           });
}

/// Decimal digits only, no overflow of 64 bits.
std::optional<std::uint64_t> decimal(std::string_view s) {
    if (s.empty() || !std::all_of(s.begin(), s.end(), is_digit)) return std::nullopt;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return v;
}

/// Split "a, b ,c" (a #rule list) and call `f` on each non-empty element, trimmed.
template <class F>
bool for_each_element(std::string_view list, F f) {
    for (;;) {
        const std::size_t comma = list.find(',');
        const std::string_view item = trim_ows(list.substr(0, comma));
        if (!item.empty() && !f(item)) return false;
        if (comma == std::string_view::npos) return true;
        list.remove_prefix(comma + 1);
    }
}

/// One field line "name: value": the name and the trimmed value, or nullopt when malformed
/// (whitespace before the colon, obs-fold, a control byte in the value).
std::optional<std::pair<std::string_view, std::string_view>> field_line(std::string_view line) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = line.substr(colon + 1);
    if (!is_token(name) || !std::all_of(value.begin(), value.end(), is_field_byte))
        return std::nullopt;
    return std::pair{name, trim_ows(value)};
}

/// "HTTP/1.x SP 3DIGIT [SP reason]": the status, or nullopt.
std::optional<int> status_line(std::string_view line) {
    if (line.size() < 12 || !line.starts_with("HTTP/1.") || !is_digit(line[7]) || line[8] != ' ')
        return std::nullopt;
    const std::string_view code = line.substr(9, 3);
    if (!std::all_of(code.begin(), code.end(), is_digit) || code[0] == '0') return std::nullopt;
    if (line.size() > 12) {
        if (line[12] != ' ') return std::nullopt;
        const std::string_view reason = line.substr(13);
        if (!std::all_of(reason.begin(), reason.end(), is_field_byte)) return std::nullopt;
    }
    return (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
}

/// The line at the front of `in` (without its CRLF) and where the next one starts: nullopt while
/// no LF has arrived within `limit` bytes; an error for a bare LF or a line over `limit`.
std::expected<std::optional<std::pair<std::string_view, std::size_t>>, std::string>
next_line(std::string_view in, std::size_t limit, const char* what) {
    const std::size_t lf = in.substr(0, limit + 2).find('\n');
    if (lf == std::string_view::npos) {
        if (in.size() >= limit + 2)
            return std::unexpected(std::string(what) + " longer than " + std::to_string(limit) +
                                   " bytes");
        return std::nullopt;
    }
    if (lf == 0 || in[lf - 1] != '\r')
        return std::unexpected(std::string(what) + " ends in a bare LF");
    return std::pair{in.substr(0, lf - 1), lf + 1};
}

/// BWS ";" BWS token [BWS "=" BWS (token / quoted-string)], repeated: true when `ext` is that.
bool chunk_extensions(std::string_view ext) {
    auto skip_ws = [&] {
        while (!ext.empty() && is_ows(ext.front()))
            ext.remove_prefix(1);
    };
    auto take_token = [&] {
        std::size_t n = 0;
        while (n < ext.size() && is_tchar(ext[n]))
            ++n;
        ext.remove_prefix(n);
        return n > 0;
    };
    for (;;) {
        skip_ws();
        if (ext.empty()) return true;
        if (ext.front() != ';') return false;
        ext.remove_prefix(1);
        skip_ws();
        if (!take_token()) return false;
        skip_ws();
        if (ext.empty() || ext.front() != '=') continue;
        ext.remove_prefix(1);
        skip_ws();
        if (!ext.empty() && ext.front() == '"') {
            ext.remove_prefix(1);
            for (;;) {
                if (ext.empty()) return false; // no closing quote
                const char c = ext.front();
                ext.remove_prefix(1);
                if (c == '"') break;
                if (c == '\\') {
                    if (ext.empty() || !is_field_byte(ext.front())) return false;
                    ext.remove_prefix(1);
                } else if (!is_field_byte(c)) {
                    return false;
                }
            }
        } else if (!take_token()) {
            return false;
        }
    }
}

} // namespace

std::expected<Url, std::string> parse_url(std::string_view text) {
    constexpr std::string_view scheme = "https://";
    if (text.size() < scheme.size() || !iequals(text.substr(0, scheme.size()), scheme))
        return std::unexpected("not an https:// URL");
    text.remove_prefix(scheme.size());
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (u <= 0x20 || u >= 0x7f)
            return std::unexpected("a space, control or non-ASCII byte (percent-encode it)");
    }
    text = text.substr(0, text.find('#'));
    const std::size_t end = text.find_first_of("/?");
    std::string_view authority = text.substr(0, end);
    Url url;
    if (end != std::string_view::npos) {
        url.path = std::string(text.substr(end));
        if (url.path.front() == '?') url.path.insert(0, "/");
    }
    if (authority.find('@') != std::string_view::npos)
        return std::unexpected("user information in the URL is not supported");
    std::string_view port;
    bool has_port = false;
    if (authority.starts_with('[')) {
        const std::size_t close = authority.find(']');
        if (close == std::string_view::npos) return std::unexpected("an IPv6 host without ']'");
        url.host = std::string(authority.substr(1, close - 1));
        if (url.host.empty() ||
            url.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos)
            return std::unexpected("'" + url.host + "' is not an IPv6 address");
        authority.remove_prefix(close + 1);
        if (!authority.empty() && authority.front() != ':')
            return std::unexpected("unexpected text after the IPv6 host");
        has_port = !authority.empty();
        if (has_port) port = authority.substr(1);
    } else {
        const std::size_t colon = authority.find(':');
        url.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) {
            has_port = true;
            port = authority.substr(colon + 1);
        }
        if (url.host.find_first_of("[]") != std::string::npos)
            return std::unexpected("'" + url.host + "' is not a host name");
    }
    if (url.host.empty()) return std::unexpected("no host");
    if (has_port) {
        const auto p = decimal(port);
        if (!p || *p < 1 || *p > 65535)
            return std::unexpected("port '" + std::string(port) + "' is not a number 1..65535");
        url.port = static_cast<std::uint16_t>(*p);
    }
    return url;
}

std::expected<std::optional<Head>, std::string> parse_head(std::string_view bytes) {
    const std::size_t end = bytes.substr(0, kMaxHead).find("\r\n\r\n");
    if (end == std::string_view::npos) {
        if (bytes.size() >= kMaxHead)
            return std::unexpected("the response head is longer than " + std::to_string(kMaxHead) +
                                   " bytes");
        // A status line that cannot become one is an error now, not after 64 KiB.
        const std::string_view start = bytes.substr(0, 7);
        if (!std::string_view("HTTP/1.").starts_with(start))
            return std::unexpected("not an HTTP/1.x answer");
        return std::nullopt;
    }
    std::string_view head = bytes.substr(0, end + 2); // every line with its CRLF
    Head h;
    h.size = end + 4;
    const std::size_t first = head.find("\r\n");
    const auto status = status_line(head.substr(0, first));
    if (!status) return std::unexpected("malformed status line");
    h.status = *status;
    head.remove_prefix(first + 2);
    std::optional<std::uint64_t> length;
    bool has_te = false, chunked_last = false;
    while (!head.empty()) {
        const std::size_t eol = head.find("\r\n");
        const std::string_view line = head.substr(0, eol);
        head.remove_prefix(eol + 2);
        if (!line.empty() && is_ows(line.front()))
            return std::unexpected("obsolete line folding in the response head");
        const auto field = field_line(line);
        if (!field) return std::unexpected("malformed header field line");
        const auto [name, value] = *field;
        if (iequals(name, "content-length")) {
            bool ok = for_each_element(value, [&](std::string_view v) {
                const auto n = decimal(v);
                if (!n || (length && *length != *n)) return false;
                length = n;
                return true;
            });
            if (!ok || !length) return std::unexpected("invalid Content-Length");
        } else if (iequals(name, "transfer-encoding")) {
            bool ok = for_each_element(value, [&](std::string_view coding) {
                if (chunked_last) return false; // chunked must be the last coding
                const std::string_view token = trim_ows(coding.substr(0, coding.find(';')));
                if (!is_token(token)) return false;
                chunked_last = iequals(token, "chunked");
                has_te = true;
                return true;
            });
            if (!ok) return std::unexpected("invalid Transfer-Encoding");
        }
    }
    if ((h.status >= 100 && h.status < 200 && h.status != 101) || h.status == 204 ||
        h.status == 304) {
        h.framing = Framing::none;
    } else if (has_te) {
        // Transfer-Encoding overrides Content-Length (RFC 9112, 6.3); without chunked last the
        // body runs until the connection closes.
        h.framing = chunked_last ? Framing::chunked : Framing::until_close;
    } else if (length) {
        h.framing = Framing::content_length;
        h.content_length = *length;
    }
    return h;
}

std::expected<std::uint64_t, std::string> parse_chunk_size_line(std::string_view line) {
    std::size_t n = 0;
    std::uint64_t size = 0;
    for (; n < line.size(); ++n) {
        const char c = line[n];
        unsigned digit;
        if (is_digit(c))
            digit = static_cast<unsigned>(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            digit = static_cast<unsigned>((c | 0x20) - 'a' + 10);
        else
            break;
        if (size > (~std::uint64_t(0) >> 4))
            return std::unexpected("chunk size '" + std::string(line.substr(0, 40)) +
                                   "' overflows 64 bits");
        size = (size << 4) | digit;
    }
    if (n == 0) return std::unexpected("chunk size is not a hex number");
    if (!chunk_extensions(line.substr(n))) return std::unexpected("malformed chunk extension");
    return size;
}

std::expected<ChunkedDecoder::Step, std::string> ChunkedDecoder::next(std::string_view in) {
    switch (state_) {
    case State::size_line: {
        auto line = next_line(in, kMaxChunkLine, "a chunk-size line");
        if (!line) return std::unexpected(line.error());
        if (!*line) return Step{};
        const auto size = parse_chunk_size_line((*line)->first);
        if (!size) return std::unexpected(size.error());
        left_ = *size;
        state_ = left_ == 0 ? State::trailers : State::data;
        return Step{(*line)->second, {}};
    }
    case State::data: {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left_, in.size()));
        left_ -= n;
        if (left_ == 0) state_ = State::data_crlf;
        return Step{n, in.substr(0, n)};
    }
    case State::data_crlf:
        if (in.empty() || (in.size() == 1 && in[0] == '\r')) return Step{};
        if (!in.starts_with("\r\n")) return std::unexpected("a chunk is not followed by CRLF");
        state_ = State::size_line;
        return Step{2, {}};
    case State::trailers: {
        auto line = next_line(in, kMaxChunkLine, "a trailer line");
        if (!line) return std::unexpected(line.error());
        if (!*line) return Step{};
        const std::string_view text = (*line)->first;
        if (text.empty()) {
            state_ = State::done;
        } else {
            if (is_ows(text.front())) return std::unexpected("obsolete line folding in a trailer");
            if (!field_line(text)) return std::unexpected("malformed trailer field");
            trailer_bytes_ += (*line)->second;
            if (trailer_bytes_ > kMaxTrailers)
                return std::unexpected("trailers longer than " + std::to_string(kMaxTrailers) +
                                       " bytes");
        }
        return Step{(*line)->second, {}};
    }
    case State::done:
        break;
    }
    return Step{};
}

} // namespace http_response
