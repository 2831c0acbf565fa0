// The epoll skeleton raw_epoll and raw_http share: one epoll set holding the listener and the
// signalfd (SIGINT/SIGTERM end the loop), a connection table indexed by fd, and the loop that
// waits and dispatches. Each server adds what it does with a connection (accept_all, on_event).
// Like common.hpp, independent of galay.
#pragma once

#include "common.hpp"

#include <sys/epoll.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <vector>

namespace baseline {

template <class Conn>
struct EpollServer {
    static constexpr int kMaxEvents = 1024;

    int ep = -1, lfd = -1, sfd = -1;
    unsigned long accepted = 0;
    int64_t spin_ns = 0;     // raw_epoll --idle-spin: poll (timeout 0) this long before waiting
    std::vector<Conn> conns; // indexed by fd: no lookup, no pointer in epoll_data

    void ctl(int op, int fd, uint32_t events) {
        epoll_event ev{};
        ev.events = events;
        ev.data.fd = fd;
        if (epoll_ctl(ep, op, fd, &ev) != 0) die("epoll_ctl");
    }

    // Room for every fd the process may open (up to 2^20), the listener on port_arg's port
    // (common.hpp's parse_port), the signalfd, both in the epoll set; then the "listening on"
    // line the harness waits for.
    void open(const char* port_arg, const char* name) {
        const int port = open_on(parse_port(port_arg), false, make_signalfd());
        announce(port, name);
    }

    // The same without the announcement, for one of several loops (one per thread) that share
    // the port (`reuse_port`) and one signalfd (nobody reads it, so it stays readable for every
    // loop once a stop signal is pending). Returns the bound port.
    int open_on(int port, bool reuse_port, int signal_fd) {
        const rlim_t nofile = raise_nofile();
        conns.resize(nofile < 1u << 20 ? nofile : 1u << 20);
        sfd = signal_fd;
        int bound = 0;
        lfd = make_listener(port, &bound, reuse_port);
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0) die("epoll_create1");
        ctl(EPOLL_CTL_ADD, lfd, EPOLLIN);
        ctl(EPOLL_CTL_ADD, sfd, EPOLLIN);
        return bound;
    }

    // Polls the set without waiting until an event comes or spin_ns have passed, then waits: the
    // way SchedulerOptions::idle_spin spends CPU for latency.
    static int spin_then_wait(int ep, epoll_event* evs, int64_t spin_ns) {
        const int64_t end = now_ns() + spin_ns;
        do {
            const int n = epoll_wait(ep, evs, kMaxEvents, 0);
            if (n != 0) return n;
        } while (now_ns() < end);
        return epoll_wait(ep, evs, kMaxEvents, -1);
    }

    // Until a signal: the listener's readiness goes to s.accept_all(), a connection's to
    // s.on_event(fd, events). (A template on the server, so both calls are inlined.)
    template <class Server>
    static void run(Server& s) {
        epoll_event evs[kMaxEvents];
        for (;;) {
            int n = s.spin_ns > 0 ? spin_then_wait(s.ep, evs, s.spin_ns)
                                  : epoll_wait(s.ep, evs, kMaxEvents, -1);
            if (n < 0) {
                if (errno == EINTR) continue;
                die("epoll_wait");
            }
            for (int i = 0; i < n; ++i) {
                int fd = evs[i].data.fd;
                if (fd == s.lfd) {
                    s.accept_all();
                } else if (fd == s.sfd) {
                    return;
                } else {
                    s.on_event(fd, evs[i].events);
                }
            }
        }
    }
};

} // namespace baseline
