// libFuzzer target: bench_udp's command line, its subcommands included (one argument per line).
#include "fuzz_args.hpp"

#include "args/bench_udp.hpp"

#include <cmath>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto r = galay::tools::bench_udp::parse_args(galay::fuzz::args_from_bytes(data, size));
    galay::fuzz::check_outcome(r);
    if (r) {
        const auto& c = r->client;
        for (double s : {c.duration, c.warmup, c.drain, c.stall, c.max_loss})
            if (!std::isfinite(s)) __builtin_trap();
        if (c.duration != 0 && c.duration < 1e-9) __builtin_trap(); // would be 0 ns
        if (c.drain < 0.001 || c.stall < 0.001) __builtin_trap();
        if (r->mode != galay::tools::bench_udp::Mode::server &&
            (c.clients == 0 || c.pipeline == 0 || c.size < galay::tools::udp::kHeaderSize))
            __builtin_trap();
        if (r->mode != galay::tools::bench_udp::Mode::client && r->server.workers == 0)
            __builtin_trap();
    }
    return 0;
}
