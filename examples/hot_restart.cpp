// A TCP echo server that restarts in place without refusing a connection.
//   ./hot_restart 9000 [--backend io_uring|epoll|auto] [--drain SECS]
//   kill -USR2 <pid>     start the successor (this same program, as it is on disk now) and hand
//                        it every listening socket; this process then stops accepting, lets its
//                        own connections finish (at most --drain seconds, default 30) and exits 0
//   kill -TERM <pid>     stop accepting, drain, exit 0
// PORT 0 picks a free port; the "serving on" line gives the real one.
//
// The hand-over: the old process makes a connected pair of Unix sockets (socketpair), starts the
// successor with one end inherited (its number in GALAY_HOT_RESTART_FD) and sends the listening
// sockets over the other with SCM_RIGHTS. No name is bound, so no other process can occupy or
// reach the channel; the successor checks (SO_PEERCRED) that the other end was made by its
// parent under its own uid. It adopts the sockets (TcpListener::from_fd), starts accepting and
// answers one byte; only then does the old process stop accepting. The listening sockets are
// never closed on the way (each process holds the same kernel socket), so a connection that
// arrives during the hand-over waits in the one listen queue until one of the two accepts it. If
// the successor fails, the old one goes on serving and says why: a successor that exits at start
// closes its end, so its exit status is reported at once; one that hangs is killed after 10 s.
//
// Exit codes: 1 when the port cannot be bound or the hand-over received is unusable, 2 for a
// bad argument.
#include "galay_cli_backend.hpp"

#include <galay/galay.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace std::chrono_literals;

