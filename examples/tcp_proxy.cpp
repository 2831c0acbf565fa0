// A TCP proxy on galay-kernel: every connection to the listening port is joined to a fresh
// connection to the upstream, bytes are copied both ways (half-close passed on) until both sides
// are done, and a connection idle for --idle seconds is dropped. Both sockets have TCP_NODELAY
// (galay's default for accepted and connected streams): a relayed message's last short segment
// must not wait for the peer's delayed ACK.
// Between two TCP sockets io::copy_bidirectional splices (the bytes never enter user space);
// --copy makes it copy through a buffer instead (bench/studies/relay.py compares the two).
//   ./tcp_proxy 9001 127.0.0.1:9000 [--idle 60] [--copy]     then: nc 127.0.0.1 9001
// Exit 1: the port cannot be bound; 2: bad arguments.
#include "galay_cli_backend.hpp"

#include <galay/galay.hpp>

#include <csignal>
#include <cstdio>
#include <string>

using namespace std::chrono_literals;

bool g_copy = false; // --copy: no splice

galay::Task<void> relay(galay::TcpStream client, galay::SocketAddr upstream,
                        std::chrono::seconds idle) {
    auto server = co_await galay::TcpStream::connect(upstream).timeout(5s);
    if (!server) {
        std::fprintf(stderr, "tcp_proxy: connect %s: %s\n", upstream.to_string().c_str(),
                     server.error().message().c_str());
        co_return;
    }
    auto r = co_await galay::io::copy_bidirectional(client, *server,
                                                    {.idle_timeout = idle, .splice = !g_copy});
    if (!r && r.error() == std::errc::timed_out)
        std::fprintf(stderr, "tcp_proxy: idle for %llds, closed\n",
                     static_cast<long long>(idle.count()));
    else if (!r)
        std::fprintf(stderr, "tcp_proxy: connection ended: %s\n", r.error().message().c_str());
}

galay::Task<void> serve(galay::SocketAddr listen, galay::SocketAddr upstream,
                        std::chrono::seconds idle) {
    auto listener = galay::TcpListener::bind(listen);
    if (!listener)
        throw galay::Error(listener.error(), "tcp_proxy: listen on " + listen.to_string());
    std::printf("tcp_proxy: %s -> %s (%s)\n", listener->local_addr()->to_string().c_str(),
                upstream.to_string().c_str(), galay::current_scheduler().backend_name());
    std::fflush(stdout);
    for (;;) {
        auto conn = co_await listener->accept();
        if (conn) galay::spawn(relay(std::move(*conn), upstream, idle));
    }
}

int main(int argc, char** argv) {
    std::uint16_t port = 0;
    std::string upstream_text;
    long idle = 60;
    cli::App app{"A TCP proxy: each connection joined to a new one to the upstream.", "tcp_proxy"};
    app.add_option("listen-port", port, "port to listen on (0: any free port, printed)")
        ->required()
        ->check(galay::tools::whole(0, 65535));
    app.add_option("upstream", upstream_text, "the upstream's IP:PORT")
        ->required()
        ->check(galay::tools::socket_address());
    app.add_option("--idle", idle,
                   "close a connection idle for this many seconds (at most 30 days)")
        ->check(galay::tools::whole(1, 30 * 86400))
        ->capture_default_str();
    app.add_flag("--copy", g_copy, "copy through a buffer instead of splicing");
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "tcp_proxy")) return *code;
    const galay::SocketAddr upstream = *galay::SocketAddr::parse(upstream_text);
    std::signal(SIGPIPE, SIG_IGN);
    try {
        galay::block_on(
            serve(galay::SocketAddr::any_v4(port), upstream, std::chrono::seconds(idle)));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
