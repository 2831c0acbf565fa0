// A complete TCP echo server on galay-kernel (the README's example).
//   ./echo_server 9000    then: nc 127.0.0.1 9000
//   ./echo_server 0       any free port (printed)
// Exit codes: 1 when the port cannot be bound, 2 for a bad argument.
#include <galay/galay.hpp>

#include <array>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string_view>

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

/// "9000" -> 9000; nullopt for anything but a whole number 0..65535.
std::optional<std::uint16_t> parse_port(std::string_view s) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v > 65535)
        return std::nullopt;
    return static_cast<std::uint16_t>(v);
}

int main(int argc, char** argv) {
    std::optional<std::uint16_t> port = 9000;
    if (argc > 2 || (argc == 2 && !(port = parse_port(argv[1])))) {
        std::fprintf(stderr,
                     "usage: echo_server [port]   (port: 0..65535, 0 = any free port; "
                     "got '%s')\n",
                     argc > 1 ? argv[1] : "");
        return 2;
    }
    try {
        galay::block_on(serve(*port));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "echo_server: %s\n", e.what());
        return 1;
    }
}
