// A complete TCP echo server on galay-kernel (the README's example).
//   ./echo_server 9000    then: nc 127.0.0.1 9000
#include <galay/galay.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>

using namespace std::chrono_literals;

galay::Task<void> echo(galay::TcpStream conn) {
    std::array<char, 4096> buf;
    for (;;) {
        auto n = co_await conn.recv(buf).timeout(60s); // idle connections are dropped
        if (!n || *n == 0) co_return;                  // error, timeout or peer closed
        if (!co_await conn.send_all(std::span(buf.data(), *n))) co_return;
    }
}

galay::Task<void> serve(std::uint16_t port) {
    auto listener = galay::TcpListener::bind(galay::SocketAddr::any_v4(port));
    if (!listener) throw galay::Error(listener.error(), "bind");
    std::printf("echo server on port %u (%s)\n", port, galay::Scheduler::current()->backend_name());
    for (;;)
        if (auto conn = co_await listener->accept()) galay::spawn(echo(std::move(*conn)));
}

int main(int argc, char** argv) {
    galay::block_on(serve(argc > 1 ? static_cast<std::uint16_t>(std::atoi(argv[1])) : 9000));
}
