// The smallest HTTPS server (the README's): every request on a connection gets "hello".
//   ./https_hello cert.pem key.pem       then: curl --cacert ca.pem https://localhost:8443/
#include <galay/galay.hpp>
#include <galay/tls/stream.hpp>
using namespace std::chrono_literals;

galay::Task<void> serve(const galay::tls::Context& ctx, galay::TcpStream conn) {
    galay::tls::Stream tls = galay::tls::Stream::server(ctx, std::move(conn));
    if (!co_await tls.handshake().timeout(10s)) co_return;
    galay::io::BufReader reader(tls);
    while (auto line = co_await reader.read_line().timeout(30s)) {
        if (!line->empty()) continue; // a request's head ends with an empty line
        std::string_view answer = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n";
        if (!co_await tls.send_all(answer).timeout(10s)) break;
    }
    (void)co_await tls.shutdown().timeout(1s); // close_notify
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    auto ctx = galay::tls::Context::server({.cert_file = argv[1], .key_file = argv[2]});
    galay::block_on([&]() -> galay::Task<void> {
        auto listener = galay::TcpListener::bind(*galay::SocketAddr::parse("0.0.0.0:8443"));
        if (!listener) throw galay::Error(listener.error(), "listen on 8443");
        while (auto conn = co_await listener->accept())
            galay::spawn(serve(ctx, std::move(*conn)));
    }());
}
