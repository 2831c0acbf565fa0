// Helpers shared by the file tests: deterministic block contents, and counting the threads of the
// epoll file engine's blocking pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace galay::test {

/// Deterministic bytes for block `block` of stream `seed`.
inline void fill_pattern(std::span<std::byte> buf, std::uint64_t seed, std::uint64_t block) {
    std::uint64_t x = (seed << 32 ^ block) * 0x9E3779B97F4A7C15ull + 1;
    for (std::byte& b : buf) {
        x ^= x >> 29;
        x *= 0xBF58476D1CE4E5B9ull;
        b = static_cast<std::byte>(x >> 56);
    }
}

inline bool has_pattern(std::span<const std::byte> buf, std::uint64_t seed, std::uint64_t block) {
    std::vector<std::byte> want(buf.size());
    fill_pattern(want, seed, block);
    return std::memcmp(want.data(), buf.data(), buf.size()) == 0;
}

/// Threads of this process named `name` (the blocking pool's threads are "galay-blocking").
inline int threads_named(const std::string& name) {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(e.path() / "comm");
        std::string c;
        if (std::getline(comm, c) && c == name) ++n;
    }
    return n;
}

} // namespace galay::test
