// libFuzzer target: https_get's parsers of what a server sends (examples/http_response.hpp) on any
// bytes: the response head, a chunked body fed in pieces of every size, a chunk-size line, a URL.
// Invariants: a head is never larger than the bytes it was parsed from nor than kMaxHead; the
// decoder consumes only what it was given, its body bytes are a part of what it consumed, a step
// that consumes nothing is waiting for more (never twice in a row with more input arriving), and
// feeding the same bytes in one piece or byte by byte gives the same body and the same verdict;
// nothing crashes or reads out of bounds (ASan/UBSan).
#include "http_response.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hr = http_response;

namespace {

/// Decode `in` fed `piece` bytes at a time (the caller keeps what a step did not consume, as
/// https_get does). The body, or nullopt on an error; `done` says whether it completed.
std::optional<std::string> decode(std::string_view in, std::size_t piece, bool& done) {
    hr::ChunkedDecoder d;
    std::string body, pending;
    std::size_t fed = 0;
    for (;;) {
        std::string_view view = pending;
        while (!d.done()) {
            auto step = d.next(view);
            if (!step) return std::nullopt;
            if (step->consumed > view.size()) __builtin_trap();
            if (step->data.size() > step->consumed) __builtin_trap();
            if (!step->data.empty() &&
                (step->data.data() < view.data() ||
                 step->data.data() + step->data.size() > view.data() + step->consumed))
                __builtin_trap();
            if (step->consumed == 0) break;
            body.append(step->data);
            view.remove_prefix(step->consumed);
        }
        pending.erase(0, pending.size() - view.size());
        // A line the decoder waits on is bounded: what it keeps stays small.
        if (pending.size() > hr::kMaxChunkLine + 2 + piece) __builtin_trap();
        if (d.done() || fed == in.size()) break;
        const std::size_t n = std::min(piece, in.size() - fed);
        pending.append(in.substr(fed, n));
        fed += n;
    }
    done = d.done();
    return body;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    auto head = hr::parse_head(text);
    if (head && *head) {
        const hr::Head& h = **head;
        if (h.size > text.size() || h.size > hr::kMaxHead || h.status < 100 || h.status > 999)
            __builtin_trap();
    }

    bool done_whole = false, done_bytes = false;
    const auto whole = decode(text, text.size() == 0 ? 1 : text.size(), done_whole);
    const auto bytes = decode(text, 1, done_bytes);
    if (whole.has_value() != bytes.has_value()) __builtin_trap();
    if (whole && (*whole != *bytes || done_whole != done_bytes)) __builtin_trap();

    (void)hr::parse_chunk_size_line(text.substr(0, std::min<std::size_t>(text.size(), 200)));
    if (auto url = hr::parse_url(text)) {
        if (url->port == 0 || url->path.empty() || url->path.front() != '/') __builtin_trap();
        if (url->path.find_first_of(" \r\n") != std::string::npos) __builtin_trap();
    }
    return 0;
}
