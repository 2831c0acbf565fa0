// A TCP echo server that restarts in place without refusing a connection.
//   ./hot_restart 9000 [--backend io_uring|epoll|auto] [--drain SECS]
//   kill -USR2 <pid>     start the successor (this same program, as it is on disk now) and hand
//                        it every listening socket; this process then stops accepting, lets its
//                        own connections finish (at most --drain seconds, default 30) and exits 0
//   kill -TERM <pid>     stop accepting, drain, exit 0
// PORT 0 picks a free port; the "serving on" line gives the real one.
//
// The hand-over: the old process binds a Unix socket under an abstract name, starts the
// successor with that name in GALAY_HOT_RESTART_SOCKET, checks (SO_PEERCRED) that the process
// that connects is that child, and sends it the listening sockets with SCM_RIGHTS. The successor
// adopts them (TcpListener::from_fd), starts accepting and answers one byte; only then does the
// old process stop accepting. The listening sockets are never closed on the way (each process
// holds the same kernel socket), so a connection that arrives during the hand-over waits in the
// one listen queue until one of the two accepts it. If the successor fails, the old one kills it
// and goes on serving.
//
// Exit codes: 1 when the port cannot be bound or the hand-over received is unusable, 2 for a
// bad argument.
#include <galay/galay.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace std::chrono_literals;

