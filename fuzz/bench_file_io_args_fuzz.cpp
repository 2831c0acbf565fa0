// libFuzzer target: bench_file_io's command line, "-batch" included (one argument per line).
#include "fuzz_args.hpp"

#include "args/bench_file_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto r = galay::tools::bench_file_io::parse_args(galay::fuzz::args_from_bytes(data, size));
    galay::fuzz::check_outcome(r);
    if (r) {
        // What the run computes from the options must not overflow.
        if (!r->file_bytes() || !r->total_bytes()) __builtin_trap();
        if (r->workers == 0 || r->ops == 0 || r->block == 0 || r->batch == 0) __builtin_trap();
    }
    return 0;
}
