// Restarting a server in place, on every backend: TcpListener::from_fd (adopting a listening
// socket, and the descriptors it refuses), and examples/hot_restart run as a process under a
// client that connects continuously (connect, echo, close) across two hand-overs: no connection
// is refused or reset, each old process exits 0, and the successor serves.
//
// This test process is a child subreaper, so a successor whose parent (the old server) exits
// becomes our child: we reap it and read its exit status too.
#include "support/backends.hpp"
#include "support/fds.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// A blocking TCP socket listening on 127.0.0.1, port chosen by the kernel; no SOCK_CLOEXEC (as
/// a descriptor inherited or received from elsewhere may be).
int raw_listener(std::uint16_t* port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd, 16) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

bool is_open(int fd) {
    return ::fcntl(fd, F_GETFD) >= 0;
}

class FromFdTest : public test::FdCheckedTest {};

} // namespace

TEST_P(FromFdTest, AdoptsAListeningSocketMadeElsewhereAndAcceptsOnIt) {
    std::uint16_t port = 0;
    const int fd = raw_listener(&port);
    ASSERT_GE(fd, 0);
    auto l = TcpListener::from_fd(fd);
    ASSERT_TRUE(l) << l.error().message();
    EXPECT_EQ(l->fd(), fd);
    EXPECT_EQ(l->local_addr()->port(), port);
    EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << "must not leak into a child";
    EXPECT_NE(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    run([&]() -> Task<void> {
        const SocketAddr to = *SocketAddr::parse("127.0.0.1:" + std::to_string(port));
        auto [in, out] = co_await when_all(as_task(l->accept().timeout(10s)),
                                           as_task(TcpStream::connect(to).timeout(10s)));
        CO_ASSERT(in.has_value() && out.has_value());
        const std::string_view ping = "ping";
        auto sent = co_await out->send_all(ping).timeout(10s);
        CO_ASSERT(sent.has_value());
        std::array<char, 4> got{};
        auto n = co_await in->recv_exact(got).timeout(10s);
        CO_ASSERT(n.has_value());
        EXPECT_EQ(std::string_view(got.data(), 4), ping);
    }());
    *l = TcpListener(); // closes it
    EXPECT_FALSE(is_open(fd));
}

TEST_P(FromFdTest, RefusesWhatIsNotAListeningTcpSocketAndLeavesItOpen) {
    // Not a socket: a pipe.
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    auto not_sock = TcpListener::from_fd(p[0]);
    ASSERT_FALSE(not_sock);
    EXPECT_EQ(not_sock.error(), std::errc::not_a_socket);
    EXPECT_TRUE(is_open(p[0]));
    ::close(p[0]);
    ::close(p[1]);
    // A TCP socket that does not listen, a UDP socket, a listening Unix socket.
    const int tcp = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const int unix_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_TRUE(tcp >= 0 && udp >= 0 && unix_fd >= 0);
    sockaddr_un ua{};
    ua.sun_family = AF_UNIX;
    const std::string name = "galay-from-fd-" + std::to_string(::getpid());
    std::memcpy(ua.sun_path + 1, name.data(), name.size()); // abstract: no file
    ASSERT_EQ(::bind(unix_fd, reinterpret_cast<sockaddr*>(&ua),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
              0);
    ASSERT_EQ(::listen(unix_fd, 4), 0);
    for (const int fd : {tcp, udp, unix_fd}) {
        auto l = TcpListener::from_fd(fd);
        ASSERT_FALSE(l) << "fd " << fd;
        EXPECT_EQ(l.error(), std::errc::invalid_argument);
        EXPECT_TRUE(is_open(fd));
        ::close(fd);
    }
    auto none = TcpListener::from_fd(-1);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error(), std::errc::bad_file_descriptor);
}

GALAY_INSTANTIATE_BACKENDS(FromFdTest);

namespace {

/// One connection: connect, send a numbered message, read it back, close. What went wrong, or
/// "" when the echo came back whole.
std::string one_echo(const sockaddr_storage& to, socklen_t to_len, unsigned long n) {
    const int fd = ::socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::string("socket: ") + std::strerror(errno);
    timeval tv{.tv_sec = 20, .tv_usec = 0}; // bounds a hung server: fails, never hangs
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::string err;
    const std::string msg = "echo " + std::to_string(n) + std::string(40, 'x') + "\n";
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), to_len) != 0) {
        err = std::string("connect: ") + std::strerror(errno);
    } else if (::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL) !=
               static_cast<ssize_t>(msg.size())) {
        err = std::string("send: ") + std::strerror(errno);
    } else {
        std::string got;
        char buf[256];
        while (got.size() < msg.size()) {
            const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                err = r == 0 ? "recv: EOF before the echo"
                             : std::string("recv: ") + std::strerror(errno);
                break;
            }
            got.append(buf, static_cast<std::size_t>(r));
        }
        if (err.empty() && got != msg) err = "echo differs";
    }
    ::close(fd);
    return err;
}

