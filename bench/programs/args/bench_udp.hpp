// bench_udp's command line and its parser (fuzzed by fuzz/bench_udp_args_fuzz.cpp).
#pragma once

#include "common/cli.hpp"
#include "common/udp_echo.hpp"

#include <galay/runtime.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace galay::tools::bench_udp {

struct ServerOptions {
    std::string bind = "0.0.0.0";
    std::uint16_t port = 8080;
    unsigned workers = 4;
    int rcvbuf = 4 << 20;
    std::size_t buffer = 2048; // raised to the message size in the one-process mode
    bool gso = true;
    bool gro = true;
    Backend backend = Backend::automatic;
};

struct ClientOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 8080;
    unsigned clients = 100;
    std::uint64_t messages = 1000;
    std::size_t size = 256;
    unsigned pipeline = 10;
    double duration = 0;
    double warmup = 0;
    double drain = 1.0;
    double stall = 0.2;
    std::optional<unsigned> workers; // for the report (split mode: the server's own -w)
    int server_pid = 0;
    double max_loss = -1; // percent; < 0: loss never fails the run
    bool json = false;
    bool gso = true;
    bool gro = true;
    Backend backend = Backend::automatic;
};

enum class Mode { both, server, client };

struct Options {
    Mode mode = Mode::both;
    ClientOptions client; // both, client
    ServerOptions server; // both (bind = the client's host, port = the client's port), server
};

/// The options, or what to print and the exit code (help: 0, usage error: 2). Never prints,
/// never exits. Refuses a run whose client buffers and loss ledgers do not fit in memory.
CliResult<Options> parse_args(std::vector<std::string> args);

} // namespace galay::tools::bench_udp
