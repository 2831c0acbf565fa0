// `--backend auto|io_uring|epoll`: the one piece of the shared command line that needs galay (the
// programs built on it include this; the baselines, which have no galay code, do not).
#pragma once

#include "galay_cli.hpp"

#include <galay/runtime.hpp>

#include <string>

namespace galay::tools {

/// Adds `--backend auto|io_uring|epoll` to `app`; the value lands in `*out`.
inline void add_backend_flag(CLI::App& app, Backend* out) {
    app.add_option_function<std::string>(
           "--backend",
           [out](const std::string& s) {
               auto b = parse_backend(s);
               if (!b) throw CLI::ValidationError("--backend", "must be auto, io_uring or epoll");
               *out = *b;
           },
           "I/O backend: auto (io_uring when the kernel allows it), io_uring, epoll")
        ->type_name("auto|io_uring|epoll");
}

} // namespace galay::tools
