// The benchmark tools' overflow-checked sizes and memory checks.
#include "common/cli.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

namespace galay::tools {

std::optional<std::uint64_t> checked_mul(std::initializer_list<std::uint64_t> factors) {
    std::uint64_t r = 1;
    for (std::uint64_t f : factors)
        if (__builtin_mul_overflow(r, f, &r)) return std::nullopt;
    return r;
}

std::optional<std::uint64_t> checked_add(std::initializer_list<std::uint64_t> terms) {
    std::uint64_t r = 0;
    for (std::uint64_t t : terms)
        if (__builtin_add_overflow(r, t, &r)) return std::nullopt;
    return r;
}

std::uint64_t memory_limit_bytes() {
    std::uint64_t limit = std::numeric_limits<std::uint64_t>::max();
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        limit = checked_mul({std::uint64_t(pages), std::uint64_t(page)}).value_or(limit);
    for (int res : {RLIMIT_AS, RLIMIT_DATA}) {
        rlimit rl{};
        if (::getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            limit = std::min<std::uint64_t>(limit, rl.rlim_cur);
    }
    return limit;
}

std::optional<CliExit> check_memory(const std::string& tool, std::optional<std::uint64_t> need,
                                    const std::string& what, const std::string& hint) {
    const std::uint64_t limit = memory_limit_bytes();
    if (need && *need <= limit) return std::nullopt;
    const std::string amount = need ? human_bytes(*need) : "more than 16 EiB";
    return CliExit{kExitUsage, tool + ": error: " + what + " needs " + amount +
                                   " of memory but this machine allows " + human_bytes(limit) +
                                   "; lower " + hint + "\n"};
}

} // namespace galay::tools