namespace {

constexpr const char* kHandoverEnv = "GALAY_HOT_RESTART_SOCKET";
constexpr char kReady = 'R';   // the successor accepts: the old process may stop
constexpr char kSockets = 'L'; // the byte the listening sockets travel with
constexpr std::array<char, 1> kReadyMsg{kReady};
constexpr std::array<char, 1> kSocketsMsg{kSockets};

struct Options {
    std::uint16_t port = 0;
    galay::Backend backend = galay::Backend::automatic;
    std::chrono::seconds drain = 30s;
    std::vector<std::string> args; // as given, for the successor
    std::string self;              // this program's path, resolved at start
};

struct Server {
    std::vector<galay::TcpListener> listeners;
    galay::TaskGroup accepting;   // one accept loop per listener
    galay::TaskGroup connections; // one echo task per connection
    std::size_t live = 0;         // connections open now
    unsigned long long served = 0;
};

galay::Task<void> echo(Server& s, galay::TcpStream conn) {
    ++s.live;
    std::array<char, 4096> buf;
    for (;;) {
        auto n = co_await conn.recv(buf).timeout(60s); // idle connections are dropped
        if (!n || *n == 0) break;                      // error, timeout or peer closed
        auto sent = co_await conn.send_all(std::span(buf.data(), *n));
        if (!sent) break;
    }
    --s.live;
    ++s.served;
}

galay::Task<void> accept_loop(Server& s, galay::TcpListener& l) {
    for (;;) {
        auto conn = co_await l.accept();
        // A connection accepted as the loop is cancelled is served, not dropped: the next
        // accept then fails at once.
        if (conn) {
            s.connections.spawn(echo(s, std::move(*conn)));
            continue;
        }
        if (conn.error() == std::errc::operation_canceled) co_return;
        std::fprintf(stderr, "hot_restart: accept: %s\n", conn.error().message().c_str());
        if (conn.error() == std::errc::too_many_files_open) co_await galay::sleep(10ms);
    }
}

void start_accepting(Server& s) {
    for (galay::TcpListener& l : s.listeners)
        s.accepting.spawn(accept_loop(s, l));
}

std::string addresses(const Server& s) {
    std::string out;
    for (const galay::TcpListener& l : s.listeners) {
        auto a = l.local_addr();
        if (!out.empty()) out += ' ';
        out += a ? a->to_string() : "?";
    }
    return out;
}

/// 0.0.0.0:PORT, and [::]:PORT (IPv6 only) on the same port where the machine has IPv6.
galay::Result<std::vector<galay::TcpListener>> bind_all(std::uint16_t port) {
    std::vector<galay::TcpListener> out;
    auto v4 = galay::TcpListener::bind(galay::SocketAddr::any_v4(port));
    if (!v4) return std::unexpected(v4.error());
    const std::uint16_t bound = v4->local_addr()->port();
    out.push_back(std::move(*v4));
    galay::ListenOptions o;
    o.v6_only = true;
    if (auto v6 = galay::TcpListener::bind(galay::SocketAddr::any_v6(bound), o))
        out.push_back(std::move(*v6));
    else
        std::fprintf(stderr, "hot_restart: no IPv6 listener on port %u: %s\n", bound,
                     v6.error().message().c_str());
    return out;
}

/// The successor's side: connect to the predecessor, adopt the listening sockets it sends.
galay::Task<galay::Result<galay::UnixStream>> receive_listeners(Server& s, std::string name) {
    auto addr = galay::UnixAddr::parse(name);
    if (!addr) co_return std::unexpected(addr.error());
    auto conn = co_await galay::UnixStream::connect(*addr).timeout(10s);
    if (!conn) co_return std::unexpected(conn.error());
    std::array<char, 1> tag{};
    auto msg = co_await conn->recv_with_fds(tag, 16).timeout(10s);
    if (!msg) co_return std::unexpected(msg.error());
    if (msg->size != 1 || tag[0] != kSockets || msg->fds.empty()) co_return galay::fail(EPROTO);
    for (galay::UniqueFd& fd : msg->fds) {
        auto l = galay::TcpListener::from_fd(fd.get());
        if (!l) co_return std::unexpected(l.error());
        (void)fd.release(); // (the listener owns it now)
        s.listeners.push_back(std::move(*l));
    }
    co_return std::move(*conn);
}

/// The predecessor's side: start the successor and hand it the listening sockets. Returns its
/// pid once it accepts on them; on any failure the successor is killed and reaped.
galay::Task<galay::Result<pid_t>> hand_over(Server& s, const Options& opt, unsigned round) {
    const std::string name =
        "@galay-hot-restart-" + std::to_string(::getpid()) + "-" + std::to_string(round);
    auto addr = galay::UnixAddr::parse(name);
    if (!addr) co_return std::unexpected(addr.error());
    auto rendezvous = galay::UnixListener::bind(*addr, 1);
    if (!rendezvous) co_return std::unexpected(rendezvous.error());
    galay::process::Command cmd(opt.self);
    cmd.args(opt.args);
    cmd.env(kHandoverEnv, name);
    auto child = cmd.spawn();
    if (!child) co_return std::unexpected(child.error());
    // From here, dropping `child` on a failure kills and reaps the successor.
    auto conn = co_await rendezvous->accept().timeout(10s);
    if (!conn) co_return std::unexpected(conn.error());
    // An abstract name is open to any process on the host: hand the sockets to our child only.
    auto cred = conn->peer_cred();
    if (!cred) co_return std::unexpected(cred.error());
    if (cred->pid != child->id()) co_return galay::fail(EPERM);
    std::vector<int> fds;
    for (const galay::TcpListener& l : s.listeners)
        fds.push_back(l.fd());
    auto sent = co_await conn->send_with_fds(kSocketsMsg, fds).timeout(10s);
    if (!sent) co_return std::unexpected(sent.error());
    std::array<char, 1> ack{};
    auto got = co_await conn->recv(ack).timeout(10s);
    if (!got) co_return std::unexpected(got.error());
    if (*got != 1 || ack[0] != kReady) co_return galay::fail(EPROTO); // it failed and exited
    co_return child->detach();
}

/// The signals this server acts on. (Not written out in the coroutines: g++ 12 rejects an
/// initializer list in a coroutine's frame.)
galay::detail::SignalAwaiter control_signals() {
    return galay::signal({SIGUSR2, SIGTERM, SIGINT});
}

/// Stop accepting, close this process's copies of the listening sockets, let the connections
/// finish (cancelled after `drain`).
galay::Task<void> stop_and_drain(Server& s, std::chrono::seconds drain) {
    s.accepting.cancel();
    (void)co_await s.accepting.wait();
    // A connection may have arrived just as the accepts were cancelled. The kernel wakes one
    // waiting accept per connection, and io_uring's accept waits exclusively: if the one it woke
    // was ours, being cancelled, the successor's accept is not woken, and the connection would
    // wait in the listen queue for the next one to arrive. Take whatever is queued now (without
    // waiting: accept4 on the non-blocking socket) and serve it here.
    for (galay::TcpListener& l : s.listeners)
        for (;;) {
            const int fd = ::accept4(l.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0)
                s.connections.spawn(echo(s, galay::TcpStream(fd)));
            else if (errno != ECONNABORTED && errno != EINTR)
                break; // EAGAIN: the queue is empty
        }
    s.listeners.clear();
    // (Not `if (!co_await ...)`: g++ 12 then never starts this coroutine's body.)
    const galay::Result<void> drained = co_await s.connections.wait().timeout(drain);
    if (!drained) {
        std::fprintf(stderr,
                     "hot_restart: pid %d: %zu connection(s) still open after %llds: "
                     "closed\n",
                     ::getpid(), s.live, static_cast<long long>(drain.count()));
        s.connections.cancel();
        (void)co_await s.connections.wait();
    }
}

/// Serve until a stop signal (false) or a hand-over that succeeded (true).
galay::Task<bool> serve_until_handed_over(Server& s, const Options& opt) {
    for (unsigned round = 1;; ++round) {
        const galay::Result<int> sig = co_await control_signals();
        if (!sig || *sig != SIGUSR2) co_return false;
        auto successor = co_await hand_over(s, opt, round);
        if (successor) {
            std::printf("hot_restart: pid %d handed %zu listener(s) to pid %d, draining %zu "
                        "connection(s)\n",
                        ::getpid(), s.listeners.size(), *successor, s.live);
            std::fflush(stdout);
            co_return true;
        }
        std::fprintf(stderr, "hot_restart: hand-over failed (%s); still serving\n",
                     successor.error().message().c_str());
    }
}

galay::Task<int> run(Options opt, std::optional<std::string> handover) {
    Server s;
    galay::UnixStream predecessor;
    if (handover) {
        auto p = co_await receive_listeners(s, *handover);
        if (!p) {
            std::fprintf(stderr, "hot_restart: cannot take over from %s: %s\n", handover->c_str(),
                         p.error().message().c_str());
            co_return 1;
        }
        predecessor = std::move(*p);
    } else {
        auto l = bind_all(opt.port);
        if (!l) {
            std::fprintf(stderr, "hot_restart: cannot listen on port %u: %s\n", opt.port,
                         l.error().message().c_str());
            co_return 1;
        }
        s.listeners = std::move(*l);
    }
    start_accepting(s);
    if (predecessor.is_open()) {
        const galay::Result<std::size_t> told =
            co_await predecessor.send_all(kReadyMsg).timeout(10s);
        if (!told) {
            std::fprintf(stderr, "hot_restart: the predecessor went away during the hand-over\n");
            co_return 1;
        }
        predecessor = galay::UnixStream();
    }
    std::printf("hot_restart: pid %d serving on %s (%s)\n", ::getpid(), addresses(s).c_str(),
                galay::Scheduler::current()->backend_name());
    std::fflush(stdout);
    (void)co_await serve_until_handed_over(s, opt);
    co_await stop_and_drain(s, opt.drain);
    std::printf("hot_restart: pid %d exits: %llu connection(s) served\n", ::getpid(), s.served);
    std::fflush(stdout);
    co_return 0;
}

std::optional<unsigned long> parse_uint(std::string_view s, unsigned long max) {
    unsigned long v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v > max)
        return std::nullopt;
    return v;
}

