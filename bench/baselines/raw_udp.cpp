// raw_udp [port] [sockets] [offload]: the hand-written baseline for UDP echo. One thread, epoll
// (level-triggered), recvmmsg/sendmmsg in batches of 64, no galay code. With `sockets` > 1 it
// binds that many SO_REUSEPORT sockets on the port (the kernel spreads clients over them by
// hash), like bench_udp's server workers. Each socket asks for a 4 MiB SO_RCVBUF, as bench_udp's
// server does, so neither loses datagrams to a full queue the other would have kept.
//
// With `offload` (the word) it also does what galay's UdpSocket does by default: UDP_GRO on the
// sockets, so one receive may bring a sender's whole GSO send, which it echoes back unsplit as one
// UDP_SEGMENT send (the cheapest echo there is: no copy, no split).
//
//   taskset -c 0 raw_udp 9000 &  taskset -c 1 bench_udp client -p 9000 -d 5 --server-pid $!
#include "galay_cli.hpp"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

constexpr int kBatch = 64;
constexpr std::size_t kBuffer = 65535;
constexpr std::size_t kStride = 65536 + 64; // padded: the slots' first lines use different sets
bool g_offload = false;

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "raw_udp: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

struct Socket {
    int fd = -1;
    std::unique_ptr<char[]> storage{new char[kStride * kBatch]};
    mmsghdr msgs[kBatch];
    iovec iov[kBatch];
    sockaddr_storage from[kBatch];
    alignas(8) unsigned char control[kBatch][64];
};

int bind_socket(unsigned port, bool reuse_port) {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1, rcvbuf = 4 << 20;
    if (reuse_port && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        die("SO_REUSEPORT");
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf); // capped by rmem_max
    if (g_offload && ::setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) < 0) die("UDP_GRO");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) die("bind");
    return fd;
}

/// Offload mode: a coalesced receive (a UDP_GRO control message) goes back as one UDP_SEGMENT
/// send with the same segment size; anything else as a plain datagram.
void echo_as_received(msghdr& h) {
    int segment = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO)
            std::memcpy(&segment, CMSG_DATA(c), sizeof segment);
    if (segment <= 0) {
        h.msg_control = nullptr;
        h.msg_controllen = 0;
        return;
    }
    h.msg_controllen = CMSG_SPACE(sizeof(std::uint16_t));
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
    const auto seg = static_cast<std::uint16_t>(segment);
    std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
}

/// Echo everything queued on `s` until it would block.
void drain(Socket& s) {
    for (;;) {
        for (int i = 0; i < kBatch; ++i) {
            s.iov[i] = {s.storage.get() + i * kStride, kBuffer};
            s.msgs[i].msg_hdr = {};
            s.msgs[i].msg_hdr.msg_name = &s.from[i];
            s.msgs[i].msg_hdr.msg_namelen = sizeof s.from[i];
            s.msgs[i].msg_hdr.msg_iov = &s.iov[i];
            s.msgs[i].msg_hdr.msg_iovlen = 1;
            if (g_offload) {
                s.msgs[i].msg_hdr.msg_control = s.control[i];
                s.msgs[i].msg_hdr.msg_controllen = sizeof s.control[i];
            }
        }
        int n = ::recvmmsg(s.fd, s.msgs, kBatch, MSG_DONTWAIT, nullptr);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR) continue;
            die("recvmmsg");
        }
        for (int i = 0; i < n; ++i) {
            s.iov[i].iov_len = s.msgs[i].msg_len; // echo exactly what arrived
            if (g_offload) echo_as_received(s.msgs[i].msg_hdr);
        }
        for (int done = 0; done < n;) {
            int m = ::sendmmsg(s.fd, s.msgs + done, static_cast<unsigned>(n - done), 0);
            if (m < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) continue; // rare on UDP: retry
                ++done; // this datagram cannot be sent: skip it (its client counts it lost)
                continue;
            }
            done += m;
        }
        if (n < kBatch) return;
    }
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    unsigned port = 9000;
    int nsock = 1;
    std::string mode;
    cli::App app{"A hand-written epoll UDP echo server (the baseline for bench_udp).", "raw_udp"};
    app.add_option("port", port, "UDP port")->check(tools::whole(1, 65535))->capture_default_str();
    app.add_option("sockets", nsock, "sockets bound to the port (SO_REUSEPORT)")
        ->check(tools::whole(1, 1024))
        ->capture_default_str();
    app.add_option("offload", mode, "'offload': GSO/GRO")->check(cli::IsMember({"offload"}));
    if (auto code = tools::parse_command_line(app, argc, argv, "raw_udp")) return *code;
    g_offload = mode == "offload";
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    std::vector<std::unique_ptr<Socket>> socks;
    for (int i = 0; i < nsock; ++i) {
        auto s = std::make_unique<Socket>();
        s->fd = bind_socket(port, nsock > 1);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.ptr = s.get();
        if (::epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev) < 0) die("epoll_ctl");
        socks.push_back(std::move(s));
    }
    std::printf("listening on 0.0.0.0:%u (raw_udp%s)\n", port, g_offload ? ", offload" : "");
    std::fflush(stdout);
    epoll_event events[64];
    for (;;) {
        int n = ::epoll_wait(ep, events, 64, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; ++i)
            drain(*static_cast<Socket*>(events[i].data.ptr));
    }
}
