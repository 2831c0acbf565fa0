#include "args/bench_udp.hpp"

#include "common/tool_support.hpp"

namespace galay::tools::bench_udp {
namespace {

void add_client_options(cli::App& app, ClientOptions& o) {
    app.add_option("-c,--clients", o.clients, "concurrent clients (one socket each)")
        ->check(cli::Range(1u, 100'000u))
        ->capture_default_str();
    app.add_option("-n,--messages", o.messages, "messages per client")
        ->check(cli::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
        ->capture_default_str();
    app.add_option("-s,--size", o.size, "message size in bytes")
        ->check(cli::Range(udp::kHeaderSize, std::size_t{65507}))
        ->capture_default_str();
    app.add_option("-P,--pipeline", o.pipeline, "datagrams in flight per client")
        ->check(cli::Range(1u, 4096u))
        ->capture_default_str();
    app.add_option("-d,--duration", o.duration,
                   "duration mode: send for this many seconds instead of -n messages")
        ->check(seconds(0.0, 86400.0));
    app.add_option("--warmup", o.warmup, "duration mode: seconds of traffic before measuring")
        ->check(seconds(0.0, 3600.0));
    app.add_option("--drain-timeout", o.drain,
                   "seconds to wait for the last echoes; later ones are lost")
        ->check(seconds(0.001, 3600.0))
        ->capture_default_str();
    app.add_option("--stall-timeout", o.stall,
                   "seconds without an echo before a client stops waiting for its window "
                   "(late echoes still count)")
        ->check(seconds(0.001, 3600.0))
        ->capture_default_str();
    app.add_option("--max-loss", o.max_loss, "exit with code 1 if the loss exceeds this percent")
        ->check(finite_range(0.0, 100.0));
    app.add_flag("--json", o.json, "print one JSON object instead of the text report");
    app.add_flag("!--no-gso", o.gso, "send every datagram as its own message (no UDP_SEGMENT)");
    app.add_flag("!--no-gro", o.gro, "receive every datagram on its own (no UDP_GRO)");
    add_backend_flag(app, &o.backend);
}

/// Each client holds `pipeline` datagrams to send and `pipeline` receive slots of size + 1
/// bytes; in message mode its loss ledger keeps one byte per datagram it will send.
std::optional<CliExit> check_client_memory(const ClientOptions& o) {
    auto buffers = checked_mul({o.clients, o.pipeline, 2 * o.size + 1});
    auto ledger =
        o.duration > 0 ? std::optional<std::uint64_t>(0) : checked_mul({o.clients, o.messages});
    std::optional<std::uint64_t> need;
    if (buffers && ledger) need = checked_add({*buffers, *ledger});
    return check_memory("bench_udp", need,
                        "-c " + std::to_string(o.clients) + " clients with -P " +
                            std::to_string(o.pipeline) + " x -s " + std::to_string(o.size) +
                            (o.duration > 0 ? "" : " and -n " + std::to_string(o.messages)),
                        o.duration > 0 ? "-c, -P or -s" : "-c, -n, -P or -s");
}

} // namespace

CliResult<Options> parse_args(std::vector<std::string> args) {
    cli::App app{"UDP echo benchmark on galay-kernel (server and clients in one process, or "
                 "split with the `server` / `client` subcommands)",
                 "bench_udp"};
    app.set_help_flag("--help", "Print this help and exit"); // -h is the host
    ClientOptions both;
    ServerOptions both_server;
    both.port = 0; // one process: any free port
    app.add_option("-h,--host", both.host, "address the server binds and the clients target")
        ->capture_default_str();
    app.add_option("-p,--port", both.port, "UDP port (0: any free port)")->capture_default_str();
    app.add_option("-w,--workers", both_server.workers, "server worker coroutines (sockets)")
        ->check(cli::Range(1u, 1024u))
        ->capture_default_str();
    add_client_options(app, both);

    ServerOptions so;
    cli::App* server = app.add_subcommand("server", "run only the echo server");
    server->set_help_flag("--help", "Print this help and exit");
    server->add_option("-p,--port", so.port, "UDP port (0: any free port, printed)")
        ->capture_default_str();
    server->add_option("-h,--host,--bind", so.bind, "address to bind")->capture_default_str();
    server->add_option("-w,--workers", so.workers, "worker coroutines (SO_REUSEPORT sockets)")
        ->check(cli::Range(1u, 1024u))
        ->capture_default_str();
    server->add_option("--rcvbuf", so.rcvbuf, "SO_RCVBUF per socket, bytes (capped by rmem_max)")
        ->check(cli::Range(0, 1 << 30))
        ->capture_default_str();
    server
        ->add_option("--buffer", so.buffer,
                     "largest datagram echoed whole, bytes (a longer one is echoed truncated, "
                     "reported, and fails the client's check)")
        ->check(cli::Range(std::size_t{1}, std::size_t{65535}))
        ->capture_default_str();
    server->add_flag("!--no-gso", so.gso,
                     "echo every datagram as its own message (no UDP_SEGMENT)");
    server->add_flag("!--no-gro", so.gro, "receive every datagram on its own (no UDP_GRO)");
    add_backend_flag(*server, &so.backend);

    ClientOptions co;
    unsigned co_workers = 0;
    cli::App* client = app.add_subcommand("client", "run only the clients against a server");
    client->set_help_flag("--help", "Print this help and exit");
    client->add_option("-h,--host", co.host, "server host")->capture_default_str();
    client->add_option("-p,--port", co.port, "server port")
        ->check(cli::Range(1, 65535))
        ->capture_default_str();
    client->add_option("-w,--workers", co_workers, "the server's worker count (for the report)");
    client
        ->add_option("--server-pid", co.server_pid,
                     "report the server's CPU time per packet (reads /proc/PID/stat)")
        ->check(cli::Range(1, 1 << 30));
    add_client_options(*client, co);
    app.require_subcommand(0, 1);
    if (auto e = tools::parse_args(app, std::move(args), "bench_udp")) return std::unexpected(*e);

    Options out;
    if (server->parsed()) {
        out.mode = Mode::server;
        out.server = so;
        return out;
    }
    if (client->parsed()) {
        out.mode = Mode::client;
        if (co_workers > 0) co.workers = co_workers;
        if (auto e = check_client_memory(co)) return std::unexpected(*e);
        out.client = co;
        return out;
    }
    out.mode = Mode::both;
    if (auto e = check_client_memory(both)) return std::unexpected(*e);
    both_server.backend = both.backend;
    both_server.gso = both.gso;
    both_server.gro = both.gro;
    both_server.buffer = std::max(both_server.buffer, both.size);
    both_server.bind = both.host; // the server listens on the address the clients use
    both_server.port = both.port;
    both.workers = both_server.workers;
    out.client = both;
    out.server = both_server;
    return out;
}

} // namespace galay::tools::bench_udp