/// Connects continuously (connect, echo, close) to 127.0.0.1:port and, when `v6`, to [::1]:port
/// every other time, until stopped; counts the echoes and keeps the failures.
class Client {
public:
    Client(std::uint16_t port, bool v6)
        : thread_([this, port, v6] { loop(port, v6); }) {}
    ~Client() { stop(); }
    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    unsigned long ok() const { return ok_; }
    /// Wait until `n` echoes have come back (or a failure, or 60 s).
    bool wait_ok(unsigned long n) {
        std::unique_lock lk(m_);
        return cv_.wait_for(lk, 60s, [&] { return ok_ >= n || !failures_.empty(); }) && ok_ >= n;
    }
    std::string report() {
        std::lock_guard lk(m_);
        std::string r = std::to_string(ok_) + " echoes; failures:";
        for (const std::string& f : failures_)
            r += "\n  " + f;
        return r;
    }
    std::vector<std::string> failures() {
        std::lock_guard lk(m_);
        return failures_;
    }

private:
    void loop(std::uint16_t port, bool v6) {
        sockaddr_storage a4{}, a6{};
        auto* s4 = reinterpret_cast<sockaddr_in*>(&a4);
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&a6);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        s6->sin6_addr = in6addr_loopback;
        for (unsigned long n = 0; !stop_; ++n) {
            const bool use6 = v6 && n % 2 == 1;
            std::string err =
                use6 ? one_echo(a6, sizeof(sockaddr_in6), n) : one_echo(a4, sizeof(sockaddr_in), n);
            std::lock_guard lk(m_);
            if (err.empty())
                ++ok_;
            else
                failures_.push_back((use6 ? "[::1]: " : "127.0.0.1: ") + err);
            cv_.notify_all();
        }
    }

    std::atomic<bool> stop_{false};
    std::mutex m_;
    std::condition_variable cv_;
    std::atomic<unsigned long> ok_{0};
    std::vector<std::string> failures_;
    std::thread thread_;
};

/// hot_restart's stdout and stderr (one pipe, which its successors inherit), read line by line.
class ServerOutput {
public:
    explicit ServerOutput(int fd)
        : fd_(fd) {}
    ~ServerOutput() { close(); }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    /// Find a line, among those read so far or the next ones, that matches `re` (its groups in
    /// `m`); false at EOF or after 60 s. (Lines of two processes interleave: any order.)
    bool wait_line(const std::regex& re, std::smatch& m) {
        const auto until = std::chrono::steady_clock::now() + 60s;
        for (std::size_t i = 0;; ++i) {
            while (i == lines_.size()) {
                const std::size_t nl = pending_.find('\n');
                if (nl != std::string::npos) {
                    lines_.push_back(pending_.substr(0, nl));
                    all_ += lines_.back() + "\n";
                    pending_.erase(0, nl + 1);
                } else if (!read_some(until)) {
                    return false;
                }
            }
            if (std::regex_search(lines_[i], m, re)) return true;
        }
    }
    /// Everything until every writer has closed the pipe.
    std::string rest() {
        const auto until = std::chrono::steady_clock::now() + 60s;
        while (read_some(until)) {
        }
        all_ += pending_;
        pending_.clear();
        return all_;
    }
    const std::string& all() const { return all_; }

private:
    bool read_some(std::chrono::steady_clock::time_point until) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
        char buf[4096];
        const ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n <= 0) return false;
        pending_.append(buf, static_cast<std::size_t>(n));
        return true;
    }
    int fd_;
    std::string pending_, all_;
    std::vector<std::string> lines_;
};