namespace {

constexpr const char* kHandoverEnv = "GALAY_HOT_RESTART_FD";
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

/// The successor's side: the inherited end of the hand-over channel, checked to be a Unix
/// stream socket whose other end its parent made under this uid, then the listening sockets it
/// brings. Returns the channel, for the answer.
galay::Task<galay::Result<galay::UnixStream>> receive_listeners(Server& s, std::string fd_text) {
    const auto fd = galay::tools::parse_whole(fd_text, 3, 1 << 20);
    if (!fd || ::fcntl(static_cast<int>(*fd), F_SETFD, FD_CLOEXEC) != 0)
        co_return galay::fail(EBADF); // (and from here no child of ours inherits it)
    auto int_option = [&](int name) {
        int v = -1;
        socklen_t len = sizeof v;
        return ::getsockopt(static_cast<int>(*fd), SOL_SOCKET, name, &v, &len) == 0 ? v : -1;
    };
    if (int_option(SO_DOMAIN) != AF_UNIX || int_option(SO_TYPE) != SOCK_STREAM)
        co_return galay::fail(ENOTSOCK);
    galay::UnixStream conn(static_cast<int>(*fd));
    auto cred = conn.peer_cred();
    if (!cred) co_return std::unexpected(cred.error());
    if (cred->pid != ::getppid() || cred->uid != ::getuid()) co_return galay::fail(EPERM);
    std::array<char, 1> tag{};
    auto msg = co_await conn.recv_with_fds(tag, 16).timeout(10s);
    if (!msg) co_return std::unexpected(msg.error());
    if (msg->size != 1 || tag[0] != kSockets || msg->fds.empty()) co_return galay::fail(EPROTO);
    for (galay::UniqueFd& listener_fd : msg->fds) {
        auto l = galay::TcpListener::from_fd(listener_fd.get());
        if (!l) co_return std::unexpected(l.error());
        (void)listener_fd.release(); // (the listener owns it now)
        s.listeners.push_back(std::move(*l));
    }
    co_return std::move(conn);
}

/// Why a hand-over failed, in words.
using HandOverResult = std::expected<pid_t, std::string>;

/// What became of a successor that closed the channel or did not answer: its exit status if it
/// has ended (waiting a moment for it), else it is killed.
galay::Task<std::string> successor_fate(galay::process::Child& child, std::string what) {
    const pid_t pid = child.id();
    const galay::Result<galay::process::ExitStatus> st = co_await child.wait().timeout(10s);
    if (st)
        co_return "the successor (pid " + std::to_string(pid) + ") " + what + ": " +
            st->to_string();
    co_return "the successor (pid " + std::to_string(pid) + ") " + what +
        " and was still running: killed";
}

/// The predecessor's side: start the successor and hand it the listening sockets. Returns its
/// pid once it accepts on them; on any failure the successor is killed and reaped, and the
/// reason says what happened (its exit status when it exited).
galay::Task<HandOverResult> hand_over(Server& s, const Options& opt) {
    auto channel = galay::UnixStream::pair();
    if (!channel) co_return std::unexpected("socketpair: " + channel.error().message());
    galay::UnixStream ours = std::move(channel->first), theirs = std::move(channel->second);
    // The successor's end is inherited across exec (only by it: this process spawns nothing
    // else, and the copy here is closed as soon as the child has it).
    if (::fcntl(theirs.fd(), F_SETFD, 0) != 0)
        co_return std::unexpected(std::string("fcntl: ") + std::strerror(errno));
    galay::process::Command cmd(opt.self);
    cmd.args(opt.args);
    cmd.env(kHandoverEnv, std::to_string(theirs.fd()));
    auto child = cmd.spawn();
    theirs = galay::UnixStream();
    if (!child)
        co_return std::unexpected("cannot start " + opt.self + ": " + child.error().message());
    // From here, dropping `child` on a failure kills and reaps the successor.
    std::vector<int> fds;
    for (const galay::TcpListener& l : s.listeners)
        fds.push_back(l.fd());
    auto sent = co_await ours.send_with_fds(kSocketsMsg, fds).timeout(10s);
    if (!sent) co_return std::unexpected(co_await successor_fate(*child, "closed the hand-over"));
    std::array<char, 1> ack{};
    const galay::Result<std::size_t> got = co_await ours.recv(ack).timeout(10s);
    if (!got && got.error() == std::errc::timed_out)
        co_return std::unexpected("the successor (pid " + std::to_string(child->id()) +
                                  ") did not take over within 10 s: killed");
    if (!got || *got != 1 || ack[0] != kReady)
        co_return std::unexpected(co_await successor_fate(*child, "exited before taking over"));
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
    for (;;) {
        const galay::Result<int> sig = co_await control_signals();
        if (!sig || *sig != SIGUSR2) co_return false;
        const HandOverResult successor = co_await hand_over(s, opt);
        if (successor) {
            std::printf("hot_restart: pid %d handed %zu listener(s) to pid %d, draining %zu "
                        "connection(s)\n",
                        ::getpid(), s.listeners.size(), *successor, s.live);
            std::fflush(stdout);
            co_return true;
        }
        std::fprintf(stderr, "hot_restart: hand-over failed: %s; still serving\n",
                     successor.error().c_str());
    }
}

galay::Task<int> run(Options opt, std::optional<std::string> handover) {
    Server s;
    galay::UnixStream predecessor;
    if (handover) {
        auto p = co_await receive_listeners(s, *handover);
        if (!p) {
            std::fprintf(stderr, "hot_restart: cannot take over (%s=%s): %s\n", kHandoverEnv,
                         handover->c_str(), p.error().message().c_str());
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

} // namespace

int main(int argc, char** argv) {
    Options opt;
    long drain = 30;
    cli::App app{"A TCP echo server that hands its listening sockets to its successor on SIGUSR2.",
                 "hot_restart"};
    app.add_option("port", opt.port, "TCP port (0: any free port, printed)")
        ->required()
        ->check(galay::tools::whole(0, 65535));
    galay::tools::add_backend_flag(app, &opt.backend);
    app.add_option("--drain", drain, "seconds the connections get to finish after a hand-over")
        ->check(galay::tools::whole(0, 86400))
        ->capture_default_str();
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "hot_restart")) return *code;
    opt.drain = std::chrono::seconds(drain);
    opt.args = galay::tools::args_from(argc, argv); // as given, for the successor
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
