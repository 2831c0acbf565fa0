// A complete TCP echo server on galay-kernel (the README's example).
//   ./echo_server 9000    then: nc 127.0.0.1 9000
//   ./echo_server 0       any free port (printed)
// Exit codes: 1 when the port cannot be bound, 2 for a bad argument.
#include "galay_cli.hpp"

#include <galay/galay.hpp>

#include <array>
#include <cstdio>

using namespace std::chrono_literals;

galay::Task<void> echo(galay::TcpStream conn) {
    std::array<char, 4096> buf;
    for (;;) {
        auto n = co_await conn.recv(buf).timeout(60s); // idle connections are dropped
        if (!n || *n == 0) co_return;                  // error, timeout or peer closed
        auto sent = co_await conn.send_all(std::span(buf.data(), *n));
        if (!sent) co_return;
    }
}

galay::Task<void> serve(std::uint16_t port) {
    auto listener = galay::TcpListener::bind(galay::SocketAddr::any_v4(port));
    if (!listener) throw galay::Error(listener.error(), "bind");
    std::printf("echo server on port %u (%s)\n", listener->local_addr()->port(),
                galay::Scheduler::current()->backend_name());
    std::fflush(stdout);
    for (;;) {
        auto conn = co_await listener->accept();
        if (conn) galay::spawn(echo(std::move(*conn)));
    }
}

int main(int argc, char** argv) {
    std::uint16_t port = 9000;
    cli::App app{"A TCP echo server.", "echo_server"};
    app.add_option("port", port, "TCP port (0: any free port, printed)")
        ->check(galay::tools::whole(0, 65535))
        ->capture_default_str();
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "echo_server")) return *code;
    try {
        galay::block_on(serve(port));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "echo_server: %s\n", e.what());
        return 1;
    }
}
