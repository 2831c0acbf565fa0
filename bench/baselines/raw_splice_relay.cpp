// raw_splice_relay: a hand-written TCP relay on epoll and splice(2), the floor for
// bench/studies/relay.py.
//
//   raw_splice_relay <listen-port> <upstream-ip:port>
//
// Single thread, edge-triggered epoll; each accepted connection gets a blocking connect to the
// upstream (loopback: immediate), then both sockets are non-blocking and each direction has its
// own pipe (allocated per connection: the simplest relay, not a pooled one). On any event of a
// pair both directions are pumped until splice(2) would block: pipe -> destination first, then
// source -> pipe. EOF is passed on as a write shutdown; an error closes the pair.
#include "common.hpp"
#include "galay_cli.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Dir {
    int src = -1, dst = -1;
    int pipe_r = -1, pipe_w = -1;
    size_t held = 0;
    bool eof = false;
};
struct Pair {
    Dir up, down; // client -> upstream, upstream -> client
    int client = -1, server = -1;
};

// Returns false when the pair must be closed.
bool pump(Dir& d) {
    for (;;) {
        while (d.held > 0) {
            ssize_t n = splice(d.pipe_r, nullptr, d.dst, nullptr, d.held,
                               SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
            if (n < 0) return errno == EAGAIN;
            d.held -= static_cast<size_t>(n);
        }
        if (d.eof) return true;
        ssize_t n =
            splice(d.src, nullptr, d.pipe_w, nullptr, 1 << 20, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
        if (n < 0) return errno == EAGAIN;
        if (n == 0) {
            d.eof = true;
            shutdown(d.dst, SHUT_WR);
            return true;
        }
        d.held = static_cast<size_t>(n);
    }
}

void close_pair(Pair* p) {
    for (int fd :
         {p->client, p->server, p->up.pipe_r, p->up.pipe_w, p->down.pipe_r, p->down.pipe_w})
        close(fd);
    delete p;
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    int port = 0;
    std::string up;
    sockaddr_in upstream{};
    upstream.sin_family = AF_INET;
    cli::App app{"A hand-written epoll + splice TCP relay (the baseline for tcp_proxy).",
                 "raw_splice_relay"};
    app.add_option("listen-port", port, "TCP port to listen on (0: any free port)")
        ->required()
        ->check(tools::whole(0, 65535));
    app.add_option("upstream", up, "IPv4:PORT to relay to")
        ->required()
        ->check(cli::Validator(
            [&upstream](std::string& s) -> std::string {
                const auto colon = s.rfind(':');
                const auto p =
                    colon == std::string::npos
                        ? std::nullopt
                        : tools::parse_whole(std::string_view(s).substr(colon + 1), 1, 65535);
                if (!p || inet_pton(AF_INET, s.substr(0, colon).c_str(), &upstream.sin_addr) != 1)
                    return "'" + s + "' is not IPv4:PORT";
                upstream.sin_port = htons(static_cast<uint16_t>(*p));
                return "";
            },
            "IPv4:PORT", "upstream"));
    if (auto code = tools::parse_command_line(app, argc, argv, "raw_splice_relay")) return *code;
    signal(SIGPIPE, SIG_IGN);
    baseline::raise_nofile();
    int bound = 0;
    const int lfd = baseline::make_listener(port, &bound);
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event lev{.events = EPOLLIN, .data = {.ptr = nullptr}};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    std::printf("raw_splice_relay: %d -> %s\n", bound, up.c_str());
    std::fflush(stdout);
    epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; ++i) {
            if (evs[i].data.ptr == nullptr) {
                for (;;) {
                    int c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (c < 0) break;
                    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                    int one = 1;
                    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    if (connect(s, reinterpret_cast<sockaddr*>(&upstream), sizeof upstream) != 0) {
                        close(c);
                        close(s);
                        continue;
                    }
                    fcntl(s, F_SETFL, O_NONBLOCK);
                    auto* p = new Pair;
                    p->client = c;
                    p->server = s;
                    int a[2], b[2];
                    if (pipe2(a, O_NONBLOCK | O_CLOEXEC) != 0 ||
                        pipe2(b, O_NONBLOCK | O_CLOEXEC) != 0)
                        baseline::die("pipe2");
                    p->up = {c, s, a[0], a[1]};
                    p->down = {s, c, b[0], b[1]};
                    epoll_event ev{.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                   .data = {.ptr = p}};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                    epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
                }
                continue;
            }
            auto* p = static_cast<Pair*>(evs[i].data.ptr);
            const bool ok = pump(p->up) && pump(p->down);
            if (!ok || (p->up.eof && p->down.eof && p->up.held == 0 && p->down.held == 0)) {
                epoll_ctl(ep, EPOLL_CTL_DEL, p->client, nullptr);
                epoll_ctl(ep, EPOLL_CTL_DEL, p->server, nullptr);
                close_pair(p); // (a later event in this batch for it: see below)
                for (int j = i + 1; j < n; ++j)
                    if (evs[j].data.ptr == p) evs[j].data.ptr = nullptr, evs[j].events = 0;
            }
        }
    }
}
