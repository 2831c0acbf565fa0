// A multi-worker TCP echo server: one worker (thread + io_uring/epoll scheduler) per core, a
// SO_REUSEPORT listener on each, stopped cleanly by Ctrl-C (the README's Runtime example).
//   ./runtime_echo 9000    then: nc 127.0.0.1 9000
#include "galay_cli.hpp"

#include <galay/galay.hpp>

#include <array>
#include <csignal>
#include <cstdio>

using namespace std::chrono_literals;

galay::Task<void> echo(galay::TcpStream conn) { // runs on one worker, start to end
    std::array<char, 4096> buf;
    for (;;) {
        auto n = co_await conn.recv(buf).timeout(60s);
        if (!n || *n == 0) co_return;
        auto sent = co_await conn.send_all(std::span(buf.data(), *n));
        if (!sent) co_return;
    }
}

int main(int argc, char** argv) {
    std::uint16_t port = 9000;
    cli::App app{"A TCP echo server with a worker per core.", "runtime_echo"};
    app.add_option("port", port, "TCP port (0: any free port, printed)")
        ->check(galay::tools::whole(0, 65535))
        ->capture_default_str();
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "runtime_echo")) return *code;
    auto ctrl_c = galay::signal({SIGINT, SIGTERM}); // caught from here on
    galay::Runtime rt;                              // workers = hardware threads
    auto server = galay::serve(rt, galay::SocketAddr::any_v4(port), echo);
    if (!server) {
        std::fprintf(stderr, "runtime_echo: listen: %s\n", server.error().message().c_str());
        return 1;
    }
    std::printf("echo on %s, %u workers (%s)\n", server->local_addr().to_string().c_str(),
                rt.size(), rt.backend_name());
    std::fflush(stdout);
    (void)rt.block_on(galay::as_task(std::move(ctrl_c))); // wait for Ctrl-C
} // ~Runtime: stops accepting, cancels the connections, joins the workers