/// Start hot_restart with `args`, stdout and stderr into one pipe. Returns the pid (or -1).
pid_t start_server(std::vector<std::string> args, int* out_fd,
                   const std::vector<std::string>& extra_env = {}) {
    if (args.empty() || !args.front().starts_with('/')) args.insert(args.begin(), HOT_RESTART_BIN);
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_store;
    for (char** e = environ; *e != nullptr; ++e)
        env_store.emplace_back(*e);
    env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (std::string& e : env_store)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(p[1]);
    *out_fd = p[0];
    return rc == 0 ? pid : -1;
}

/// Reap `pid` (our child, or an orphan we adopted as subreaper); its exit code, or 128 + signal.
int reap(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class HotRestartTest : public test::FdCheckedTest {
protected:
    void SetUp() override {
        test::FdCheckedTest::SetUp();
        ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    }
    std::vector<std::string> args(std::string port = "0") const {
        return {std::move(port), "--backend", backend_name(GetParam())};
    }
};

} // namespace

TEST_P(HotRestartTest, TwoHandOversUnderContinuousConnectsRefuseAndResetNothing) {
    // The successor checks with SO_PEERCRED that its parent is the one connecting.
    GALAY_SKIP_UNLESS(GALAY_HAVE_LINUX_SOCKETS, "SO_PEERCRED");
    int out_fd = -1;
    pid_t pid = start_server(args(), &out_fd);
    ASSERT_GT(pid, 0);
    ServerOutput out(out_fd);
    const std::regex serving(R"(pid (\d+) serving on 0\.0\.0\.0:(\d+)( \[::\]:\d+)?)");
    std::smatch m;
    ASSERT_TRUE(out.wait_line(serving, m)) << out.all();
    ASSERT_EQ(std::stoi(m[1]), pid);
    const auto port = static_cast<std::uint16_t>(std::stoi(m[2]));
    const bool v6 = m[3].matched;

    // Whatever happens below, no server outlives the test.
    struct KillOnExit {
        pid_t* pid;
        ~KillOnExit() {
            if (*pid > 0 && ::kill(*pid, SIGKILL) == 0) reap(*pid);
        }
    } guard{&pid};
    Client client(port, v6);
    std::string seen = "0"; // the pids that served before
    for (int round = 0; round < 2; ++round) {
        ASSERT_TRUE(client.wait_ok(client.ok() + 50)) << out.all() << client.report();
        ASSERT_EQ(::kill(pid, SIGUSR2), 0);
        const std::regex handed("pid " + std::to_string(pid) + R"( handed (\d+) listener)");
        ASSERT_TRUE(out.wait_line(handed, m)) << out.all();
        EXPECT_EQ(std::stoi(m[1]), v6 ? 2 : 1) << "every listening socket is handed over";
        // The old one drains its connections and exits 0 ...
        seen += "|" + std::to_string(pid);
        EXPECT_EQ(reap(std::exchange(pid, -1)), 0) << out.all();
        // ... and from then on every echo comes from the successor.
        const std::regex successor("pid (?!(?:" + seen + R"() )(\d+) serving on 0\.0\.0\.0:(\d+))");
        ASSERT_TRUE(out.wait_line(successor, m)) << out.all();
        pid = std::stoi(m[1]);
        EXPECT_EQ(std::stoi(m[2]), port);
        ASSERT_TRUE(client.wait_ok(client.ok() + 50)) << out.all() << client.report();
    }
    client.stop();
    for (const std::string& f : client.failures())
        ADD_FAILURE() << "a client connection failed during the hand-overs: " << f;
    EXPECT_GT(client.ok(), 200u);

    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    EXPECT_EQ(reap(std::exchange(pid, -1)), 0); // (an orphan of the old server: ours as subreaper)
    const std::string all = out.rest();
    auto lines_with = [&](const std::string& what) {
        std::size_t n = 0;
        for (std::size_t at = 0; (at = all.find(what, at)) != std::string::npos; at += what.size())
            ++n;
        return n;
    };
    EXPECT_EQ(lines_with(" serving on "), 3u) << all;
    EXPECT_EQ(lines_with(" handed "), 2u) << all;
    EXPECT_EQ(lines_with(" exits: "), 3u) << all;
    EXPECT_EQ(all.find("failed"), std::string::npos) << all;
    out.close();
}

