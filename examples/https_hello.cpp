// The smallest HTTPS server (the README's, with a command line): every request on a connection
// gets "hello".
//   ./https_hello cert.pem key.pem [--port 8443]   then: curl --cacert ca.pem
//   https://localhost:8443/
// Exit 1: the certificate, the key or the port cannot be used; 2: bad arguments.
#include "galay_cli.hpp"

#include <galay/galay.hpp>
#include <galay/tls/stream.hpp>

#include <cstdio>
using namespace std::chrono_literals;

galay::Task<void> serve(const galay::tls::Context& ctx, galay::TcpStream conn) {
    auto tls = galay::tls::Stream::server(ctx, std::move(conn));
    auto hello = co_await tls.handshake().timeout(10s);
    if (!hello) co_return;
    galay::io::BufReader reader(tls);
    for (;;) {
        auto line = co_await reader.read_line().timeout(30s);
        if (!line) break;             // closed, truncated or idle
        if (!line->empty()) continue; // a request's head ends with an empty line
        auto sent = co_await tls.send_all(
            std::string_view("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n"));
        if (!sent) break;
    }
    (void)co_await tls.shutdown().timeout(1s); // close_notify
}

int main(int argc, char** argv) {
    std::string cert, key;
    std::uint16_t port = 8443;
    cli::App app{"The smallest HTTPS server: every request gets \"hello\".", "https_hello"};
    app.add_option("cert", cert, "certificate chain (PEM)")
        ->required()
        ->check(galay::tools::non_empty());
    app.add_option("key", key, "private key (PEM)")->required()->check(galay::tools::non_empty());
    app.add_option("--port", port, "TCP port (0: any free port, printed)")
        ->check(galay::tools::whole(0, 65535))
        ->capture_default_str();
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "https_hello")) return *code;
    try {
        auto ctx = galay::tls::Context::server({.cert_file = cert, .key_file = key});
        galay::block_on(
            [](const galay::tls::Context& ctx, std::uint16_t port) -> galay::Task<void> {
                auto listener = galay::TcpListener::bind(galay::SocketAddr::any_v4(port));
                if (!listener)
                    throw galay::Error(listener.error(), "listen on " + std::to_string(port));
                std::printf("https_hello: listening on %s\n",
                            listener->local_addr()->to_string().c_str());
                std::fflush(stdout);
                for (;;) {
                    auto conn = co_await listener->accept();
                    if (conn) galay::spawn(serve(ctx, std::move(*conn)));
                }
            }(ctx, port));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "https_hello: %s\n", e.what());
        return 1;
    }
}
