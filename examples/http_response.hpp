// What https_get reads from a server it does not trust: the URL it is given, the response head
// and a chunked body (RFC 9112), as pure functions on bytes, so that the tests and the fuzz
// target (fuzz/http_response_fuzz.cpp) call exactly what the program runs.
//
// Nothing here trusts a number it is sent: sizes are hex or decimal digits only, bounded, and an
// overflow is an error; every line has a length limit, so a peer that never ends a line costs a
// bounded buffer, not memory without end.
//
//     auto head = http_response::parse_head(bytes);      // nullopt: the head is not complete
//     http_response::ChunkedDecoder body;
//     auto step = body.next(rest);                         // consumed, the body bytes among them
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace http_response {

/// The longest response head accepted (status line, fields, the empty line).
inline constexpr std::size_t kMaxHead = 64 * 1024;
/// The longest chunk-size line (size and extensions) or trailer line accepted.
inline constexpr std::size_t kMaxChunkLine = 4096;
/// The most bytes of trailer fields accepted after the last chunk.
inline constexpr std::size_t kMaxTrailers = 16 * 1024;

/// An https:// URL: host (brackets removed from an IPv6 literal), port, path with its query.
struct Url {
    std::string host;
    std::uint16_t port = 443;
    std::string path = "/";
};

/// `text` as https://HOST[:PORT][/PATH][?QUERY][#FRAGMENT], or what is wrong with it. The port is
/// 1..65535 in decimal digits only; no byte may be a control character or a space (it would end
/// up in the request line); the fragment is dropped, as a browser does.
std::expected<Url, std::string> parse_url(std::string_view text);

/// How the body after a head is delimited.
enum class Framing {
    none,           ///< no body (1xx, 204, 304)
    content_length, ///< exactly `content_length` bytes
    chunked,        ///< Transfer-Encoding ending in chunked
    until_close,    ///< everything until the connection ends
};

/// A parsed response head.
struct Head {
    int status = 0; ///< 100..999
    Framing framing = Framing::until_close;
    std::uint64_t content_length = 0; ///< with Framing::content_length
    std::size_t size = 0;             ///< bytes of the head, the empty line included
};

/// The response head at the start of `bytes`: nullopt while it is incomplete (and shorter than
/// kMaxHead), the head once the empty line has arrived, or what is wrong with it (a malformed
/// status line or field, a Content-Length that is not digits or disagrees with itself or
/// overflows, a Transfer-Encoding with chunked not last, a head over kMaxHead). An interim
/// answer (1xx but 101) is a head of its own with Framing::none: the caller skips it and parses
/// the next.
std::expected<std::optional<Head>, std::string> parse_head(std::string_view bytes);

/// A chunked body (RFC 9112, section 7.1), decoded as it arrives.
class ChunkedDecoder {
public:
    /// One step over the front of the unconsumed input: how many bytes it consumed and the body
    /// bytes among them (a view into the input). Consumes nothing while a size line, the CRLF
    /// after a chunk or a trailer line is incomplete: the caller keeps those bytes and calls again
    /// with more. Errors: a size that is not hex digits or overflows 64 bits, malformed chunk
    /// extensions, a chunk not followed by CRLF, a line over kMaxChunkLine, trailers over
    /// kMaxTrailers.
    struct Step {
        std::size_t consumed = 0;
        std::string_view data;
    };
    std::expected<Step, std::string> next(std::string_view in);

    /// The last chunk and the trailers have been read: the body is complete.
    bool done() const noexcept { return state_ == State::done; }

private:
    enum class State { size_line, data, data_crlf, trailers, done };
    State state_ = State::size_line;
    std::uint64_t left_ = 0;        // bytes of the current chunk still to come
    std::size_t trailer_bytes_ = 0; // trailer bytes seen so far
};

/// The size and extensions of a chunk-size line (without its CRLF): the size, or what is wrong.
std::expected<std::uint64_t, std::string> parse_chunk_size_line(std::string_view line);

} // namespace http_response
