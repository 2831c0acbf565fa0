// The file or block device under test, and the data-safety rules.
//
// - The path does not exist: its directory must; aio_bench creates the file (O_EXCL) with --size
//   (default 256 MiB) preallocated by fallocate, fills it with the --verify pattern when the run
//   reads or verifies (so reads hit real blocks, not unwritten extents), and removes it when the
//   Target is destroyed unless --keep.
// - The path exists (regular file or block device): it is opened read-only for read patterns. A
//   write pattern needs --allow-overwrite; without it nothing is opened for writing.
// - --direct on tmpfs is refused: since Linux 6.6 tmpfs accepts O_DIRECT but serves it from the
// page
//   cache, so the result would not be direct I/O. A filesystem that rejects O_DIRECT is reported.
// All errors are one line; the caller exits with code 1.
#pragma once

#include "config.hpp"

#include <cstdint>
#include <expected>
#include <string>

namespace aiob {

class Target {
public:
    Target() = default;
    Target(Target&& o) noexcept { *this = std::move(o); }
    Target& operator=(Target&& o) noexcept;
    Target(const Target&) = delete;
    Target& operator=(const Target&) = delete;
    ~Target();

    std::string path;
    int fd = -1;
    bool created = false;
    bool keep = false;
    bool block_device = false;
    uint64_t file_size = 0;  // size of the file or device
    uint64_t size = 0;       // bytes the run uses, from offset 0; a multiple of the block size
    uint32_t dio_align = 0;  // O_DIRECT offset alignment (logical block size), 0 = unknown
    std::string device;      // e.g. "/dev/vda" (the device holding the file, or the device itself)
    std::string fs_type;     // e.g. "ext4", "tmpfs", "block device"
    double fill_seconds = 0; // time spent filling a created file
};

std::expected<Target, std::string> open_target(const Config& cfg, uint64_t seed);

} // namespace aiob