TEST_P(HotRestartTest, BadArgumentsAndABusyPortAreClearErrors) {
    int fd = -1;
    auto run_to_end = [&](std::vector<std::string> a, const std::vector<std::string>& env = {}) {
        const pid_t pid = start_server(std::move(a), &fd, env);
        EXPECT_GT(pid, 0);
        ServerOutput out(fd);
        const std::string text = out.rest();
        return std::make_pair(reap(pid), text);
    };
    auto [code, text] = run_to_end({"port"});
    EXPECT_EQ(code, 2);
    EXPECT_EQ(text, "hot_restart: error: port: 'port' is not a whole number (expected 0 .. 65535) "
                    "(see --help)\n");
    std::tie(code, text) = run_to_end({"0", "--backend"});
    EXPECT_EQ(code, 2);
    EXPECT_TRUE(text.starts_with("hot_restart: error: --backend: ") &&
                text.ends_with(" missing (see --help)\n") &&
                std::count(text.begin(), text.end(), '\n') == 1)
        << text;
    std::tie(code, text) = run_to_end({"0", "--drain", "5x"});
    EXPECT_EQ(code, 2);
    EXPECT_NE(text.find("hot_restart: error: --drain: '5x' is not a whole number"),
              std::string::npos)
        << text;

    std::uint16_t port = 0;
    const int busy = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(busy, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(busy, 1), 0);
    ASSERT_EQ(::getsockname(busy, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port = ntohs(a.sin_port);
    std::tie(code, text) = run_to_end(args(std::to_string(port)));
    ::close(busy);
    EXPECT_EQ(code, 1);
    EXPECT_NE(text.find("cannot listen on port " + std::to_string(port)), std::string::npos)
        << text;

    // A successor whose hand-over descriptor is not there, or is not a Unix stream socket.
    std::tie(code, text) = run_to_end(args(), {"GALAY_HOT_RESTART_FD=999"});
    EXPECT_EQ(code, 1);
    EXPECT_NE(text.find("cannot take over (GALAY_HOT_RESTART_FD=999)"), std::string::npos) << text;
    std::tie(code, text) = run_to_end(args(), {"GALAY_HOT_RESTART_FD=12abc"});
    EXPECT_EQ(code, 1);
    EXPECT_NE(text.find("cannot take over (GALAY_HOT_RESTART_FD=12abc)"), std::string::npos)
        << text;
}

namespace {

/// Start hot_restart (`bin`), wait for its "serving on" line; its pid, or -1.
pid_t start_and_wait(const std::vector<std::string>& a, std::unique_ptr<ServerOutput>* out) {
    int fd = -1;
    const pid_t pid = start_server(a, &fd);
    if (pid <= 0) return -1;
    *out = std::make_unique<ServerOutput>(fd);
    const std::regex serving(R"(pid (\d+) serving on )");
    std::smatch m;
    return (*out)->wait_line(serving, m) ? pid : -1;
}

} // namespace

// A predictable abstract name (@galay-hot-restart-<pid>-<round>) lets any user bind it first and
// make every hand-over fail (EADDRINUSE): the channel is an inherited socketpair, with no name
// to occupy, so squatters on those names change nothing.
TEST_P(HotRestartTest, ASquatterOnPredictableNamesDoesNotBlockTheHandOver) {
    // The successor checks with SO_PEERCRED that its parent is the one connecting.
    GALAY_SKIP_UNLESS(GALAY_HAVE_LINUX_SOCKETS, "SO_PEERCRED");
    std::unique_ptr<ServerOutput> out;
    pid_t pid = start_and_wait(args(), &out);
    ASSERT_GT(pid, 0);
    std::vector<int> squatters;
    for (int round = 1; round <= 3; ++round) {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_GE(fd, 0);
        sockaddr_un ua{};
        ua.sun_family = AF_UNIX;
        const std::string name =
            "galay-hot-restart-" + std::to_string(pid) + "-" + std::to_string(round);
        std::memcpy(ua.sun_path + 1, name.data(), name.size());
        ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&ua),
                         static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
                  0);
        ASSERT_EQ(::listen(fd, 4), 0);
        squatters.push_back(fd);
    }
    ASSERT_EQ(::kill(pid, SIGUSR2), 0);
    std::smatch m;
    const std::regex handed("pid " + std::to_string(pid) + R"( handed \d+ listener)");
    const bool ok = out->wait_line(handed, m);
    if (!ok) ::kill(pid, SIGKILL);
    EXPECT_TRUE(ok) << out->all();
    EXPECT_EQ(reap(pid), ok ? 0 : 128 + SIGKILL) << out->all();
    if (ok) {
        const std::regex next("pid (?!" + std::to_string(pid) + R"( )(\d+) serving on )");
        ASSERT_TRUE(out->wait_line(next, m)) << out->all();
        const pid_t succ = std::stoi(m[1]);
        ASSERT_EQ(::kill(succ, SIGTERM), 0);
        EXPECT_EQ(reap(succ), 0) << out->all();
    }
    for (const int fd : squatters)
        ::close(fd);
}

