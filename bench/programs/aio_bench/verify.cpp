#include "verify.hpp"

#include <cstdio>
#include <cstring>

namespace aiob {

namespace {

constexpr unsigned kWords = kSectorSize / 8;

inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

inline uint64_t checksum(const uint64_t* w) {
    uint64_t h = 0x243f6a8885a308d3ull;
    for (unsigned i = 0; i < kWords - 1; ++i)
        h = (h ^ w[i]) * 0x100000001b3ull + (h >> 29);
    return mix(h);
}

std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

} // namespace

void stamp_block(void* buf, uint32_t len, uint64_t offset, uint64_t generation, uint64_t seed) {
    auto* p = static_cast<unsigned char*>(buf);
    for (uint32_t s = 0; s < len / kSectorSize; ++s) {
        uint64_t w[kWords];
        uint64_t so = offset + uint64_t{s} * kSectorSize;
        w[0] = kVerifyMagic;
        w[1] = so;
        w[2] = generation;
        w[3] = seed;
        uint64_t x = mix(so ^ mix(generation ^ mix(seed)));
        for (unsigned i = 4; i < kWords - 1; ++i) {
            x += 0x9e3779b97f4a7c15ull; // splitmix64
            w[i] = mix(x);
        }
        w[kWords - 1] = checksum(w);
        std::memcpy(p + uint64_t{s} * kSectorSize, w, kSectorSize);
    }
}

std::optional<VerifyFailure> check_block(const void* buf, uint32_t len, uint64_t offset,
                                         uint64_t expected_generation) {
    const auto* p = static_cast<const unsigned char*>(buf);
    std::optional<VerifyFailure> fail;
    for (uint32_t s = 0; s < len / kSectorSize; ++s) {
        uint64_t w[kWords];
        std::memcpy(w, p + uint64_t{s} * kSectorSize, kSectorSize);
        uint64_t so = offset + uint64_t{s} * kSectorSize;
        std::string why;
        if (w[0] != kVerifyMagic)
            why = "bad magic " + hex(w[0]) + " (sector not written by aio_bench --verify)";
        else if (w[1] != so)
            why = "offset stamp " + hex(w[1]) + " != " + hex(so) + " (misplaced data)";
        else if (w[kWords - 1] != checksum(w))
            why = "checksum mismatch (corrupted sector)";
        else if (expected_generation != 0 && w[2] != expected_generation)
            why = "generation " + hex(w[2]) + " != expected " + hex(expected_generation) +
                  " (stale data: a write was lost)";
        if (why.empty()) continue;
        if (!fail) fail = VerifyFailure{offset, so, 0, std::move(why)};
        ++fail->bad_sectors;
    }
    return fail;
}

} // namespace aiob
