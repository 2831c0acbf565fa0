// raw_epoll [port] [--lt|--et] [--threads N] [--idle-spin US]: the hand-written epoll echo server
// galay is measured against (--idle-spin: epoll_server.hpp).
//
// Single thread, non-blocking sockets, one read and one write per readiness event, TCP_NODELAY
// (inherited from the listener). The hot path is exactly read() + write() per event plus the
// amortised epoll_wait(); nothing is allocated per request.
//
// A short write is never lost: the unsent tail goes into a per-connection pending buffer, reads
// stop until it is flushed on EPOLLOUT (that is the back-pressure), and then reading resumes.
//
// Two trigger modes (both measured; see bench/baselines/README.md):
//   --lt (default) level-triggered; interest is EPOLLIN, switched to EPOLLOUT only while a
//                  pending buffer exists (an epoll_ctl only on the rare short write).
//   --et           edge-triggered; EPOLLIN|EPOLLOUT registered once, never modified. A read that
//                  returns less than the buffer drained the socket, so no extra read to EAGAIN.
//
// --threads N runs N such loops, one per thread, each with its own SO_REUSEPORT listener on the
// port (the kernel hashes each new connection to one of them): the shape of galay's sharded
// Runtime (bench_server --threads N --listen sharded), for the connection-churn study.
#include "epoll_server.hpp"
#include "galay_cli.hpp"

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace {

constexpr size_t kReadBuf = 64 * 1024;

struct Conn {
    std::unique_ptr<char[]> pend; // unsent echo bytes; allocated on the first short write only
    uint32_t off = 0, len = 0, cap = 0;
    bool open = false;
};

struct Server : baseline::EpollServer<Conn> {
    bool edge = false;
    bool accept_paused = false;
    unsigned long short_writes = 0; // printed at exit, with accepted
    alignas(64) char buf[kReadBuf];

    void close_conn(int fd) {
        Conn& c = conns[fd];
        c.open = false;
        c.len = c.off = 0;
        ::close(fd); // also removes it from the epoll set
        if (accept_paused) {
            accept_paused = false;
            ctl(EPOLL_CTL_ADD, lfd, EPOLLIN);
        }
    }

    void accept_all() {
        for (;;) {
            int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
                if (errno == EMFILE || errno == ENFILE) {
                    // Level-triggered listener would spin; stop listening until a close.
                    std::fprintf(stderr, "raw_epoll: accept: %s (pausing accepts)\n",
                                 std::strerror(errno));
                    epoll_ctl(ep, EPOLL_CTL_DEL, lfd, nullptr);
                    accept_paused = true;
                    return;
                }
                baseline::die("accept4");
            }
            if (static_cast<size_t>(fd) >= conns.size()) conns.resize(fd + 1024);
            conns[fd].open = true;
            ++accepted;
            ctl(EPOLL_CTL_ADD, fd, edge ? (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) : EPOLLIN);
        }
    }

    // Keeps the unsent tail for EPOLLOUT; the buffer is allocated once, on the first short write.
    void stash(int fd, Conn& c, const char* p, size_t n) {
        if (c.cap == 0) {
            c.pend.reset(new char[kReadBuf]); // n <= kReadBuf: it came from one read
            c.cap = kReadBuf;
        }
        ++short_writes;
        std::memcpy(c.pend.get(), p, n);
        c.off = 0;
        c.len = static_cast<uint32_t>(n);
        if (!edge) ctl(EPOLL_CTL_MOD, fd, EPOLLOUT);
    }

    // Returns false when the connection was closed.
    bool flush(int fd, Conn& c) {
        ssize_t w = ::write(fd, c.pend.get() + c.off, c.len);
        if (w < 0) {
            if (errno == EAGAIN) return true;
            close_conn(fd);
            return false;
        }
        c.off += static_cast<uint32_t>(w);
        c.len -= static_cast<uint32_t>(w);
        if (c.len == 0 && !edge) ctl(EPOLL_CTL_MOD, fd, EPOLLIN);
        return true;
    }

    // One read, one write. Returns the number of bytes read (0 when nothing more to do).
    size_t echo_once(int fd, Conn& c) {
        ssize_t r = ::read(fd, buf, kReadBuf);
        if (r <= 0) {
            if (r < 0 && errno == EAGAIN) return 0;
            close_conn(fd); // EOF or error (ECONNRESET...)
            return 0;
        }
        ssize_t w = ::write(fd, buf, static_cast<size_t>(r));
        if (w == r) return static_cast<size_t>(r);
        if (w < 0) {
            if (errno != EAGAIN) {
                close_conn(fd);
                return 0;
            }
            w = 0;
        }
        stash(fd, c, buf + w, static_cast<size_t>(r - w));
        return 0; // stop reading until the pending bytes are out
    }

    void on_event(int fd, uint32_t events) {
        Conn& c = conns[fd];
        if (!c.open) return; // closed earlier in this batch
        if (c.len != 0) {
            // Level mode only registers EPOLLOUT here. In edge mode an error/hangup also
            // surfaces through write(), so we need not look at the event bits.
            if (!flush(fd, c) || c.len != 0) return;
            if (!edge) return; // EPOLLIN is re-armed; level trigger reports pending input
        } else if (edge && !(events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
            return; // a bare EPOLLOUT edge with nothing to flush
        }
        if (!edge) {
            echo_once(fd, c);
            return;
        }
        // Edge mode: a full buffer means there may be more; a short read drained the socket.
        while (echo_once(fd, c) == kReadBuf && conns[fd].open) {
        }
    }
};

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string port_text = "8080";
    bool edge = false, level = false;
    unsigned threads = 1, spin_us = 0;
    cli::App app{"A hand-written epoll echo server (the baseline for bench_server).", "raw_epoll"};
    app.add_option("port", port_text, "TCP port (0: any free port)")
        ->check(tools::whole(0, 65535))
        ->capture_default_str();
    auto* et = app.add_flag("--et", edge, "edge-triggered");
    app.add_flag("--lt", level, "level-triggered (the default)")->excludes(et);
    app.add_option("-t,--threads", threads,
                   "loops, one per thread, each with a SO_REUSEPORT listener on the port")
        ->check(tools::whole(1, 64))
        ->capture_default_str();
    app.add_option("--idle-spin", spin_us,
                   "poll the set (no wait) this many microseconds before waiting in the kernel")
        ->check(tools::whole(0, 1000000))
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "raw_epoll")) return *code;
    std::vector<std::unique_ptr<Server>> srvs;
    for (unsigned i = 0; i < threads; ++i) {
        srvs.push_back(std::make_unique<Server>());
        srvs.back()->edge = edge;
        srvs.back()->spin_ns = int64_t(spin_us) * 1000;
    }
    if (threads == 1) {
        srvs[0]->open(port_text.c_str(), "raw_epoll");
    } else {
        // The signalfd is made (and the stop signals blocked) before any thread starts, so every
        // thread inherits the mask and all loops see the one signalfd become readable.
        const int sfd = baseline::make_signalfd();
        int port = srvs[0]->open_on(baseline::parse_port(port_text.c_str()), true, sfd);
        for (unsigned i = 1; i < threads; ++i)
            srvs[i]->open_on(port, true, sfd);
        baseline::announce(port, "raw_epoll");
    }
    std::vector<std::thread> others;
    for (unsigned i = 1; i < threads; ++i)
        others.emplace_back([s = srvs[i].get()] { Server::run(*s); });
    Server::run(*srvs[0]);
    for (std::thread& t : others)
        t.join();

    for (const auto& srv : srvs) {
        std::fprintf(stderr, "raw_epoll: exit: %lu accepted, %lu short writes\n", srv->accepted,
                     srv->short_writes);
        for (size_t fd = 0; fd < srv->conns.size(); ++fd)
            if (srv->conns[fd].open) ::close(static_cast<int>(fd));
        ::close(srv->lfd);
        ::close(srv->ep);
    }
    ::close(srvs[0]->sfd);
    return 0;
}
