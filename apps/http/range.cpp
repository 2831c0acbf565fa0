// Parsing a Range header (apps/http/range.hpp).
#include "http/range.hpp"

#include "http/request_parser.hpp"

#include <charconv>

namespace http {
namespace {

std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

/// 1*DIGIT that fits in 64 bits (from_chars alone would accept a sign, whitespace does not
/// occur here).
bool digits(std::string_view s, std::uint64_t& out) noexcept {
    if (s.empty() || s.front() < '0' || s.front() > '9') return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && end == s.data() + s.size();
}

/// One range-spec: int-range ("first-", "first-last") or suffix-range ("-length"). False when
/// it is malformed (a reversed int-range is invalid too).
bool one_spec(std::string_view spec, std::uint64_t size, ByteRange& out) noexcept {
    const std::size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return false;
    const std::string_view a = spec.substr(0, dash), b = spec.substr(dash + 1);
    if (a.empty()) { // suffix-range: the last `n` bytes
        std::uint64_t n = 0;
        if (!digits(b, n)) return false;
        if (n == 0 || size == 0) {
            out.kind = ByteRange::Kind::unsatisfiable;
        } else {
            out.kind = ByteRange::Kind::partial;
            out.length = n < size ? n : size;
            out.first = size - out.length;
        }
        return true;
    }
    std::uint64_t first = 0, last = UINT64_MAX;
    if (!digits(a, first)) return false;
    if (!b.empty() && !digits(b, last)) return false;
    if (last < first) return false;
    if (first >= size) {
        out.kind = ByteRange::Kind::unsatisfiable;
        return true;
    }
    out.kind = ByteRange::Kind::partial;
    out.first = first;
    out.length = (last < size - 1 ? last : size - 1) - first + 1;
    return true;
}

} // namespace

ByteRange parse_range(std::string_view value, std::uint64_t size) noexcept {
    value = trim(value);
    const std::size_t eq = value.find('=');
    if (eq == std::string_view::npos || !iequals(trim(value.substr(0, eq)), "bytes")) return {};
    std::string_view set = value.substr(eq + 1);
    ByteRange single;
    std::size_t specs = 0;
    bool any_satisfiable = false;
    while (!set.empty() || specs == 0) {
        const std::size_t comma = set.find(',');
        const std::string_view spec = trim(set.substr(0, comma));
        set = comma == std::string_view::npos ? std::string_view{} : set.substr(comma + 1);
        if (spec.empty()) { // empty list elements are allowed; a set of only those is not
            if (set.empty()) break;
            continue;
        }
        ByteRange r;
        if (!one_spec(spec, size, r)) return {}; // malformed: the header is ignored
        any_satisfiable = any_satisfiable || r.kind == ByteRange::Kind::partial;
        single = r;
        ++specs;
    }
    if (specs == 0) return {};
    if (specs == 1) return single;
    ByteRange many;
    many.kind = any_satisfiable ? ByteRange::Kind::whole : ByteRange::Kind::unsatisfiable;
    return many;
}

} // namespace http
