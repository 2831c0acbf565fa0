// libFuzzer target: aio_bench's command line (one argument per line).
#include "fuzz_args.hpp"

#include "config.hpp"

#include <cmath>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::vector<std::string> args = galay::fuzz::args_from_bytes(data, size);
    args.insert(args.begin(), "aio_bench");
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    auto r = aiob::parse_args(static_cast<int>(args.size()), argv.data());
    if (!r) {
        const auto& e = r.error();
        if ((e.exit_code != 0 && e.exit_code != 2) || e.message.empty()) __builtin_trap();
        return 0;
    }
    // A run with a time limit has one of at least 1 ns; one without has an I/O count.
    if (!std::isfinite(r->runtime_s) || r->runtime_s <= 0) __builtin_trap();
    if (r->runtime_ns() == 0 && r->ios == 0) __builtin_trap();
    if (r->depth == 0 || r->threads == 0 || r->block_size == 0) __builtin_trap();
    if (r->submit_batch == 0 || r->submit_batch > r->depth || r->complete_batch == 0 ||
        r->complete_batch > r->depth)
        __builtin_trap();
    return 0;
}
