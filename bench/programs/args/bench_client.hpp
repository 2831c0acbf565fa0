// bench_client's command line and its parser (fuzzed by fuzz/bench_client_args_fuzz.cpp).
#pragma once

#include "common/cli.hpp"

#include <galay/runtime.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace galay::tools::bench_client {

struct Options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;
    unsigned connections = 100;
    std::size_t size = 256;
    double duration = 10;
    unsigned pipeline = 1;
    double warmup = 0;
    int server_pid = 0;
    double op_timeout = 10;
    bool json = false;
    Backend backend = Backend::automatic;
};

/// The options, or what to print and the exit code (help: 0, usage error: 2). Never prints,
/// never exits. Refuses a run whose buffers (connections x size x pipeline, sent and received)
/// do not fit in this machine's memory.
CliResult<Options> parse_args(std::vector<std::string> args);

} // namespace galay::tools::bench_client
