// Small helpers shared by the hand-written baselines (raw_epoll, raw_uring, raw_client).
// Deliberately independent of galay: these programs are the yardstick the library is measured
// against, so they must not inherit its costs or its bugs.
#pragma once

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace baseline {

[[noreturn]] inline void die(const char* what) {
    std::fprintf(stderr, "%s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

inline int64_t now_ns() { // CLOCK_MONOTONIC
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Raises the soft RLIMIT_NOFILE to the hard limit and returns the new soft limit.
inline rlim_t raise_nofile() {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) die("getrlimit");
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) die("setrlimit");
    }
    return rl.rlim_cur;
}

// Parses the optional [port] argument (default 8080; 0 picks a free port).
inline int parse_port(const char* arg) {
    if (!arg) return 8080;
    char* end = nullptr;
    long p = std::strtol(arg, &end, 10);
    if (*end != '\0' || p < 0 || p > 65535) {
        std::fprintf(stderr, "invalid port '%s'\n", arg);
        std::exit(2);
    }
    return static_cast<int>(p);
}

// Non-blocking IPv4 listener on 0.0.0.0:port. TCP_NODELAY is set on the listener because Linux
// copies it into every accepted socket: that saves one setsockopt per connection, and it is the
// only way to set it on io_uring direct descriptors, which have no fd to call setsockopt on.
// Returns the fd; *bound_port receives the actual port (useful when port == 0). With
// `reuse_port` (SO_REUSEPORT) several listeners, one per thread, share the port and the kernel
// spreads new connections over them by a hash of the client's address and port.
inline int make_listener(int port, int* bound_port, bool reuse_port = false) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) die("SO_REUSEADDR");
    if (reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        die("SO_REUSEPORT");
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("bind");
    // SOMAXCONN is 4096 on current kernels; the client connects in waves below that.
    if (::listen(fd, SOMAXCONN) != 0) die("listen");
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) die("getsockname");
    *bound_port = ntohs(addr.sin_port);
    return fd;
}

// Blocks SIGINT/SIGTERM and returns a signalfd for them, so the event loop sees the shutdown
// request as an ordinary readable fd (no EINTR races). SIGPIPE is ignored: a peer that vanishes
// mid-write must surface as EPIPE, not kill the server.
inline int make_signalfd() {
    std::signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) die("sigprocmask");
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) die("signalfd");
    return fd;
}

inline void announce(int port, const char* name) {
    std::printf("listening on 0.0.0.0:%d (%s)\n", port, name);
    std::fflush(stdout);
}

} // namespace baseline
