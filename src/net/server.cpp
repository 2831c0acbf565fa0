#include "galay/net/server.hpp"
#include "galay/detail/intrusive_list.hpp"
#include "galay/sync/event.hpp"
#include "galay/time/sleep.hpp"
#include "runtime/scheduler_access.hpp"

#include <sys/socket.h>

#include <atomic>
#include <cstdio>

namespace galay {
namespace detail {

struct WorkerCount;

/// One running connection task, in its frame: its cancel scope on its worker's list, so that a
/// drain can cancel it there, and the scope of its wait for the next request while it is at
/// rest in `galay::idle` (null while it serves a request).
struct ConnEntry {
    CancelScope scope;
    CancelScope* idle = nullptr;
    WorkerCount* worker = nullptr;
    ConnEntry* prev = nullptr;
    ConnEntry* next = nullptr;
};
struct ConnEntryLinks {
    static ConnEntry*& next(ConnEntry& e) noexcept { return e.next; }
    static ConnEntry*& prev(ConnEntry& e) noexcept { return e.prev; }
};

/// Per worker, on its own cache line: the acceptor of one worker never shares a line with
/// another's.
struct alignas(64) WorkerCount {
    std::atomic<std::size_t> live{0};
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> refused{0};
    // The worker's own thread only: its running connections, whether a drain closes them when
    // they are idle (at once, or when they next go idle), and whether it cut them all.
    IntrusiveList<ConnEntry, ConnEntryLinks> running;
    bool close_idle = false;
    bool cut = false;
};

void* idle_begin(CancelScope* scope, CancelScope& child) noexcept {
    auto* conn = static_cast<ConnEntry*>(scope != nullptr ? scope->connection() : nullptr);
    if (conn == nullptr) return nullptr;
    child.attach_to(scope); // an abort or a cut of the connection still reaches the wait
    conn->idle = &child;
    if (conn->worker->close_idle) child.request(); // draining: the wait fails at once
    return conn;
}

void idle_end(void* conn, CancelScope& child) noexcept {
    static_cast<ConnEntry*>(conn)->idle = nullptr;
    child.detach();
}

namespace {

void default_accept_error(const SocketAddr& where, std::error_code e, std::uint64_t count) {
    const bool fds =
        e == std::errc::too_many_files_open || e == std::errc::too_many_files_open_in_system;
    if (count > 1)
        std::fprintf(stderr, "galay: accept on %s: %s%s (%llu times since the last report)\n",
                     where.to_string().c_str(), e.message().c_str(),
                     fds ? " (raise ulimit -n)" : "", static_cast<unsigned long long>(count));
    else
        std::fprintf(stderr, "galay: accept on %s: %s%s\n", where.to_string().c_str(),
                     e.message().c_str(), fds ? " (raise ulimit -n)" : "");
}

bool is_resource_error(std::error_code e) noexcept {
    return e == std::errc::too_many_files_open || e == std::errc::too_many_files_open_in_system ||
           e == std::errc::no_buffer_space || e == std::errc::not_enough_memory;
}

bool is_persistent_error(std::error_code e) noexcept {
    return e == std::errc::bad_file_descriptor || e == std::errc::invalid_argument ||
           e == std::errc::not_a_socket || e == std::errc::operation_not_supported;
}

} // namespace

struct ServerState {
    Runtime* rt = nullptr;
    SocketAddr addr;
    ListenMode mode = ListenMode::sharded;
    std::function<Task<void>(TcpStream)> handler;
    std::function<void(const SocketAddr&, std::error_code, std::uint64_t)> on_error;
    std::size_t max_connections = 0; // 0: no limit
    std::function<Task<void>(TcpStream)> on_refused;
    std::unique_ptr<WorkerCount[]> counts;
    unsigned workers = 0;
    std::atomic<unsigned> next{0};
    std::atomic<std::int64_t> last_report_ns{0};
    std::atomic<std::uint64_t> errors{0};
    // Draining: `idle` is set once no connection is open (by the drain or the last connection).
    std::atomic<std::size_t> total_live{0};
    std::atomic<bool> draining{false};
    Event idle;

    /// Count a new connection in, unless `max_connections` are open already.
    bool admit() noexcept {
        std::size_t live = total_live.load();
        do {
            if (max_connections != 0 && live >= max_connections) return false;
        } while (!total_live.compare_exchange_weak(live, live + 1));
        return true;
    }

    void connection_ended() noexcept {
        if (total_live.fetch_sub(1) == 1 && draining.load()) idle.set();
    }

