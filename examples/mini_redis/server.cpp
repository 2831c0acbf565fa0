// mini_redis/server.cpp: the server on every worker: a listener each, and the connection limit.
#include "mini_redis/server.hpp"

#include "mini_redis/connection.hpp"

using namespace std::chrono_literals;

namespace mini_redis {
namespace {

/// A client beyond --max-connections: counted, told in Redis's words, closed. (Not a connection
/// of the server: it owns its Server, which may be gone by the time its reply is sent.)
galay::Task<void> refuse(std::shared_ptr<Server> server, galay::TcpStream conn) {
    ++server->keyspace.local().stats.rejected;
    auto sent = co_await conn.send_all(std::string_view("-ERR max number of clients reached\r\n"))
                    .timeout(1s);
    (void)sent; // a client that does not take it is closed all the same
}

} // namespace

galay::Result<galay::TcpServer> start(galay::Runtime& rt, std::shared_ptr<Server> server) {
    galay::ServeOptions so;
    so.mode = galay::ListenMode::sharded; // a listener per worker: no cross-thread accept
    so.listen.backlog = 4096;
    so.max_connections = server->options.max_connections;
    so.on_refused = [server](galay::TcpStream conn) { return refuse(server, std::move(conn)); };
    auto listening = galay::serve(
        rt, galay::SocketAddr::loopback_v4(server->options.port),
        [server](galay::TcpStream conn) { return serve_connection(*server, std::move(conn)); },
        std::move(so));
    if (listening) server->options.port = listening->local_addr().port(); // when 0 was asked
    return listening;
}

} // namespace mini_redis
