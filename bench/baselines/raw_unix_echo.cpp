// raw_unix_echo: the hand-written epoll Unix-socket echo server galay's `bench_server --unix` is
// measured against, and a Unix-socket echo load client for both.
//
//   raw_unix_echo server PATH             single thread, level-triggered epoll, read + write per
//                                         event; SIGINT/SIGTERM stop it (status 0)
//   raw_unix_echo client PATH -c N -s SIZE -d SECS
//                                         N connections, each one SIZE-byte message in flight
//                                         (ping-pong), every echoed byte verified; prints one
//                                         JSON object: {"requests", "seconds", "qps"}
//
// No galay code: it is the yardstick. A short write is finished before the next read of that
// connection (blocking the loop for it would be unfair to nobody at 256 B: it never happens).
#include "galay_cli.hpp"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "raw_unix_echo: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

sockaddr_un address(const char* path, socklen_t* len) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (std::strlen(path) >= sizeof a.sun_path) {
        std::fprintf(stderr, "raw_unix_echo: path longer than %zu bytes\n", sizeof a.sun_path - 1);
        std::exit(2);
    }
    std::strcpy(a.sun_path, path);
    *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + std::strlen(path) + 1);
    return a;
}

int serve(const char* path) {
    socklen_t len;
    sockaddr_un a = address(path, &len);
    ::unlink(path);
    int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) die("socket");
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), len) < 0) die("bind");
    if (::listen(lfd, 4096) < 0) die("listen");
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigprocmask(SIG_BLOCK, &stops, nullptr);
    int sfd = ::signalfd(-1, &stops, SFD_CLOEXEC);
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = lfd;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    ev.data.fd = sfd;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    std::printf("listening on %s (raw_unix_echo)\n", path);
    std::fflush(stdout);
    static char buf[65536];
    epoll_event events[1024];
    unsigned long echoes = 0;
    for (;;) {
        int n = ::epoll_wait(ep, events, 1024, -1);
        if (n < 0 && errno == EINTR) continue;
        for (int i = 0; i < n; ++i) {
            const int fd = events[i].data.fd;
            if (fd == sfd) {
                ::unlink(path);
                std::printf("stopped: %lu echoes\n", echoes);
                return 0;
            }
            if (fd == lfd) {
                for (;;) {
                    int c = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (c < 0) break;
                    epoll_event cev{};
                    cev.events = EPOLLIN;
                    cev.data.fd = c;
                    ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            ssize_t got = ::read(fd, buf, sizeof buf);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) continue;
                ::close(fd);
                continue;
            }
            ssize_t off = 0;
            while (off < got) {
                ssize_t w = ::send(fd, buf + off, static_cast<size_t>(got - off), MSG_NOSIGNAL);
                if (w > 0) {
                    off += w;
                } else if (w < 0 && errno == EAGAIN) {
                    pollfd p{fd, POLLOUT, 0};
                    ::poll(&p, 1, -1);
                } else {
                    break;
                }
            }
            ++echoes;
        }
    }
}

int client(const char* path, int conns, std::size_t size, double secs) {
    socklen_t len;
    sockaddr_un a = address(path, &len);
    std::vector<int> fds;
    std::vector<std::size_t> got(static_cast<std::size_t>(conns), 0);
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    std::string msg(size, 'm');
    for (std::size_t i = 0; i < size; ++i)
        msg[i] = static_cast<char>('a' + i % 26);
    for (int i = 0; i < conns; ++i) {
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) die("socket");
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), len) < 0) die("connect");
        ::fcntl(fd, F_SETFL, O_NONBLOCK);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = static_cast<std::uint32_t>(i);
        ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        fds.push_back(fd);
    }
    std::vector<char> buf(size);
    unsigned long requests = 0;
    for (int fd : fds)
        if (::write(fd, msg.data(), size) != static_cast<ssize_t>(size)) die("write");
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + std::chrono::duration<double>(secs);
    epoll_event events[1024];
    while (std::chrono::steady_clock::now() < end) {
        int n = ::epoll_wait(ep, events, 1024, 100);
        for (int i = 0; i < n; ++i) {
            const std::uint32_t c = events[i].data.u32;
            const int fd = fds[c];
            ssize_t r = ::read(fd, buf.data() + got[c], size - got[c]);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                std::fprintf(stderr, "raw_unix_echo: connection %u closed by the server\n", c);
                return 1;
            }
            if (std::memcmp(buf.data() + got[c], msg.data() + got[c], static_cast<size_t>(r)) !=
                0) {
                std::fprintf(stderr, "raw_unix_echo: connection %u: wrong bytes echoed\n", c);
                return 1;
            }
            got[c] += static_cast<std::size_t>(r);
            if (got[c] < size) continue;
            got[c] = 0;
            ++requests;
            if (::write(fd, msg.data(), size) != static_cast<ssize_t>(size)) die("write");
        }
    }
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("{\"requests\": %lu, \"seconds\": %.3f, \"qps\": %.1f}\n", requests, took,
                static_cast<double>(requests) / took);
    for (int fd : fds)
        ::close(fd);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string server_path, client_path;
    int conns = 100;
    std::size_t size = 256;
    double secs = 5;
    cli::App app{"A hand-written epoll echo server and client over a Unix stream socket.",
                 "raw_unix_echo"};
    app.require_subcommand(1);
    cli::App* server = app.add_subcommand("server", "echo on a Unix socket at PATH");
    server->add_option("PATH", server_path, "socket path")->required()->check(tools::non_empty());
    cli::App* client_cmd = app.add_subcommand("client", "connect to PATH and measure echoes");
    client_cmd->add_option("PATH", client_path, "socket path")
        ->required()
        ->check(tools::non_empty());
    client_cmd->add_option("-c", conns, "connections")
        ->check(tools::whole(1, 100000))
        ->capture_default_str();
    client_cmd->add_option("-s", size, "message bytes")
        ->check(tools::whole(1, 1 << 24))
        ->capture_default_str();
    client_cmd->add_option("-d", secs, "seconds")
        ->check(tools::seconds(0.001, 86400))
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "raw_unix_echo")) return *code;
    if (server->parsed()) return serve(server_path.c_str());
    return client(client_path.c_str(), conns, size, secs);
}
