// libFuzzer target: bench_client's command line (one argument per input line).
#include "fuzz_args.hpp"

#include "args/bench_client.hpp"

#include <cmath>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto r = galay::tools::bench_client::parse_args(galay::fuzz::args_from_bytes(data, size));
    galay::fuzz::check_outcome(r);
    if (r) {
        const auto& o = *r;
        if (!std::isfinite(o.duration) || o.duration < 0.1 || !std::isfinite(o.warmup) ||
            o.warmup < 0 || !std::isfinite(o.op_timeout) || o.op_timeout < 0.01 ||
            o.connections == 0 || o.size == 0 || o.pipeline == 0 || o.port == 0)
            __builtin_trap();
    }
    return 0;
}
