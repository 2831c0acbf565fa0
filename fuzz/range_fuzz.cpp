// libFuzzer target: http_server's Range header parser (apps/http/range.hpp) on any bytes and any
// file size. Invariants: a partial answer is a non-empty range inside the file (no overflow of
// first + length); an empty file is never partial; the same input gives the same answer.
#include "http/range.hpp"

#include <cstdint>
#include <cstring>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 8) return 0;
    std::uint64_t file_size;
    std::memcpy(&file_size, data, 8);
    // Small sizes too, where the ranges' edges are: half the inputs take the low 16 bits.
    if (file_size & 1) file_size = (file_size >> 1) & 0xffff;
    const std::string_view value(reinterpret_cast<const char*>(data + 8), size - 8);
    const http::ByteRange r = http::parse_range(value, file_size);
    if (r.kind == http::ByteRange::Kind::partial) {
        if (r.length == 0 || r.first >= file_size) __builtin_trap();
        if (r.length > file_size - r.first) __builtin_trap();
    }
    if (value.empty() && r.kind != http::ByteRange::Kind::whole) __builtin_trap();
    const http::ByteRange again = http::parse_range(value, file_size);
    if (again.kind != r.kind || again.first != r.first || again.length != r.length)
        __builtin_trap();
    return 0;
}
