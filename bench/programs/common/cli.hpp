// What the benchmark tools' command lines add to the shared one (cli/galay_cli.hpp: exit codes,
// parse_args, the strict number validators), with no galay code (aio_bench uses it too).
//
//   Memory a run needs is multiplied with overflow checks (checked_mul) and compared with what
//   the machine has (memory_limit_bytes) before anything is allocated.
#pragma once

#include "galay_cli.hpp"
#include "measure/format.hpp" // human_bytes, and every other number format

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace galay::tools {

/// The product of `factors`, or nullopt when it does not fit in 64 bits.
std::optional<std::uint64_t> checked_mul(std::initializer_list<std::uint64_t> factors);
/// The sum, or nullopt on overflow.
std::optional<std::uint64_t> checked_add(std::initializer_list<std::uint64_t> terms);

/// The memory a run may plan to use: physical RAM, or RLIMIT_AS / RLIMIT_DATA when lower.
std::uint64_t memory_limit_bytes();

/// Nullopt when `need` bytes (nullopt: more than 2^64) fit in memory_limit_bytes(); otherwise
/// the usage error "<tool>: error: <what> needs N of memory but this machine has M; lower <hint>".
std::optional<CliExit> check_memory(const std::string& tool, std::optional<std::uint64_t> need,
                                    const std::string& what, const std::string& hint);

} // namespace galay::tools
