// raw_curl: libcurl's multi interface driven by a hand-written epoll loop through its socket and
// timer callbacks (curl_multi_socket_action), with no galay code: the floor for an event loop
// that drives libcurl the way galay_curl does, so that galay's share of galay_curl's cost is
// told apart from libcurl's.
//
//   raw_curl URL... [--transfers 50] [--requests 10000] [--warmup-requests 1000]
//            [--expect-bytes N] [--timeout 30] [--json]
//
// One thread, one epoll set. CURLMOPT_SOCKETFUNCTION: CURL_POLL_IN/OUT/INOUT adds the socket to
// the set (or changes what it waits for; nothing when that is unchanged), CURL_POLL_REMOVE takes
// it out (libcurl may close it next; it sends REMOVE and announces the socket again around every
// request on a reused connection). CURLMOPT_TIMERFUNCTION: the deadline epoll_wait sleeps
// towards; when it passes, curl_multi_socket_action(CURL_SOCKET_TIMEOUT). Level-triggered: a
// socket libcurl did not drain is reported again. Finished transfers are checked, removed,
// pointed at the next URL and added again, as curl_multi_loop does. The flags, checks and
// report are curl_multi_loop's. Exit 0 with no error, 1 with errors, 2 on bad flags.
#include "curl_client.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace {

constexpr const char* kTool = "raw_curl";

using Clock = std::chrono::steady_clock;

struct Loop {
    CURLM* multi = nullptr;
    int ep = -1;
    bool timer_set = false;
    Clock::time_point deadline;
    std::string fatal;
};

/// What a socket waits for in the set, kept by libcurl for us (curl_multi_assign).
struct Watch {
    std::uint32_t events = 0;
};

int on_socket(CURL*, curl_socket_t s, int what, void* loopp, void* socketp) {
    auto* l = static_cast<Loop*>(loopp);
    auto* w = static_cast<Watch*>(socketp);
    if (what == CURL_POLL_REMOVE) {
        if (w == nullptr) return 0; // newer libcurl: REMOVE for a socket never announced
        ::epoll_ctl(l->ep, EPOLL_CTL_DEL, s, nullptr); // before libcurl may close it
        curl_multi_assign(l->multi, s, nullptr);
        delete w;
        return 0;
    }
    const std::uint32_t events = (what & CURL_POLL_IN ? std::uint32_t{EPOLLIN} : 0u) |
                                 (what & CURL_POLL_OUT ? std::uint32_t{EPOLLOUT} : 0u);
    epoll_event e{};
    e.events = events;
    e.data.fd = s;
    if (w == nullptr) {
        if (::epoll_ctl(l->ep, EPOLL_CTL_ADD, s, &e) != 0) {
            l->fatal = std::string("epoll_ctl ADD: ") + std::strerror(errno);
            return -1;
        }
        curl_multi_assign(l->multi, s, new Watch{events});
    } else if (w->events != events) {
        if (::epoll_ctl(l->ep, EPOLL_CTL_MOD, s, &e) != 0) {
            l->fatal = std::string("epoll_ctl MOD: ") + std::strerror(errno);
            return -1;
        }
        w->events = events;
    }
    return 0;
}

int on_timer(CURLM*, long ms, void* loopp) {
    auto* l = static_cast<Loop*>(loopp);
    l->timer_set = ms >= 0;
    if (ms >= 0) l->deadline = Clock::now() + std::chrono::milliseconds(ms);
    return 0;
}

bool run(const foreign::curl::Options& o, foreign::curl::Outcome& r) {
    Loop l;
    l.multi = curl_multi_init();
    l.ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (l.multi == nullptr || l.ep < 0) {
        std::fprintf(stderr, "%s: curl_multi_init or epoll_create1 failed\n", kTool);
        if (l.multi != nullptr) curl_multi_cleanup(l.multi);
        if (l.ep >= 0) ::close(l.ep);
        return false;
    }
    curl_multi_setopt(l.multi, CURLMOPT_SOCKETFUNCTION, &on_socket);
    curl_multi_setopt(l.multi, CURLMOPT_SOCKETDATA, &l);
    curl_multi_setopt(l.multi, CURLMOPT_TIMERFUNCTION, &on_timer);
    curl_multi_setopt(l.multi, CURLMOPT_TIMERDATA, &l);
    foreign::curl::MultiTransfers transfers(o, r, l.multi);
    bool ok = transfers.start_all(kTool);
    int running = 0;
    epoll_event evs[128];
    while (ok && !transfers.done() && l.fatal.empty()) {
        int ms = 1000;
        if (l.timer_set) {
            const auto left =
                std::chrono::ceil<std::chrono::milliseconds>(l.deadline - Clock::now());
            ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 1000));
        }
        const int n = ::epoll_wait(l.ep, evs, 128, ms);
        if (n < 0 && errno != EINTR) {
            l.fatal = std::string("epoll_wait: ") + std::strerror(errno);
            break;
        }
        for (int i = 0; i < n; ++i) {
            const std::uint32_t ev = evs[i].events;
            const int mask = (ev & EPOLLIN ? CURL_CSELECT_IN : 0) |
                             (ev & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                             (ev & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(l.multi, evs[i].data.fd, mask, &running);
        }
        if (l.timer_set && Clock::now() >= l.deadline) {
            l.timer_set = false; // single-shot: libcurl sets the next one
            curl_multi_socket_action(l.multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        if (!transfers.reap()) l.fatal = "curl_multi_add_handle failed";
    }
    if (!l.fatal.empty()) {
        std::fprintf(stderr, "%s: %s\n", kTool, l.fatal.c_str());
        ok = false;
    }
    transfers.clear();
    curl_multi_cleanup(l.multi); // its REMOVEs free the Watch records
    ::close(l.ep);
    return ok;
}

} // namespace

int main(int argc, char** argv) {
    return foreign::curl::multi_main(
        argc, argv, kTool,
        "raw_curl: GETs over libcurl's multi interface on a hand-written epoll loop "
        "(curl_multi_socket_action; the floor of galay_curl)",
        &run);
}
