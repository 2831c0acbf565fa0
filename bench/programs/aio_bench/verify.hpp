// --verify data pattern.
//
// Every 512-byte sector aio_bench writes with --verify (or when it fills a file it created) holds
// 64 little-endian words:
//   w[0]      magic "AIOBVRFY"
//   w[1]      the sector's own byte offset in the file
//   w[2]      generation: which write put it there (run-unique; the fill pass uses 0)
//   w[3]      seed of the run that wrote it
//   w[4..62]  pseudo-random payload derived from (offset, generation, seed)
//   w[63]     checksum of w[0..62]
// A read checks magic, offset and checksum of every sector, and, for a block this run wrote, that
// the generation is the one of the last write to it (catches lost or stale writes). Sectors are
// stamped independently of the block size, so a file written with one -b can be verified with
// another.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace aiob {

constexpr uint32_t kSectorSize = 512;
constexpr uint64_t kVerifyMagic = 0x59465256424f4941ull; // "AIOBVRFY" in memory order

// Stamps len bytes (a multiple of 512) that will be written at file offset `offset`.
void stamp_block(void* buf, uint32_t len, uint64_t offset, uint64_t generation, uint64_t seed);

struct VerifyFailure {
    uint64_t offset;        // byte offset of the block that was read
    uint64_t sector_offset; // byte offset of the first bad sector
    unsigned bad_sectors;   // how many of the block's sectors are bad
    std::string reason;     // for the first bad sector
};

// Checks a block read from `offset`. expected_generation: 0 = any generation is accepted.
std::optional<VerifyFailure> check_block(const void* buf, uint32_t len, uint64_t offset,
                                         uint64_t expected_generation);

} // namespace aiob
