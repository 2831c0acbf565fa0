// galay/net/server.hpp: serve one TCP address on every worker of a Runtime.
//
//     galay::Task<void> echo(galay::TcpStream conn);            // one task per connection
//     galay::Runtime rt;
//     auto server = galay::serve(rt, galay::SocketAddr::any_v4(9000), echo);
//     if (!server) { /* EADDRINUSE: the port is held by someone else */ }
//     rt.block_on(galay::as_task(galay::signal({SIGINT, SIGTERM})));
//     server->stop();                                            // (shutdown does it too)
//
// Two ways to spread connections over the workers:
//   - `ListenMode::sharded` (the default): one SO_REUSEPORT listener per worker, each accepting
//     on its own worker; the kernel hashes every new connection (its addresses and ports) to one
//     of them. No cross-thread traffic at all, but a hash is not a balance: with few long-lived
//     connections the workers end up unevenly loaded (8 connections on 2 workers are split 4/4
//     only about a quarter of the time).
//   - `ListenMode::dispatch`: one listener on one worker (`acceptor`), which hands each accepted
//     connection to the worker that has the fewest open connections of this server (ties go
//     round-robin). Balanced by construction, at the price of one cross-thread post per
//     connection and one accepting worker.
// Either way a connection's task runs on one worker from start to end: no cross-thread traffic
// per request.
//
// The port is bound with `TcpListener::bind_sharded`: a port held by anything else is
// EADDRINUSE, never silently shared. The handler is called as `handler(TcpStream)` on the worker
// that will run the connection and must return a `Task<void>`; it is kept alive until the last
// connection task has finished (a capturing lambda coroutine is fine).
//
// A limit and a graceful stop:
//   - `ServeOptions::max_connections`: a connection accepted while that many are open is
//     refused (counted per worker: `TcpServer::refused`, `metrics::WorkerMetrics::
//     connections_refused`); `on_refused` may answer it first (a Redis server says "-ERR max
//     number of clients reached"), otherwise it is closed at once.
//   - `drain(deadline)` stops accepting, closes at once the connections that are idle between
//     two requests, waits for the others to finish their request (and close when they next go
//     idle), and cuts what is left at the deadline (Go's Server.Shutdown). A handler says where
//     it is idle by waiting for its next request through `galay::idle`:
//
//         galay::Task<void> session(galay::TcpStream conn) {
//             galay::io::BufReader reader(conn);
//             for (;;) {
//                 auto line = co_await galay::idle(reader.read_line()); // at rest here
//                 if (!line) co_return;     // closed, or operation_canceled: the server drains
//                 ...                       // a request in progress: drain waits for it
//             }
//         }
#pragma once

#include "galay/detail/idle_wait.hpp"
#include "galay/net/tcp.hpp"
#include "galay/runtime.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace galay {

/// How serve() spreads connections over the workers.
enum class ListenMode : std::uint8_t {
    sharded,  ///< a SO_REUSEPORT listener per worker; the kernel picks the worker
    dispatch, ///< one acceptor hands each connection to the least-loaded worker
};

/// How serve() listens and accepts.
struct ServeOptions {
    /// Sharded (the default) or dispatch.
    ListenMode mode = ListenMode::sharded;
    /// Backlog, SO_REUSEADDR, IPV6_V6ONLY (`reuse_port` is decided by the mode).
    ListenOptions listen{};
    /// dispatch: the worker that accepts.
    unsigned acceptor = 0;
    /// Accept errors (EMFILE, ENFILE, ...) are reported at most once a second per server, with
    /// how many occurred since the previous report (this one included), from whichever worker
    /// hit one. Default: one line on stderr. After a resource error (EMFILE, ENFILE, ENOBUFS,
    /// ENOMEM) the listener waits 10 ms before accepting again (the connection waits in the
    /// backlog meanwhile).
    std::function<void(const SocketAddr& where, std::error_code error, std::uint64_t count)>
        on_accept_error{};
    /// The most connections of this server open at once, over all its workers (0: no limit).
    /// One accepted while that many are open is refused: counted on the accepting worker
    /// (`TcpServer::refused`, `metrics::WorkerMetrics::connections_refused`), then handed to
    /// `on_refused`, or closed at once when there is none.
    std::size_t max_connections = 0;
    /// The last words to a refused connection, run as a task of its own on the accepting worker
    /// (`co_await conn.send_all(msg).timeout(1s)`, say), after which the stream is closed. It
    /// does not count as an open connection: keep it short and put a timeout on what it awaits.
    std::function<Task<void>(TcpStream)> on_refused{};
};