// A successor that exits at start must be reported with its exit status, not after a timeout as
// "Connection timed out": it closes its end of the channel, so the old process learns of it at
// once, reaps it and serves on.
TEST_P(HotRestartTest, ASuccessorThatExitsAtStartIsReportedWithItsExitStatus) {
    char dir_template[] = "/tmp/galay-hot-restart-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    const std::string dir = dir_template;
    const std::string bin = dir + "/hot_restart";
    {
        std::ifstream from(HOT_RESTART_BIN, std::ios::binary);
        std::ofstream to(bin, std::ios::binary);
        to << from.rdbuf();
    }
    ASSERT_EQ(::chmod(bin.c_str(), 0700), 0);
    std::vector<std::string> a = args();
    a.insert(a.begin(), bin);
    std::unique_ptr<ServerOutput> out;
    pid_t pid = start_and_wait(a, &out);
    ASSERT_GT(pid, 0);
    // The binary on disk is replaced (the reason to restart) by one that exits 3 at once.
    ASSERT_EQ(::unlink(bin.c_str()), 0);
    {
        std::ofstream script(bin);
        script << "#!/bin/sh\nexit 3\n";
    }
    ASSERT_EQ(::chmod(bin.c_str(), 0700), 0);
    ASSERT_EQ(::kill(pid, SIGUSR2), 0);
    std::smatch m;
    const std::regex failed(
        R"(hand-over failed: the successor \(pid \d+\) (closed the hand-over|exited before taking over): exit 3; still serving)");
    EXPECT_TRUE(out->wait_line(failed, m)) << out->all();
    // ... and it still serves: it stops on SIGTERM like any server.
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    EXPECT_EQ(reap(pid), 0) << out->all();
    EXPECT_EQ(out->all().find("timed out"), std::string::npos) << out->all();
    std::filesystem::remove_all(dir);
}

GALAY_INSTANTIATE_BACKENDS(HotRestartTest);
