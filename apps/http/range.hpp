// The Range header of a GET (RFC 9110 14.2), for http_server's static files.
//
//     http::ByteRange r = http::parse_range(req.header("Range"), file_size);
//     // whole: 200 with the whole file; partial: 206, bytes [r.first, r.first + r.length)
//     // with "Content-Range: bytes first-last/size"; unsatisfiable: 416 "bytes */size".
//
// One range is served as asked. A header the server does not understand (another unit, a
// malformed or reversed range) is ignored, as RFC 9110 allows, and the whole file is sent. Several
// ranges (overlapping or not) are not served as multipart/byteranges: they get the whole file
// when at least one of them is satisfiable, 416 when none is.
#pragma once

#include <cstdint>
#include <string_view>

namespace http {

/// What a Range header asks of a representation of a known size.
struct ByteRange {
    enum class Kind : std::uint8_t { whole, partial, unsatisfiable };
    Kind kind = Kind::whole;
    std::uint64_t first = 0;  ///< partial: the first byte
    std::uint64_t length = 0; ///< partial: how many bytes (at least 1)
};

/// The answer to `value` (a Range header's value; empty: none) for `size` bytes.
ByteRange parse_range(std::string_view value, std::uint64_t size) noexcept;

} // namespace http
