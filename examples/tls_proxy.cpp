// A TLS-terminating proxy on galay-kernel: TLS in, plain TCP to the upstream. Each connection is
// a TLS handshake, then io::copy_bidirectional between the TLS stream and a fresh connection to
// the upstream (half-close passed on both ways: the client's close_notify becomes a TCP
// half-close upstream, and the upstream's end becomes close_notify).
//
//   tls_proxy 8443 127.0.0.1:8080 --tls-cert cert.pem --tls-key key.pem [--idle 60]
//             [--max-handshakes 1024]
//   then: curl --cacert ca.pem https://localhost:8443/
//
// At most --max-handshakes TLS handshakes are in progress at once: a connection accepted beyond
// them is closed at once (a line on stderr at most once a second says how many).
//
// Exit 1: the port, the certificate or the key cannot be used; 2: bad arguments.
#include "galay_cli_backend.hpp"

#include <galay/galay.hpp>
#include <galay/tls/stream.hpp>

#include <csignal>
#include <cstdio>
#include <string>

using namespace std::chrono_literals;

namespace {

/// The handshakes in progress (one thread: no atomics), bounded by --max-handshakes: a crowd of
/// clients that connect and say nothing holds at most `limit` TLS states (~60 KB each) until the
/// handshake timeout; a connection accepted beyond them is closed at once.
struct Handshakes {
    std::size_t in_progress = 0, limit = 1024;
    std::uint64_t refused = 0, reported = 0;
    std::chrono::steady_clock::time_point last_report{};

    /// A refusal, reported on stderr at most once a second (with how many since the last line).
    void refuse() {
        ++refused;
        const auto now = std::chrono::steady_clock::now();
        if (now - last_report < 1s) return;
        std::fprintf(stderr,
                     "tls_proxy: refused %llu connection(s): %zu handshakes in progress "
                     "(--max-handshakes), %llu refused in all\n",
                     static_cast<unsigned long long>(refused - reported), in_progress,
                     static_cast<unsigned long long>(refused));
        reported = refused;
        last_report = now;
    }
};

galay::Task<void> relay(const galay::tls::Context& ctx, galay::TcpStream client,
                        galay::SocketAddr upstream, std::chrono::seconds idle, Handshakes& hands) {
    (void)client.set_nodelay(true); // records and answers go out as they are made
    galay::tls::Stream tls = galay::tls::Stream::server(ctx, std::move(client));
    auto hs = co_await tls.handshake().timeout(10s);
    --hands.in_progress; // (taken by serve() before this task started)
    if (!hs) {
        std::fprintf(stderr, "tls_proxy: handshake: %s\n",
                     std::string(tls.last_error().empty() ? hs.error().message() : tls.last_error())
                         .c_str());
        co_return;
    }
    auto server = co_await galay::TcpStream::connect(upstream).timeout(5s);
    if (!server) {
        std::fprintf(stderr, "tls_proxy: connect %s: %s\n", upstream.to_string().c_str(),
                     server.error().message().c_str());
        co_return;
    }
    (void)server->set_nodelay(true);
    auto r = co_await galay::io::copy_bidirectional(tls, *server, {.idle_timeout = idle});
    if (!r && r.error() == std::errc::timed_out)
        std::fprintf(stderr, "tls_proxy: idle for %llds, closed\n",
                     static_cast<long long>(idle.count()));
    else if (!r)
        std::fprintf(stderr, "tls_proxy: connection ended: %s\n", r.error().message().c_str());
}

galay::Task<void> serve(const galay::tls::Context& ctx, galay::SocketAddr listen,
                        galay::SocketAddr upstream, std::chrono::seconds idle,
                        std::size_t max_handshakes) {
    Handshakes hands{.limit = max_handshakes};
    auto listener = galay::TcpListener::bind(listen);
    if (!listener)
        throw galay::Error(listener.error(), "tls_proxy: listen on " + listen.to_string());
    std::printf("tls_proxy: %s -> %s (%s)\n", listener->local_addr()->to_string().c_str(),
                upstream.to_string().c_str(), galay::current_scheduler().backend_name());
    std::fflush(stdout);
    for (;;) {
        auto conn = co_await listener->accept();
        if (!conn) continue;
        if (hands.in_progress >= hands.limit) {
            hands.refuse(); // (*conn closes here)
            continue;
        }
        ++hands.in_progress;
        galay::spawn(relay(ctx, std::move(*conn), upstream, idle, hands));
    }
}

} // namespace

int main(int argc, char** argv) {
    std::uint16_t port = 0;
    std::string upstream_text, cert, key;
    long idle = 60;
    cli::App app{"A TLS-terminating proxy: TLS in, plain TCP to the upstream.", "tls_proxy"};
    app.add_option("listen-port", port, "port to listen on (0: any free port, printed)")
        ->required()
        ->check(galay::tools::whole(0, 65535));
    app.add_option("upstream", upstream_text, "the upstream's IP:PORT")
        ->required()
        ->check(galay::tools::socket_address());
    app.add_option("--tls-cert", cert, "certificate chain (PEM)")
        ->required()
        ->check(galay::tools::non_empty());
    app.add_option("--tls-key", key, "private key (PEM)")
        ->required()
        ->check(galay::tools::non_empty());
    app.add_option("--idle", idle,
                   "close a connection idle for this many seconds (at most 30 days)")
        ->check(galay::tools::whole(1, 30 * 86400))
        ->capture_default_str();
    long max_handshakes = 1024;
    app.add_option("--max-handshakes", max_handshakes,
                   "handshakes in progress at once (beyond: closed at once)")
        ->check(galay::tools::whole(1, 1000000))
        ->capture_default_str();
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "tls_proxy")) return *code;
    const galay::SocketAddr upstream = *galay::SocketAddr::parse(upstream_text);
    std::signal(SIGPIPE, SIG_IGN);
    try {
        const galay::tls::Context ctx =
            galay::tls::Context::server({.cert_file = cert, .key_file = key});
        galay::block_on(serve(ctx, galay::SocketAddr::any_v4(port), upstream,
                              std::chrono::seconds(idle),
                              static_cast<std::size_t>(max_handshakes)));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