namespace detail {
struct ServerState;
}

/// A running server (see the top of this header). Dropping it leaves the server running until
/// `stop()` is called on another handle or the runtime shuts down.
class TcpServer {
public:
    TcpServer() = default;
    /// Takes over the handle of `o`.
    TcpServer(TcpServer&&) noexcept = default;
    /// Takes over the handle of `o`; the server this one referred to runs on.
    TcpServer& operator=(TcpServer&&) noexcept = default;
    ~TcpServer();

    /// The address the listeners are bound to (with the real port when 0 was asked for).
    const SocketAddr& local_addr() const noexcept;
    /// The mode it was started with.
    ListenMode mode() const noexcept;
    /// Stop accepting: the accept loops are aborted and their listeners closed. From a thread
    /// that is not a worker it returns once they are closed (the port is free); from a task it
    /// returns at once and they close as soon as their workers run. Open connections go on.
    void stop() noexcept;
    /// Graceful shutdown, from a task: stop accepting (and wait until the listeners are
    /// closed); close at once every connection idle between requests (waiting in
    /// `galay::idle`: that wait ends with `operation_canceled`), and each of the others as soon
    /// as it goes idle; let those finish until `deadline`, then cancel the rest (each on its
    /// worker, as `when_any` cancels a loser) and wait for them to end. Gives how many were cut
    /// at the deadline (0 when all finished in time). A handler that ignores cancellation
    /// delays it; one that never waits in `galay::idle` is waited for until the deadline.
    [[nodiscard]] Task<std::size_t> drain(std::chrono::steady_clock::time_point deadline);
    /// Connection tasks of this server running on `worker` now: a handler counts from its
    /// accept until it returns, whatever it does with its stream (one that hands the stream to
    /// another task and returns is no longer counted, and drain() does not wait for that task).
    std::size_t connections(unsigned worker) const noexcept;
    /// Connections accepted for `worker` so far.
    std::uint64_t accepted(unsigned worker) const noexcept;
    /// Connections `worker` refused so far (`ServeOptions::max_connections`).
    std::uint64_t refused(unsigned worker) const noexcept;

private:
    friend Result<TcpServer> serve(Runtime&, const SocketAddr&,
                                   std::function<Task<void>(TcpStream)>, ServeOptions);
    std::shared_ptr<detail::ServerState> state_;
    std::vector<JoinHandle<void>> acceptors_;
};

/// Serve `addr` on every worker of `rt`, running `handler(stream)` for each connection.
/// Errors: what binding the address gives (EADDRINUSE when the port is taken, EACCES, ...).
[[nodiscard]] Result<TcpServer> serve(Runtime& rt, const SocketAddr& addr,
                                      std::function<Task<void>(TcpStream)> handler,
                                      ServeOptions options = {});

/// Await `op` (the wait for a connection's next request) as a connection at rest: a `drain()` of
/// the server running this connection cancels it at once (it then gives `operation_canceled`, or
/// its real result when that came first), and once the server drains, it fails that way without
/// waiting. Outside a connection of `serve` it is `op` itself. A request that arrived completes
/// `op` as usual and the connection is active again until its next `idle`.
template <class Op>
[[nodiscard]] detail::IdleWait<std::remove_cvref_t<Op>> idle(Op&& op) {
    return detail::IdleWait<std::remove_cvref_t<Op>>(std::forward<Op>(op));
}

} // namespace galay
