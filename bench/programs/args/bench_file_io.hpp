// bench_file_io's command line and its parser (fuzzed by fuzz/bench_file_io_args_fuzz.cpp).
#pragma once

#include "common/cli.hpp"

#include <galay/runtime.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace galay::tools::bench_file_io {

struct Options {
    unsigned workers = 4;
    std::uint64_t ops = 1000;
    std::size_t block = 4096;
    unsigned batch = 1;
    std::string dir = "/tmp";
    bool direct = false;
    std::string prealloc = "fallocate"; // fallocate | zero | none
    bool json = false;
    bool fixed = false; // buffers registered with the io_uring ring (fs::FixedBuffer)
    Backend backend = Backend::automatic;
    std::optional<std::uint64_t> corrupt_block; // test hook: damage worker 0's block between phases

    /// Bytes of one worker's file (-n x -b) and of all of them; nullopt when it overflows.
    std::optional<std::uint64_t> file_bytes() const;
    std::optional<std::uint64_t> total_bytes() const;
};

/// The options, or what to print and the exit code (help: 0, usage error: 2). Never prints,
/// never exits. Accepts the classic single-dash "-batch". Refuses a run whose files would be
/// larger than 2^64 bytes, or whose buffers (-w x (--batch + 1) x -b) do not fit in memory.
CliResult<Options> parse_args(std::vector<std::string> args);

} // namespace galay::tools::bench_file_io
