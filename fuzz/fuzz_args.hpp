// Turning a fuzzer's bytes into a command line: one argument per line (at most 64 arguments of
// at most 256 bytes; the rest is ignored), so that the corpus files are readable command lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace galay::fuzz {

inline std::vector<std::string> args_from_bytes(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> args;
    std::string cur;
    for (std::size_t i = 0; i < size && args.size() < 64; ++i) {
        const char c = static_cast<char>(data[i]);
        if (c == '\n') {
            args.push_back(std::move(cur));
            cur.clear();
        } else if (cur.size() < 256) {
            cur.push_back(c);
        }
    }
    if (!cur.empty() && args.size() < 64) args.push_back(std::move(cur));
    return args;
}

/// What every parser must do with any input: options, or an exit code of 0 (help) or 2 (usage
/// error) with a message that ends in a newline. Anything else is a bug: abort, so the fuzzer
/// keeps the input.
template <class Result>
void check_outcome(const Result& r) {
    if (r) return;
    const auto& e = r.error();
    if ((e.code != 0 && e.code != 2) || e.message.empty() || e.message.back() != '\n')
        __builtin_trap();
}

} // namespace galay::fuzz
