// The HTTP/1.1 server behind http_server (apps/http/main.cpp), as a unit the tests run in-process.
//
//     auto server = http::Server::create({.root = "/srv/www"});
//     if (!server) ...;                                  // the root directory cannot be opened
//     galay::Runtime rt;                                 // N workers
//     auto listening = galay::serve(rt, galay::SocketAddr::any_v4(8080),
//         [s = *server](galay::TcpStream c) { return s->serve_connection(std::move(c)); });
//   or, on one thread: galay::block_on(server->accept_loop(*listener));
//
// GET / answers a fixed small plain-text body (as the Go server of the io_uring survey's HTTP
// comparison does); any other path is a file under `root` (404 without a root or a file; 403 for
// a FIFO, socket or device: opened without blocking, checked with fstat, never read), a file
// larger than `write_buffer` sent with sendfile on plain TCP (fs::File::send_to), one `Range` of
// it answered 206 (past the end: 416; malformed or several ranges: the whole file, see
// http/range.hpp); a file that shrinks while it is sent ends its answer short and closes the
// connection. Content-Length, HEAD, keep-alive, pipelining (any number of requests in one burst,
// answers coalesced into one send per batch of requests), `Connection: close`, a Date header
// formatted once a second per thread, and the limits of http::Limits answered with
// 400/413/414/431/501/505 (then the connection is closed, after a lingering read so the answer is
// not lost to a reset). A connection idle between requests is closed after `keepalive_timeout`; one
// that starts a request and does not finish its head within `header_timeout` gets 408.
//
// Receiving: every receive is a recv_pooled (a buffer of the scheduler's pool; on io_uring one
// multishot recv per connection), and the requests in it are parsed where they arrived (views, no
// copy); the buffer goes back once its bytes are parsed and answered. Only the start of a request
// that has not all arrived is copied, into an io::BufReader (2 KiB on first use, grown toward
// read_buffer as a head needs), with the next receive's bytes behind it until it is whole. Answers
// go into one io::BufWriter (2 KiB on first use, grown toward write_buffer for a file; an idle
// writer gives its block back). Nothing is allocated per request, heads are parsed into one Request
// per thread, and a connection waiting for its next request holds no read or write buffer:
// bench/studies/idle_memory.py measures what it costs (~2 KB on epoll).
#pragma once

#include "http/request_parser.hpp"

#include <galay/galay.hpp>
#include <galay/tls/stream.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace http {

struct ServerConfig {
    std::string root{}; ///< directory of static files ("": none, every path but / is 404)
    Limits limits{};
    std::chrono::milliseconds keepalive_timeout{60'000};
    std::chrono::milliseconds header_timeout{10'000};
    std::chrono::milliseconds write_timeout{10'000};
    std::size_t read_buffer = 16 * 1024;
    std::size_t write_buffer = 16 * 1024;
    std::string body = "Hello, World!"; ///< the answer to GET /
    /// How a file larger than `write_buffer` reaches a plain TCP connection: sendfile (from the
    /// page cache, no copy into user space) or copy (read into the write buffer, then send; what
    /// TLS connections always do).
    enum class FileSend : std::uint8_t { sendfile, copy };
    FileSend file_send = FileSend::sendfile;
    /// HTTPS: every connection is TLS with this server context (none: plain HTTP).
    std::optional<galay::tls::Context> tls{};
    /// HTTPS: TLS handshakes in progress at once (all workers together). A connection accepted
    /// beyond it is closed at once, before any TLS state is made for it: a crowd of clients that
    /// connect and say nothing holds at most this many handshakes (~60 KB each) until
    /// `header_timeout`.
    std::size_t max_handshakes = 1024;
};

/// What the server did, for tests and the exit summary (all workers together, at one moment).
struct ServerStats {
    std::uint64_t requests = 0;
    std::uint64_t refused = 0;  ///< answered 4xx/5xx from the parser
    std::uint64_t timeouts = 0; ///< keep-alive idle and 408
    std::uint64_t connections = 0;
    std::uint64_t handshakes_refused = 0; ///< TLS: closed at once, max_handshakes in progress
    std::uint64_t handshakes_in_progress = 0;
};

class Server {
public:
    /// Opens `config.root` (when set). Fails when it is not a readable directory.
    static galay::Result<std::shared_ptr<Server>> create(ServerConfig config);
    ~Server();

    /// Accept connections on `listener` and serve each in a task of its own, forever (until
    /// cancelled). Runs on the calling thread's scheduler (a single-threaded server; on a
    /// galay::Runtime, give serve_connection to galay::serve instead).
    [[nodiscard]] galay::Task<void> accept_loop(galay::TcpListener& listener);
    /// Serve one connection until it closes (the handler for galay::serve).
    [[nodiscard]] galay::Task<void> serve_connection(galay::TcpStream conn);

    const ServerConfig& config() const noexcept { return config_; }
    /// The counters of every worker added up (relaxed reads: a snapshot, exact once idle).
    ServerStats stats() const noexcept;

private:
    explicit Server(ServerConfig config) noexcept
        : config_(std::move(config)) {}

    /// Counters written by one thread each, so that a request costs no cache-line transfer
    /// between workers: slot w + 1 for Runtime worker w, slot 0 for any other thread.
    struct alignas(64) Counters {
        std::atomic<std::uint64_t> requests{0};
        std::atomic<std::uint64_t> refused{0};
        std::atomic<std::uint64_t> timeouts{0};
        std::atomic<std::uint64_t> connections{0};
        std::atomic<std::uint64_t> handshakes_refused{0};
    };
    static constexpr std::size_t kSlots = 257;
    Counters& my_counters() noexcept;

    ServerConfig config_;
    std::uint64_t id_ = 0; // unique in the process: the key of the fixed answers' cache
    int root_fd_ = -1;
    std::unique_ptr<Counters[]> counters_{new Counters[kSlots]};
    std::atomic<std::size_t> handshakes_{0}; // in progress, every worker's (max_handshakes)

    galay::Task<void> serve_plain(galay::TcpStream conn);
    /// The same requests over TLS (config.tls): handshake, then the connection as above.
    galay::Task<void> serve_tls(galay::TcpStream conn);

    template <class S>
    friend class Connection;
};

/// The value of a Date header for `t` ("Sun, 06 Nov 1994 08:49:37 GMT", 29 characters).
std::string format_http_date(std::time_t t);

} // namespace http
