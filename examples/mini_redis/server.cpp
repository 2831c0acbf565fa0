// mini_redis/server.cpp: the server on every worker: listeners and periodic expiry.
#include "mini_redis/server.hpp"

#include "mini_redis/connection.hpp"

using namespace std::chrono_literals;

namespace mini_redis {
namespace {

/// Ten times a second, delete some expired keys of this worker's shard (store.hpp).
galay::Task<void> expire_keys(std::shared_ptr<Server> server) {
    galay::Interval every(100ms, galay::MissedTick::skip);
    for (;;) {
        auto tick = co_await every.tick();
        if (!tick) co_return; // cancelled: the runtime is stopping
        server->keyspace.local().expire_some(now_ms());
    }
}

} // namespace

std::uint64_t Server::total(std::atomic<std::uint64_t> WorkerStats::*counter) const noexcept {
    std::uint64_t n = 0;
    for (const WorkerStats& w : stats)
        n += (w.*counter).load(std::memory_order_relaxed);
    return n;
}

std::uint64_t Server::largest(std::atomic<std::uint64_t> WorkerStats::*counter) const noexcept {
    std::uint64_t n = 0;
    for (const WorkerStats& w : stats)
        n = std::max<std::uint64_t>(n, (w.*counter).load(std::memory_order_relaxed));
    return n;
}

galay::Result<galay::TcpServer> start(galay::Runtime& rt, std::shared_ptr<Server> server) {
    galay::ServeOptions so;
    so.mode = galay::ListenMode::sharded; // a listener per worker: no cross-thread accept
    so.listen.backlog = 4096;
    auto listening = galay::serve(
        rt, galay::SocketAddr::loopback_v4(server->options.port),
        [server](galay::TcpStream conn) { return serve_connection(*server, std::move(conn)); },
        std::move(so));
    if (!listening) return listening;
    server->options.port = listening->local_addr().port(); // the real one, when 0 was asked
    for (unsigned w = 0; w < rt.size(); ++w)
        rt.spawn_on(w, expire_keys(server));
    return listening;
}

} // namespace mini_redis
