// The pieces of the shared command line that need galay: `--backend auto|io_uring|epoll|kqueue` and
// an IP:PORT value (the programs built on galay include this; the baselines, which have no galay
// code, do not).
#pragma once

#include "galay_cli.hpp"

#include <galay/net/socket_addr.hpp>
#include <galay/runtime.hpp>

#include <string>

namespace galay::tools {

/// Adds `--backend auto|io_uring|epoll|kqueue` to `app`; the value lands in `*out`.
inline void add_backend_flag(cli::App& app, Backend* out) {
    app.add_option_function<std::string>(
           "--backend",
           [out](const std::string& s) {
               auto b = parse_backend(s);
               if (!b)
                   throw cli::ValidationError("--backend",
                                              "must be auto, io_uring, epoll or kqueue");
               *out = *b;
           },
           "I/O backend: auto (io_uring when the kernel allows it, else epoll; kqueue on macOS "
           "and FreeBSD), io_uring, epoll, kqueue")
        ->type_name("auto|io_uring|epoll|kqueue");
}

/// "IP:PORT" with a port 1..65535 (galay::SocketAddr::parse), as a CLI11 validator.
inline cli::Validator socket_address() {
    return cli::Validator(
        [](std::string& s) -> std::string {
            auto a = SocketAddr::parse(s);
            if (!a || a->port() == 0) return "'" + s + "' is not IP:PORT (port 1..65535)";
            return {};
        },
        "IP:PORT", "socket-address");
}

} // namespace galay::tools
