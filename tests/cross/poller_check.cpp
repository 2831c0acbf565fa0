// The readiness driver's poller on its own (kqueue on macOS and FreeBSD, epoll on Linux): the
// first thing to run on a machine where galay's poller has never run. `make cross` links it for
// each cross target; on the target, `./poller_check` exits 0 and prints one line when an armed
// socket's data is reported (once: edge-triggered) with the tag it was armed with, a peer's close
// is reported as a hangup, and a wake from another thread ends a blocked wait; otherwise it names
// the first check that failed and exits 1. Takes no arguments.
#include "driver/poller/poller.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <thread>

using galay::detail::Poller;

namespace {

int failed(const char* what) {
    std::fprintf(stderr, "poller_check: %s: FAILED (%s)\n", what, Poller::kName);
    return 1;
}

constexpr std::uint32_t kTag = 0x9a1a7u; // what the socket is armed with

/// The bits reported for `fd` by one wait of at most a second (0: no event for it, or one
/// without the tag it was armed with).
std::uint32_t wait_for(Poller& p, int fd, std::int64_t timeout_ns = 1'000'000'000) {
    std::uint32_t bits = 0;
    p.for_each(p.wait(timeout_ns), [&](int f, std::uint32_t b, std::uint32_t tag) {
        if (f == fd && tag == kTag) bits |= b;
    });
    return bits;
}

} // namespace

int main(int argc, char**) {
    if (argc > 1) {
        std::fprintf(stderr, "poller_check: error: takes no arguments\n");
        return 2;
    }
    Poller p;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) return failed("socketpair");
    if (p.watch(sv[0], kTag) != 0) return failed("watch");
    (void)wait_for(p, sv[0], 0); // the initial "writable" edge
    if (::write(sv[1], "x", 1) != 1) return failed("write");
    if (!(wait_for(p, sv[0]) & Poller::kReadable))
        return failed("data is reported readable, with its tag");
    // Edge-triggered: the byte is still unread, but nothing new arrived, so no new event.
    if (wait_for(p, sv[0], 0) & Poller::kReadable) return failed("one event per arrival");
    char c;
    if (::read(sv[0], &c, 1) != 1) return failed("read");
    std::thread waker([&] { p.wake(); });
    const int n = p.wait(5'000'000'000); // returns at once if the wake came first
    waker.join();
    if (n < 1) return failed("a wake from another thread ends the wait");
    ::close(sv[1]);
    if (!(wait_for(p, sv[0]) & Poller::kClosed)) return failed("the peer's close is a hangup");
    ::close(sv[0]);
    std::printf("poller_check: %s: edge-triggered readiness, tags, hangup and wake-up work\n",
                Poller::kName);
    return 0;
}