int usage(const char* why) {
    std::fprintf(stderr,
                 "hot_restart: %s\nusage: hot_restart PORT [--backend io_uring|epoll|auto] "
                 "[--drain SECS]\n",
                 why);
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    Options opt;
    std::optional<unsigned long> port;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        opt.args.emplace_back(a);
        if ((a == "--backend" || a == "--drain") && i + 1 >= argc)
            return usage("an option is missing its value");
        if (a == "--backend") {
            opt.args.emplace_back(argv[++i]);
            auto b = galay::parse_backend(argv[i]);
            if (!b) return usage("--backend: io_uring, epoll or auto");
            opt.backend = *b;
        } else if (a == "--drain") {
            opt.args.emplace_back(argv[++i]);
            auto d = parse_uint(argv[i], 86400);
            if (!d) return usage("--drain: whole seconds, 0..86400");
            opt.drain = std::chrono::seconds(*d);
        } else if (!port && (port = parse_uint(a, 65535))) {
        } else {
            return usage(("unexpected argument '" + std::string(a) + "'").c_str());
        }
    }
    if (!port) return usage("PORT (0..65535) is required");
    opt.port = static_cast<std::uint16_t>(*port);
    // The path, not /proc/self/exe: a binary replaced on disk (the reason to restart) is
    // started as the new one.
    std::error_code ec;
    opt.self = std::filesystem::canonical("/proc/self/exe", ec).string();
    if (ec) opt.self = argv[0];
    std::optional<std::string> handover;
    if (const char* h = std::getenv(kHandoverEnv)) {
        handover = h;
        ::unsetenv(kHandoverEnv); // (no later child of ours sees it)
    }
    std::signal(SIGPIPE, SIG_IGN);
    // Caught from here on (one that comes before the server waits for it is kept for the wait).
    (void)control_signals();
    try {
        // One accept at a time (no multishot accept on io_uring): a multishot keeps accepting
        // connections into this process after it stops accepting, and those would be closed
        // with it instead of waiting in the listen queue for the successor.
        galay::SchedulerOptions so;
        so.backend = opt.backend;
        so.multishot_accept = false;
        return galay::block_on(run(std::move(opt), std::move(handover)), so);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "hot_restart: %s\n", e.what());
        return 1;
    }
}
