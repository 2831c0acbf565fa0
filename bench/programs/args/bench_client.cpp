#include "args/bench_client.hpp"

#include "common/tool_support.hpp"

namespace galay::tools::bench_client {

CliResult<Options> parse_args(std::vector<std::string> args) {
    Options o;
    cli::App app{"TCP echo benchmark client on galay-kernel", "bench_client"};
    app.set_help_flag("--help", "Print this help and exit"); // -h is the host, as in our reports
    app.add_option("-h,--host", o.host, "server host")->capture_default_str();
    app.add_option("-p,--port", o.port, "server port")
        ->check(cli::Range(1, 65535))
        ->capture_default_str();
    app.add_option("-c,--connections", o.connections, "concurrent connections")
        ->check(cli::Range(1u, 1'000'000u))
        ->capture_default_str();
    app.add_option("-s,--size", o.size, "message size in bytes")
        ->check(cli::Range(std::size_t{1}, std::size_t{64} << 20))
        ->capture_default_str();
    app.add_option("-d,--duration", o.duration, "measured duration in seconds")
        ->check(seconds(0.1, 86400.0))
        ->capture_default_str();
    app.add_option("-P,--pipeline", o.pipeline, "messages in flight per connection")
        ->check(cli::Range(1u, 4096u))
        ->capture_default_str();
    app.add_option("--warmup", o.warmup, "seconds of traffic before measuring")
        ->check(seconds(0.0, 3600.0))
        ->capture_default_str();
    app.add_option("--server-pid", o.server_pid,
                   "report the server's CPU time per request (reads /proc/PID/stat)")
        ->check(cli::Range(1, 1 << 30));
    app.add_option("--timeout", o.op_timeout, "seconds before a silent server is an error")
        ->check(seconds(0.01, 3600.0))
        ->capture_default_str();
    app.add_flag("--json", o.json, "print one JSON object instead of the text report");
    add_backend_flag(app, &o.backend);
    if (auto e = tools::parse_args(app, std::move(args), "bench_client"))
        return std::unexpected(*e);

    // Each connection sends and receives `pipeline` messages at once, from buffers of its own.
    if (auto e =
            check_memory("bench_client", checked_mul({o.connections, o.size, o.pipeline, 2}),
                         "-c " + std::to_string(o.connections) + " x -s " + std::to_string(o.size) +
                             " x -P " + std::to_string(o.pipeline) + " (sent and received)",
                         "-c, -s or -P"))
        return std::unexpected(*e);
    return o;
}

} // namespace galay::tools::bench_client
