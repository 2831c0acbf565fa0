// mini_redis/resp.cpp: the request parser and the reply writer (see resp.hpp).
#include "mini_redis/resp.hpp"

#include <charconv>
#include <climits>
#include <cstring>

namespace mini_redis {

void RequestParser::reset() noexcept {
    pos_ = searched_ = 0;
    args_left_ = bulk_len_ = -1;
    at_.clear();
    args_.clear();
}

RequestParser::Status RequestParser::fail(std::string message) {
    error_ = "ERR Protocol error: " + std::move(message);
    return Status::error;
}

std::size_t RequestParser::find_line_end(std::string_view in, char end) {
    const std::size_t from = std::max(searched_, pos_);
    if (from >= in.size()) return std::string_view::npos;
    const void* hit = std::memchr(in.data() + from, end, in.size() - from);
    const std::size_t at = hit ? static_cast<const char*>(hit) - in.data() : in.size();
    scanned_ += at + (hit ? 1 : 0) - from;
    searched_ = hit ? at + 1 : in.size();
    return hit ? at : std::string_view::npos;
}

RequestParser::Status RequestParser::parse(std::string_view in) {
    if (args_left_ < 0 && pos_ == 0 && !in.empty() && in[0] != '*') return parse_inline(in);
    for (;;) {
        if (args_left_ < 0 || bulk_len_ < 0) {
            // A length line: "*<count>\r\n" first, then "$<length>\r\n" before each argument.
            // Like Redis, it ends at '\r' and the byte after it is taken as its '\n'.
            const std::size_t cr = find_line_end(in, '\r');
            if (cr != std::string_view::npos && cr + 1 >= in.size()) {
                searched_ = cr; // its '\n' is still to come: find this '\r' again then
                return Status::incomplete;
            }
            if (cr == std::string_view::npos) {
                if (in.size() - pos_ > kMaxLine)
                    return fail(args_left_ < 0 ? "too big mbulk count string"
                                               : "too big bulk count string");
                return Status::incomplete;
            }
            const char type = in[pos_];
            long long n = 0;
            const bool number = parse_int(in.substr(pos_ + 1, cr - pos_ - 1), n);
            if (args_left_ < 0) {
                if (!number || n > INT_MAX) return fail("invalid multibulk length");
                args_left_ = n > 0 ? n : 0;
            } else {
                if (type != '$') return fail(std::string("expected '$', got '") + type + "'");
                // The limit is checked here, before a byte of the string is read.
                if (!number || n < 0 || static_cast<unsigned long long>(n) > kMaxBulk)
                    return fail("invalid bulk length");
                bulk_len_ = n;
            }
            pos_ = cr + 2;
        }
        if (args_left_ == 0) break; // "*0" and "*-1" are empty requests, skipped by the caller
        if (bulk_len_ >= 0) {
            // The string and the two bytes after it (its "\r\n", not checked: as in Redis).
            const std::size_t need = static_cast<std::size_t>(bulk_len_) + 2;
            if (in.size() - pos_ < need) return Status::incomplete;
            at_.push_back(pos_);
            at_.push_back(static_cast<std::size_t>(bulk_len_));
            pos_ += need;
            bulk_len_ = -1;
            if (--args_left_ == 0) break;
        }
    }
    args_.clear();
    for (std::size_t i = 0; i < at_.size(); i += 2)
        args_.push_back(in.substr(at_[i], at_[i + 1]));
    return Status::complete;
}

namespace {

int hex(char c) noexcept {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

bool space(char c) noexcept {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/// Split an inline line into arguments as Redis does (its sdssplitargs): blanks separate them;
/// "double quotes" take \n \r \t \b \a \xHH and \<any>, 'single quotes' take \'; a closing
/// quote must be followed by a blank or the end. False: unbalanced quotes.
bool split_inline(std::string_view line, std::vector<std::string>& out) {
    std::size_t i = 0;
    const std::size_t n = line.size();
    auto at = [&](std::size_t k) { return k < n ? line[k] : '\0'; };
    for (;;) {
        while (i < n && space(line[i]))
            ++i;
        if (i >= n) return true;
        std::string arg;
        char quote = 0; // '"' or '\'' inside quotes
        for (bool done = false; !done; ++i) {
            const char c = at(i);
            if (quote != 0 && i >= n) return false; // the line ends inside quotes
            if (quote == '"' && c == '\\' && at(i + 1) == 'x' && hex(at(i + 2)) >= 0 &&
                hex(at(i + 3)) >= 0) {
                arg += static_cast<char>(hex(at(i + 2)) * 16 + hex(at(i + 3)));
                i += 3;
            } else if (quote == '"' && c == '\\' && i + 1 < n) {
                const char e = line[++i];
                arg += e == 'n'   ? '\n'
                       : e == 'r' ? '\r'
                       : e == 't' ? '\t'
                       : e == 'b' ? '\b'
                       : e == 'a' ? '\a'
                                  : e;
            } else if (quote == '\'' && c == '\\' && at(i + 1) == '\'') {
                arg += '\'';
                ++i;
            } else if (quote != 0 && c == quote) {
                if (i + 1 < n && !space(line[i + 1])) return false; // "a"b
                done = true;
            } else if (quote != 0) {
                arg += c;
            } else if (i >= n || space(c)) {
                done = true;
            } else if (c == '"' || c == '\'') {
                quote = c;
            } else {
                arg += c;
            }
        }
        out.push_back(std::move(arg));
    }
}

} // namespace

RequestParser::Status RequestParser::parse_inline(std::string_view in) {
    const std::size_t nl = find_line_end(in, '\n');
    if (nl == std::string_view::npos) {
        if (in.size() > kMaxLine) return fail("too big inline request");
        return Status::incomplete;
    }
    std::string_view line = in.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // The arguments are copies here (quotes and escapes change them): an inline request is what
    // a person types, not what clients send.
    inline_args_.clear();
    if (!split_inline(line, inline_args_)) return fail("unbalanced quotes in request");
    args_.assign(inline_args_.begin(), inline_args_.end());
    pos_ = nl + 1;
    return Status::complete;
}

bool parse_int(std::string_view s, long long& out) noexcept {
    if (s.empty() || s.size() > 20) return false;
    if (s == "0") {
        out = 0;
        return true;
    }
    const bool negative = s[0] == '-';
    std::string_view digits = negative ? s.substr(1) : s;
    if (digits.empty() || digits[0] < '1' || digits[0] > '9') return false; // no 0-prefix, no '+'
    unsigned long long v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc{} || end != digits.data() + digits.size()) return false;
    if (negative) {
        if (v > static_cast<unsigned long long>(LLONG_MAX) + 1) return false;
        out = static_cast<long long>(0 - v);
    } else {
        if (v > static_cast<unsigned long long>(LLONG_MAX)) return false;
        out = static_cast<long long>(v);
    }
    return true;
}

void Replies::header(char type, long long n) {
    char buf[24];
    buf[0] = type;
    char* end = std::to_chars(buf + 1, buf + sizeof buf - 2, n).ptr;
    *end++ = '\r';
    *end++ = '\n';
    put({buf, static_cast<std::size_t>(end - buf)});
}

void Replies::simple(std::string_view s) {
    put("+");
    put(s);
    put("\r\n");
}

void Replies::error(std::string_view s) {
    put("-");
    put(s);
    put("\r\n");
}

void Replies::integer(long long n) {
    header(':', n);
}

void Replies::bulk(std::string_view s) {
    header('$', static_cast<long long>(s.size()));
    put(s);
    put("\r\n");
}

void Replies::null() {
    put("$-1\r\n");
}

void Replies::array(std::size_t n) {
    header('*', static_cast<long long>(n));
}

void Replies::raw(std::string_view bytes) {
    put(bytes);
}

std::string error_text(std::string_view s) {
    std::string out(s.substr(0, s.find('\0')));
    for (char& c : out)
        if (c == '\r' || c == '\n') c = ' ';
    return out;
}

} // namespace mini_redis