    /// The worker with the fewest open connections of this server; ties rotate.
    unsigned least_loaded() noexcept {
        const unsigned start = next.fetch_add(1, std::memory_order_relaxed) % workers;
        unsigned best = start;
        std::size_t best_live = counts[start].live.load(std::memory_order_relaxed);
        for (unsigned k = 1; k < workers && best_live != 0; ++k) {
            const unsigned i = (start + k) % workers;
            const std::size_t l = counts[i].live.load(std::memory_order_relaxed);
            if (l < best_live) {
                best = i;
                best_live = l;
            }
        }
        return best;
    }

    void accept_failed(std::error_code e) {
        errors.fetch_add(1, std::memory_order_relaxed);
        const std::int64_t now = Scheduler::now_ns();
        std::int64_t last = last_report_ns.load(std::memory_order_relaxed);
        if (last != 0 && now - last < 1'000'000'000) return;
        if (!last_report_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
        const std::uint64_t n = errors.exchange(0, std::memory_order_relaxed);
        if (on_error)
            on_error(addr, e, n);
        else
            default_accept_error(addr, e, n);
    }
};

namespace {

/// One open connection of a server on one worker: a parameter of the connection's coroutine, so
/// that it is released with the frame whether the task ran or was dropped unstarted. It holds
/// the server's state (and so its handler) alive.
class ConnectionSlot {
public:
    ConnectionSlot(std::shared_ptr<ServerState> st, unsigned worker) noexcept
        : st_(std::move(st))
        , worker_(worker) {}
    ConnectionSlot(ConnectionSlot&& o) noexcept = default;
    ConnectionSlot& operator=(ConnectionSlot&&) = delete;
    ~ConnectionSlot() {
        if (!st_) return;
        st_->counts[worker_].live.fetch_sub(1, std::memory_order_relaxed);
        st_->connection_ended();
    }
    ServerState& state() const noexcept { return *st_; }
    unsigned worker() const noexcept { return worker_; }

private:
    std::shared_ptr<ServerState> st_;
    unsigned worker_;
};

/// Keeps a connection's entry on its worker's list while the handler runs.
class Running {
public:
    Running(WorkerCount& w, CancelScope* caller) noexcept
        : w_(w) {
        entry.scope.attach_to(caller); // abort and shutdown still reach the handler
        entry.scope.set_connection(&entry);
        entry.worker = &w;
        w_.running.push_back(entry);
        if (w_.cut) entry.scope.request();
    }
    Running(const Running&) = delete;
    ~Running() {
        w_.running.remove(entry);
        entry.scope.detach();
    }
    ConnEntry entry;

private:
    WorkerCount& w_;
};

Task<void> run_connection(ConnectionSlot slot, TcpStream s) {
    ServerState& st = slot.state();
    Running running(st.counts[slot.worker()], co_await CurrentScope{});
    Task<void> handler = st.handler(std::move(s));
    if (auto h = handler.handle()) h.promise().scope = &running.entry.scope;
    co_await std::move(handler);
}

/// On worker `w`: end the wait of every connection idle there now, and of the others as soon as
/// they go idle (galay::idle).
Task<void> close_idle_connections(std::shared_ptr<ServerState> st, unsigned w) {
    WorkerCount& c = st->counts[w];
    c.close_idle = true;
    for (ConnEntry* e = c.running.front(); e != nullptr; e = c.running.next(*e))
        if (e->idle != nullptr) e->idle->request();
    co_return;
}

/// A refused connection's last words (ServeOptions::on_refused), then the stream closes.
Task<void> refuse(std::shared_ptr<ServerState> st, TcpStream s) {
    co_await st->on_refused(std::move(s));
}

/// On worker `w`: cancel every connection running there, and the ones that start later.
Task<void> cut_connections(std::shared_ptr<ServerState> st, unsigned w) {
    WorkerCount& c = st->counts[w];
    c.cut = true;
    for (ConnEntry* e = c.running.front(); e != nullptr; e = c.running.next(*e))
        e->scope.request(); // (completions come later: nothing is unlinked meanwhile)
    co_return;
}

/// Stops a listener listening when the accept loop ends, however it ends (also when its frame is
/// destroyed at shutdown). shutdown(2) takes the socket out of the listening state at once, so
/// the port can be bound again right away, even while the kernel still holds the file (an armed
/// multishot accept on io_uring is released only when the ring processes its cancellation).
struct StopListening {
    explicit StopListening(int fd) noexcept
        : fd(fd) {}
    StopListening(const StopListening&) = delete;
    ~StopListening() { ::shutdown(fd, SHUT_RD); }
    int fd;
};

Task<void> accept_loop(std::shared_ptr<ServerState> st, TcpListener listener, unsigned self) {
    StopListening stop(listener.fd());
    for (;;) {
        auto conn = co_await listener.accept();
        if (conn) {
            if (!st->admit()) {
                st->counts[self].refused.fetch_add(1, std::memory_order_relaxed);
                SchedulerAccess::counters(current_scheduler()).conns_refused.add();
                if (st->on_refused) spawn(refuse(st, std::move(*conn)));
                continue; // (without a hook the stream closes here)
            }
            const unsigned w = st->mode == ListenMode::sharded ? self : st->least_loaded();
            st->counts[w].live.fetch_add(1, std::memory_order_relaxed);
            st->counts[w].accepted.fetch_add(1, std::memory_order_relaxed);
            auto task = run_connection(ConnectionSlot(st, w), std::move(*conn));
            if (w == self)
                spawn(std::move(task));
            else
                st->rt->spawn_on(w, std::move(task));
            continue;
        }
        const std::error_code e = conn.error();
        if (e == std::errc::operation_canceled) co_return; // stop() or shutdown
        st->accept_failed(e);
        if (is_persistent_error(e)) co_return;
        if (!is_resource_error(e)) continue;
        auto paused = co_await sleep(std::chrono::milliseconds(10));
        if (!paused) co_return;
    }
}

} // namespace
} // namespace detail

TcpServer::~TcpServer() = default;

const SocketAddr& TcpServer::local_addr() const noexcept {
    static const SocketAddr none;
    return state_ ? state_->addr : none;
}

ListenMode TcpServer::mode() const noexcept {
    return state_ ? state_->mode : ListenMode::sharded;
}

void TcpServer::stop() noexcept {
    for (auto& a : acceptors_)
        a.abort();
    if (Scheduler::current() != nullptr) return; // a worker: cannot block; they close soon
    for (auto& a : acceptors_) {
        try {
            a.join();
        } catch (...) { // (the runtime shut down first: closed too)
        }
    }
    acceptors_.clear();
}

Task<std::size_t> TcpServer::drain(std::chrono::steady_clock::time_point deadline) {
    if (!state_) co_return 0;
    std::shared_ptr<detail::ServerState> st = state_;
    for (auto& a : acceptors_)
        a.abort();
    for (auto& a : acceptors_) {
        auto ended = co_await a.result(); // (an accept in flight is counted before it ends)
        (void)ended;
    }
    acceptors_.clear();
    st->draining.store(true);
    if (st->total_live.load() == 0) st->idle.set();
    // Connections at rest between requests close now; the others when they next go idle.
    for (unsigned w = 0; w < st->workers; ++w) {
        auto done = co_await st->rt->spawn_on(w, detail::close_idle_connections(st, w)).result();
        (void)done;
    }
    auto finished = co_await st->idle.wait().deadline(deadline);
    if (finished) co_return 0;
    const std::size_t cut = st->total_live.load();
    for (unsigned w = 0; w < st->workers; ++w) {
        auto done = co_await st->rt->spawn_on(w, detail::cut_connections(st, w)).result();
        (void)done;
    }
    auto all = co_await st->idle.wait();
    (void)all;
    co_return cut;
}

std::size_t TcpServer::connections(unsigned worker) const noexcept {
    if (!state_ || worker >= state_->workers) return 0;
    return state_->counts[worker].live.load(std::memory_order_relaxed);
}

std::uint64_t TcpServer::accepted(unsigned worker) const noexcept {
    if (!state_ || worker >= state_->workers) return 0;
    return state_->counts[worker].accepted.load(std::memory_order_relaxed);
}

std::uint64_t TcpServer::refused(unsigned worker) const noexcept {
    if (!state_ || worker >= state_->workers) return 0;
    return state_->counts[worker].refused.load(std::memory_order_relaxed);
}

Result<TcpServer> serve(Runtime& rt, const SocketAddr& addr,
                        std::function<Task<void>(TcpStream)> handler, ServeOptions options) {
    if (!handler) return fail(EINVAL);
    const unsigned n = rt.size();
    if (options.mode == ListenMode::dispatch && options.acceptor >= n) return fail(EINVAL);
    auto listeners = TcpListener::bind_sharded(addr, options.mode == ListenMode::sharded ? n : 1,
                                               options.listen);
    if (!listeners) return std::unexpected(listeners.error());
    auto bound = listeners->front().local_addr();
    if (!bound) return std::unexpected(bound.error());

    auto st = std::make_shared<detail::ServerState>();
    st->rt = &rt;
    st->addr = *bound;
    st->mode = options.mode;
    st->handler = std::move(handler);
    st->on_error = std::move(options.on_accept_error);
    st->max_connections = options.max_connections;
    st->on_refused = std::move(options.on_refused);
    st->workers = n;
    st->counts = std::make_unique<detail::WorkerCount[]>(n);

    TcpServer server;
    server.state_ = st;
    for (unsigned i = 0; i < listeners->size(); ++i) {
        const unsigned w = options.mode == ListenMode::sharded ? i : options.acceptor;
        server.acceptors_.push_back(
            rt.spawn_on(w, detail::accept_loop(st, std::move((*listeners)[i]), w)));
    }
    return server;
}

} // namespace galay
