// AsyncFd on both backends: readiness of socketpairs, pipes, TCP sockets (urgent data, a reset)
// and descriptors other code made (eventfd, timerfd, signalfd); timeouts and cancellation from
// another thread; and the lifetime cases: a descriptor closed while a wait is armed, a number
// reused for a new socket, an AsyncFd let go of on another thread, 10,000 descriptors at once,
// borrowing versus owning.
#include "support/backends.hpp"
#include "support/fds.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// A connected AF_UNIX stream pair, blocking (AsyncFd makes its side non-blocking).
std::pair<int, int> socket_pair() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        throw std::system_error(errno, std::system_category(), "socketpair");
    return {sv[0], sv[1]};
}

/// A loopback TCP connection made with raw system calls: {client, server}.
std::pair<int, int> tcp_pair() {
    int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (l < 0 || ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
        ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::system_error(errno, std::system_category(), "listen");
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        throw std::system_error(errno, std::system_category(), "connect");
    int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(l);
    if (s < 0) throw std::system_error(errno, std::system_category(), "accept");
    return {c, s};
}

/// Fill `fd`'s send buffer (non-blocking) until it would block.
void fill(int fd) {
    static char chunk[65536];
    while (::send(fd, chunk, sizeof chunk, MSG_DONTWAIT) > 0) {
    }
}

/// Read everything `fd` has now (non-blocking).
void drain(int fd) {
    char buf[65536];
    while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
}

bool is_open(int fd) {
    return ::fcntl(fd, F_GETFD) >= 0;
}

/// Active objects of a kernel slab cache (/proc/slabinfo, root only), -1 when unknown.
long slab_objects(const std::string& cache) {
    std::ifstream in("/proc/slabinfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string name;
        long active = -1;
        words >> name >> active;
        if (name == cache) return active;
    }
    return -1;
}

/// This process's resident memory in KiB (/proc/self/status VmRSS), -1 when unknown.
long rss_kib() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
    return -1;
}

/// Registrations of the file with inode `ino` in this process's epoll sets, from each epoll
/// descriptor's /proc/self/fdinfo ("tfd: ... ino:<hex>" per registration).
int epoll_entries_for(ino_t ino) {
    namespace fs = std::filesystem;
    int n = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (fs::read_symlink(e.path(), ec).string() != "anon_inode:[eventpoll]") continue;
        std::ifstream info("/proc/self/fdinfo/" + e.path().filename().string());
        std::string line;
        while (std::getline(info, line)) {
            const auto at = line.find(" ino:");
            if (line.rfind("tfd:", 0) == 0 && at != std::string::npos &&
                std::strtoull(line.c_str() + at + 5, nullptr, 16) == ino)
                ++n;
        }
    }
    return n;
}

/// AsyncFd's waits as tasks, to run in a when_all beside the task that makes the descriptor
/// ready (limit 0: no timeout).
Task<Result<void>> readable_within(AsyncFd& afd, std::chrono::nanoseconds limit) {
    if (limit.count() == 0) co_return co_await afd.readable();
    co_return co_await afd.readable().timeout(limit);
}
Task<Result<void>> writable_within(AsyncFd& afd, std::chrono::nanoseconds limit) {
    co_return co_await afd.writable().timeout(limit);
}
Task<Result<Readiness>> ready_within(AsyncFd& afd, Interest interest,
                                     std::chrono::nanoseconds limit) {
    co_return co_await afd.ready(interest).timeout(limit);
}

} // namespace

class AsyncFdTest : public test::FdCheckedTest {};

TEST_P(AsyncFdTest, ReadableAndWritableOnASocketpair) {
    auto [a, b] = socket_pair();
    run([](int a, int b) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        CO_ASSERT(::fcntl(a, F_GETFL) & O_NONBLOCK); // put in non-blocking mode
        CO_ASSERT(co_await afd->writable().timeout(10s));
        // Readable once the peer writes, from a task that runs after the wait is armed.
        auto writer = [](int b) -> Task<void> {
            co_await yield_now();
            CO_ASSERT(::write(b, "ping", 4) == 4);
        };
        auto [r, done] = co_await when_all(readable_within(*afd, 10s), writer(b));
        CO_ASSERT(r.has_value());
        char buf[8];
        CO_ASSERT(::read(a, buf, sizeof buf) == 4);
    }(a, b));
    ::close(a);
    ::close(b);
}

TEST_P(AsyncFdTest, ReadableAndWritableOnAPipe) {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    run([](int r, int w) -> Task<void> {
        auto in = AsyncFd::borrow(r);
        auto out = AsyncFd::borrow(w);
        CO_ASSERT(in && out);
        // Fill the pipe: the writer waits for room, which the reader's draining makes.
        static char chunk[4096];
        while (::write(w, chunk, sizeof chunk) > 0) {
        }
        CO_ASSERT(errno == EAGAIN);
        auto reader = [](AsyncFd& in, int r) -> Task<void> {
            CO_ASSERT(co_await in.readable().timeout(10s));
            char buf[65536];
            while (::read(r, buf, sizeof buf) > 0) {
            }
        };
        auto [room, done] = co_await when_all(writable_within(*out, 10s), reader(*in, r));
        CO_ASSERT(room.has_value());
        // The writer's end closed: the reader sees a hang-up.
        out->reset();
        ::close(w);
        auto ev = co_await in->ready(Interest::readable).timeout(10s);
        CO_ASSERT(ev && ev->hangup());
    }(p[0], p[1]));
    ::close(p[0]);
}

TEST_P(AsyncFdTest, OneReaderAndOneWriterAtOnce) {
    auto [a, b] = socket_pair();
    run([](int a, int b) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        fill(a); // not writable, not readable: both waits are armed together
        auto peer = [](int b) -> Task<void> {
            co_await yield_now();
            CO_ASSERT(::write(b, "x", 1) == 1);
            drain(b);
        };
        auto [r, w, done] =
            co_await when_all(readable_within(*afd, 10s), writable_within(*afd, 10s), peer(b));
        CO_ASSERT(r.has_value());
        CO_ASSERT(w.has_value());
    }(a, b));
    ::close(a);
    ::close(b);
}

TEST_P(AsyncFdTest, ReadyForInputOrOutputWakesOnOutput) {
    auto [a, b] = socket_pair();
    run([](int a, int b) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        fill(a);
        auto peer = [](int b) -> Task<void> {
            co_await yield_now();
            drain(b); // room to write; nothing to read
        };
        auto [ev, done] = co_await when_all(
            ready_within(*afd, Interest::readable | Interest::writable, 10s), peer(b));
        CO_ASSERT(ev.has_value());
        CO_ASSERT(ev->writable());
        CO_ASSERT(!ev->readable());
    }(a, b));
    ::close(a);
    ::close(b);
}

TEST_P(AsyncFdTest, ReadinessIsLevelTriggered) {
    auto [a, b] = socket_pair();
    ASSERT_EQ(::write(b, "abc", 3), 3);
    run([](int a) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        // Not read in between (as libcurl may do): each wait completes again.
        for (int i = 0; i < 3; ++i)
            CO_ASSERT(co_await afd->readable().timeout(10s));
        char c;
        CO_ASSERT(::read(a, &c, 1) == 1); // still two bytes there
        CO_ASSERT(co_await afd->readable().timeout(10s));
        char rest[2];
        CO_ASSERT(::read(a, rest, 2) == 2);
        auto idle = co_await afd->readable().timeout(20ms);
        CO_ASSERT(!idle && idle.error() == std::errc::timed_out);
    }(a));
    ::close(a);
    ::close(b);
}

TEST_P(AsyncFdTest, TimesOut) {
    auto [a, b] = socket_pair();
    run_paused([](int a) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        auto r = co_await afd->readable().timeout(50ms);
        CO_ASSERT(!r && r.error() == std::errc::timed_out);
        auto ev =
            co_await afd->ready(Interest::priority).deadline(std::chrono::steady_clock::now());
        CO_ASSERT(!ev && ev.error() == std::errc::timed_out);
    }(a));
    ::close(a);
    ::close(b);
}

TEST_P(AsyncFdTest, CancelledThroughACancelTokenFromAnotherThread) {
    auto [a, b] = socket_pair();
    CancelToken token;
    std::atomic<bool> armed{false};
    std::thread canceller([&] {
        while (!armed.load())
            std::this_thread::yield();
        token.cancel();
    });
    auto r = run(with_cancel(token, [](int a, std::atomic<bool>& armed) -> Task<Result<void>> {
        auto afd = AsyncFd::borrow(a);
        if (!afd) co_return std::unexpected(afd.error());
        armed = true; // the cancel may come before or after the wait is armed: same outcome
        co_return co_await afd->readable();
    }(a, armed)));
    canceller.join();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::operation_canceled);
    ::close(a);
    ::close(b);
}

TEST_P(AsyncFdTest, APeerResetWhileArmedIsReported) {
    auto [c, s] = tcp_pair();
    auto ev = run([](int c, int s) -> Task<Result<Readiness>> {
        auto afd = AsyncFd::borrow(c);
        CO_ASSERT(afd.has_value());
        auto reset = [](int s) -> Task<void> {
            co_await yield_now();
            linger l{.l_onoff = 1, .l_linger = 0};
            ::setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof l);
            ::close(s); // RST
        };
        auto [ev, done] = co_await when_all(ready_within(*afd, Interest::readable, 10s), reset(s));
        co_return ev;
    }(c, s));
    ASSERT_TRUE(ev) << ev.error().message();
    EXPECT_TRUE(ev->error() || ev->hangup()) << "bits " << int(ev->bits());
    char buf[8];
    EXPECT_EQ(::recv(c, buf, sizeof buf, 0), -1); // the reset, for the reader that reads
    EXPECT_EQ(errno, ECONNRESET);
    ::close(c);
}

TEST_P(AsyncFdTest, UrgentDataIsPriority) {
    auto [c, s] = tcp_pair();
    run([](int c, int s) -> Task<void> {
        auto afd = AsyncFd::borrow(c);
        CO_ASSERT(afd.has_value());
        auto urgent = [](int s) -> Task<void> {
            co_await yield_now();
            CO_ASSERT(::send(s, "!", 1, MSG_OOB) == 1);
        };
        auto [ev, done] = co_await when_all(ready_within(*afd, Interest::priority, 10s), urgent(s));
        CO_ASSERT(ev.has_value());
        CO_ASSERT(ev->priority());
        CO_ASSERT(co_await afd->priority().timeout(10s)); // still there (level)
        char oob;
        CO_ASSERT(::recv(c, &oob, 1, MSG_OOB) == 1 && oob == '!');
    }(c, s));
    ::close(c);
    ::close(s);
}

// The documented outcome of the caller's bug: the descriptor is closed while a wait is armed and
// the AsyncFd is left alone. The wait ends at its timeout (io_uring's poll holds the old file
// until then, so the peer sees the close only after it), never with readiness.
TEST_P(AsyncFdTest, ClosedWhileAwaitedEndsAtTheTimeout) {
    auto [a, b] = socket_pair();
    run_paused([](int a, int b) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        auto closer = [](int a) -> Task<void> {
            co_await yield_now();
            ::close(a);
        };
        auto [r, done] = co_await when_all(readable_within(*afd, 200ms), closer(a));
        CO_ASSERT(!r && r.error() == std::errc::timed_out);
        afd->release(); // (the number is free: let no reset of this object touch a new file)
        char c;
        CO_ASSERT(::recv(b, &c, 1, MSG_DONTWAIT) == 0); // the file is gone now: EOF
    }(a, b));
    ::close(b);
}

// The contract kept: reset() before the close ends the wait at once and lets go of the file, so
// the close really closes it (io_uring: the peer sees EOF at once).
TEST_P(AsyncFdTest, ResetBeforeTheCloseEndsTheWaitAndFreesTheFile) {
    auto [a, b] = socket_pair();
    run([](int a, int b) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        auto owner = [](AsyncFd& afd, int a, int b) -> Task<void> {
            co_await yield_now();
            afd.reset();
            CO_ASSERT(!afd.is_open());
            ::close(a);
            char c;
            CO_ASSERT(::recv(b, &c, 1, MSG_DONTWAIT) == 0); // EOF now, not EAGAIN
        };
        // No timeout: only the reset ends the wait.
        auto [r, done] = co_await when_all(readable_within(*afd, 0s), owner(*afd, a, b));
        CO_ASSERT(!r && r.error() == std::errc::operation_canceled);
    }(a, b));
    ::close(b);
}

TEST_P(AsyncFdTest, AReusedNumberGetsItsOwnReadiness) {
    auto [a, b] = socket_pair();
    run_paused([](int a, int b) -> Task<void> {
        const int number = a;
        auto first = AsyncFd::borrow(a);
        CO_ASSERT(first.has_value());
        auto owner = [](AsyncFd& first, int a) -> Task<void> {
            co_await yield_now();
            first.reset(); // as on CURL_POLL_REMOVE, then the library closes the socket
            ::close(a);
        };
        auto [old, done] = co_await when_all(readable_within(*first, 10s), owner(*first, a));
        CO_ASSERT(!old && old.error() == std::errc::operation_canceled);
        // A new socket on the same number.
        auto [c, d] = socket_pair();
        if (c != number) {
            CO_ASSERT(::dup3(c, number, O_CLOEXEC) == number);
            ::close(c);
            c = number;
        }
        auto second = AsyncFd::borrow(c);
        CO_ASSERT(second.has_value());
        // The old peer writing to its closed pair wakes nobody; only the new peer does.
        CO_ASSERT(::send(b, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0);
        auto idle = co_await second->readable().timeout(20ms);
        CO_ASSERT(!idle && idle.error() == std::errc::timed_out);
        CO_ASSERT(::write(d, "y", 1) == 1);
        CO_ASSERT(co_await second->readable().timeout(10s));
        second->reset();
        ::close(c);
        ::close(d);
    }(a, b));
    ::close(b);
}

// The caller's bug on top: the number is closed behind a live wait and reused at once. The old
// wait must end with an error (epoll: cancelled when the new AsyncFd takes the number; io_uring:
// at its timeout, its poll being on the old file), never with the new socket's readiness.
TEST_P(AsyncFdTest, AStaleWaitNeverFiresForTheNewFile) {
    auto [a, b] = socket_pair();
    run_paused([](int a) -> Task<void> {
        const int number = a;
        auto stale = AsyncFd::borrow(a);
        CO_ASSERT(stale.has_value());
        auto reuse = [](int number) -> Task<void> {
            co_await yield_now();
            ::close(number); // behind the armed wait
            auto [c, d] = socket_pair();
            if (c != number) {
                CO_ASSERT(::dup3(c, number, O_CLOEXEC) == number);
                ::close(c);
            }
            auto fresh = AsyncFd::borrow(number);
            CO_ASSERT(fresh.has_value());
            // Armed before the new socket is readable: its own registration must wake it.
            auto write_new = [](int d) -> Task<void> {
                co_await yield_now();
                CO_ASSERT(::write(d, "new", 3) == 3);
            };
            auto [r, written] = co_await when_all(readable_within(*fresh, 10s), write_new(d));
            CO_ASSERT(r.has_value());
            fresh->reset();
            ::close(number);
            ::close(d);
        };
        auto [old, done] = co_await when_all(readable_within(*stale, 5s), reuse(number));
        CO_ASSERT(!old.has_value()); // ECANCELED (epoll) or timed out (io_uring)
        stale->release();
    }(a));
    ::close(b);
}

// The owner closes the number before galay lets go of it (no wait armed), and a dup elsewhere (a
// forked child, another library) keeps the first file open: no call can take it out of the
// loop's epoll set any more, so epoll reports it there under the old number. Its readiness must
// not complete a wait on the new file of that number (epoll trusts an event only from the
// number's current registration; io_uring polls the file itself).
TEST_P(AsyncFdTest, AnEarlierFileKeptOpenElsewhereNeverWakesTheNewFile) {
    auto [a, b] = socket_pair();
    const int keep = ::fcntl(a, F_DUPFD_CLOEXEC, 0); // the first file outlives its number
    ASSERT_GE(keep, 0);
    run_paused([](int a, int b) -> Task<void> {
        const int number = a;
        auto first = AsyncFd::borrow(a);
        CO_ASSERT(first.has_value());
        auto armed = co_await first->readable().timeout(1ms); // registered with the loop
        CO_ASSERT(!armed && armed.error() == std::errc::timed_out);
        ::close(a);
        first->reset();
        auto [c, d] = socket_pair();
        if (c != number) {
            CO_ASSERT(::dup3(c, number, O_CLOEXEC) == number);
            ::close(c);
        }
        auto second = AsyncFd::borrow(number);
        CO_ASSERT(second.has_value());
        auto idle = co_await second->readable().timeout(1ms); // its own registration
        CO_ASSERT(!idle && idle.error() == std::errc::timed_out);
        CO_ASSERT(::write(b, "old", 3) == 3); // the earlier file is readable now
        auto stale = co_await second->readable().timeout(20ms);
        CO_ASSERT(!stale && stale.error() == std::errc::timed_out);
        CO_ASSERT(::write(d, "new", 3) == 3);
        auto r = co_await second->ready(Interest::readable).timeout(10s);
        CO_ASSERT(r.has_value() && r->readable());
        second->reset();
        ::close(number);
        ::close(d);
    }(a, b));
    ::close(keep);
    ::close(b);
}

// The contract kept, and a dup elsewhere keeps the file open: letting go of it takes it out of
// the loop's epoll set, where it would otherwise stay, and wake the loop at each of its edges,
// until the dup's close (epoll keeps a registration until the file's last close and no call can
// name the file once its number is closed; kqueue and io_uring stop at the number's close).
TEST_P(AsyncFdTest, LettingGoOfAFileKeptOpenElsewhereTakesItOutOfTheLoop) {
    auto [a, b] = socket_pair();
    const int keep = ::fcntl(a, F_DUPFD_CLOEXEC, 0);
    ASSERT_GE(keep, 0);
    struct stat st {};
    ASSERT_EQ(::fstat(a, &st), 0);
    run_paused([](int a, int b, ino_t ino, Backend backend) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        auto armed = co_await afd->readable().timeout(1ms); // registered with the loop
        CO_ASSERT(!armed && armed.error() == std::errc::timed_out);
        // The probe sees the registration (io_uring's poll is in no epoll set).
        if (backend == Backend::epoll) CO_ASSERT(epoll_entries_for(ino) == 1);
        afd->reset();
        CO_ASSERT(epoll_entries_for(ino) == 0);
        ::close(a);
        CO_ASSERT(::write(b, "x", 1) == 1); // an edge on the file the dup keeps
        co_await yield_now();
        CO_ASSERT(epoll_entries_for(ino) == 0);
    }(a, b, st.st_ino, GetParam()));
    ::close(keep);
    ::close(b);
}

// The contract kept, but on another thread than the loop's: the file leaves the loop's epoll set
// before the reset returns, though a dup keeps it open, and the loop's state of the number is
// cleared at its next turn. So the old file's edges wake no wait of the next file of the number,
// which the loop's next wait registers afresh (not taking the old registration for its own).
namespace {

/// An owner on another thread: let go of `afd` (as on CURL_POLL_REMOVE), close its socket, put a
/// new one on the same number and watch it with a new AsyncFd. Returns the new socket's peer.
int replace_socket(Result<AsyncFd>& afd, int number) {
    afd->reset();
    ::close(number);
    auto [c, peer] = socket_pair();
    if (c != number && ::dup3(c, number, O_CLOEXEC) != number) std::abort();
    if (c != number) ::close(c);
    afd = AsyncFd::borrow(number);
    return peer;
}

/// Back on the loop, after replace_socket: an edge on the old file (`old_peer` writes, a dup
/// keeps it open) wakes nothing; the new socket's `peer` wakes the new AsyncFd.
Task<void> only_the_new_socket_wakes(AsyncFd& afd, int old_peer, int peer) {
    CO_ASSERT(::write(old_peer, "x", 1) == 1);
    auto idle = co_await afd.readable().timeout(20ms);
    CO_ASSERT(!idle && idle.error() == std::errc::timed_out);
    auto writer = [](int peer) -> Task<void> {
        co_await yield_now(); // after the wait is armed
        CO_ASSERT(::write(peer, "y", 1) == 1);
    };
    auto [ready, done] = co_await when_all(readable_within(afd, 10s), writer(peer));
    CO_ASSERT(ready);
}

/// A socket pair whose first end has a dup (closed by the destructor) and its inode.
struct KeptPair {
    int a = -1, b = -1, keep = -1;
    ino_t ino = 0;
    KeptPair() {
        std::tie(a, b) = socket_pair();
        keep = ::fcntl(a, F_DUPFD_CLOEXEC, 0);
        struct stat st {};
        if (keep < 0 || ::fstat(a, &st) != 0) std::abort();
        ino = st.st_ino;
    }
    ~KeptPair() {
        ::close(keep);
        ::close(b);
    }
};

/// The whole case on this loop: watch `p.a`, let `elsewhere(afd, number)` (a task giving the new
/// socket's peer) let go of it on another thread and put a new socket on the number, then check.
template <class Elsewhere>
Task<void> let_go_elsewhere(const KeptPair& p, Backend backend, Elsewhere elsewhere) {
    auto afd = AsyncFd::borrow(p.a);
    CO_ASSERT(afd.has_value());
    auto armed = co_await afd->readable().timeout(1ms); // registered with the loop
    CO_ASSERT(!armed && armed.error() == std::errc::timed_out);
    if (backend == Backend::epoll) CO_ASSERT(epoll_entries_for(p.ino) == 1);
    const int peer = co_await elsewhere(afd, p.a);
    CO_ASSERT(afd.has_value());
    CO_ASSERT(epoll_entries_for(p.ino) == 0);
    co_await only_the_new_socket_wakes(*afd, p.b, peer);
    afd->reset();
    ::close(p.a);
    ::close(peer);
}

} // namespace

TEST_P(AsyncFdTest, LetGoOfOnAPlainThreadLeavesTheLoop) {
    KeptPair p;
    run_paused(let_go_elsewhere(p, GetParam(), [](Result<AsyncFd>& afd, int number) -> Task<int> {
        int peer = -1;
        std::thread([&] { peer = replace_socket(afd, number); }).join();
        co_return peer;
    }));
}

TEST_P(AsyncFdTest, LetGoOfOnAnotherWorkerLeavesTheLoop) {
    KeptPair p;
    Runtime rt(rt_options(2));
    rt.block_on(let_go_elsewhere(p, GetParam(), [](Result<AsyncFd>& afd, int number) -> Task<int> {
        auto replace = [](Result<AsyncFd>& afd, int number) -> Task<int> {
            co_return replace_socket(afd, number);
        };
        co_return co_await spawn_on(1 - this_worker(), replace(afd, number));
    }));
}

// An edge reported for the current file completes the wait with the level it carries: data
// consumed by the descriptor's owner before the loop reports the edge completes nothing.
TEST_P(AsyncFdTest, DataReadBeforeItsEventIsReportedCompletesNothing) {
    auto [a, b] = socket_pair();
    run_paused([](int a, int b) -> Task<void> {
        auto afd = AsyncFd::borrow(a);
        CO_ASSERT(afd.has_value());
        auto armed = co_await afd->readable().timeout(1ms); // registered with the loop
        CO_ASSERT(!armed && armed.error() == std::errc::timed_out);
        // The owner reads what arrived before the loop looks: the edge is queued, stale.
        CO_ASSERT(::write(b, "x", 1) == 1);
        drain(a);
        auto stale = co_await afd->readable().timeout(20ms);
        CO_ASSERT(!stale && stale.error() == std::errc::timed_out);
        CO_ASSERT(::write(b, "y", 1) == 1);
        CO_ASSERT(co_await afd->readable().timeout(10s));
        afd->reset();
        ::close(a);
    }(a, b));
    ::close(b);
}

TEST_P(AsyncFdTest, RegularFilesDirectoriesAndClosedFdsAreRefused) {
    const auto dir =
        std::filesystem::temp_directory_path() / ("galay_async_fd_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const int file = ::open((dir / "f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    ASSERT_GE(file, 0);
    auto r = AsyncFd::borrow(file);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), make_error_code(errc::not_pollable)) << r.error().message();
    EXPECT_NE(r.error().message().find("regular file"), std::string::npos);
    const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(d, 0);
    EXPECT_EQ(AsyncFd::borrow(d).error(), make_error_code(errc::not_pollable));
    // The owning form closes what it refused.
    auto owned = AsyncFd::adopt(OwnedFd(d));
    ASSERT_FALSE(owned);
    EXPECT_FALSE(is_open(d));
    ::close(file);
    auto closed = AsyncFd::borrow(file);
    ASSERT_FALSE(closed);
    EXPECT_EQ(closed.error(), std::errc::bad_file_descriptor);
    EXPECT_EQ(AsyncFd::borrow(-1).error(), std::errc::bad_file_descriptor);
    std::filesystem::remove_all(dir);
    // An empty AsyncFd's wait fails at once.
    run([]() -> Task<void> {
        AsyncFd none;
        auto w = co_await none.readable();
        CO_ASSERT(!w && w.error() == std::errc::bad_file_descriptor);
    }());
}

TEST_P(AsyncFdTest, BorrowingNeverClosesOwningDoes) {
    auto [a, b] = socket_pair();
    {
        auto borrowed = AsyncFd::borrow(a);
        ASSERT_TRUE(borrowed);
        EXPECT_FALSE(borrowed->owns());
        AsyncFd moved = std::move(*borrowed);
        EXPECT_EQ(moved.fd(), a);
        EXPECT_FALSE(borrowed->is_open());
    }
    EXPECT_TRUE(is_open(a));
    {
        auto owned = AsyncFd::adopt(OwnedFd(a));
        ASSERT_TRUE(owned);
        EXPECT_TRUE(owned->owns());
    }
    EXPECT_FALSE(is_open(a));
    // release() hands an owned descriptor back open.
    auto owned = AsyncFd::adopt(OwnedFd(b));
    ASSERT_TRUE(owned);
    EXPECT_EQ(owned->release(), b);
    EXPECT_FALSE(owned->is_open());
    EXPECT_TRUE(is_open(b));
    ::close(b);
}

TEST_P(AsyncFdTest, DescriptorsOtherCodeMade) {
    // An eventfd, a timerfd and a signalfd, made with raw system calls as a library would.
    const int ev = ::eventfd(0, EFD_CLOEXEC);
    const int tm = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR2);
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &mask, &old), 0);
    const int sig = ::signalfd(-1, &mask, SFD_CLOEXEC);
    ASSERT_GE(ev, 0);
    ASSERT_GE(tm, 0);
    ASSERT_GE(sig, 0);
    run([](int ev, int tm, int sig) -> Task<void> {
        auto e = AsyncFd::borrow(ev);
        auto t = AsyncFd::borrow(tm);
        auto s = AsyncFd::borrow(sig);
        CO_ASSERT(e && t && s);
        auto poke = [](int ev, int tm) -> Task<void> {
            co_await yield_now();
            std::uint64_t one = 1;
            CO_ASSERT(::write(ev, &one, sizeof one) == sizeof one);
            itimerspec its{};
            its.it_value.tv_nsec = 1'000'000; // 1 ms
            CO_ASSERT(::timerfd_settime(tm, 0, &its, nullptr) == 0);
            // To this thread (the one whose mask blocks it, which the signalfd reads for).
            CO_ASSERT(::syscall(SYS_tgkill, ::getpid(), ::gettid(), SIGUSR2) == 0);
        };
        auto [re, rt, rs, done] =
            co_await when_all(readable_within(*e, 10s), readable_within(*t, 10s),
                              readable_within(*s, 10s), poke(ev, tm));
        CO_ASSERT(re && rt && rs);
        std::uint64_t v;
        CO_ASSERT(::read(ev, &v, sizeof v) == sizeof v && v == 1);
        CO_ASSERT(::read(tm, &v, sizeof v) == sizeof v && v >= 1);
        signalfd_siginfo si;
        CO_ASSERT(::read(sig, &si, sizeof si) == sizeof si && si.ssi_signo == SIGUSR2);
    }(ev, tm, sig));
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::close(ev);
    ::close(tm);
    ::close(sig);
}

// 10,000 descriptors with a wait armed on each at once, all woken; prints the memory each one
// costs (the guide quotes it).
TEST_P(AsyncFdTest, TenThousandDescriptorsAtOnce) {
    constexpr int kCount = 10'000;
    if (test::fds_available(kCount + 200) < static_cast<std::size_t>(kCount + 200))
        GTEST_SKIP() << "SKIP: the fd limit is below " << kCount + 200;
    std::vector<int> fds;
    for (int i = 0; i < kCount; ++i) {
        fds.push_back(::eventfd(0, EFD_CLOEXEC));
        ASSERT_GE(fds.back(), 0);
    }
    run([](std::vector<int>& fds, Backend backend) -> Task<void> {
        std::vector<AsyncFd> afds;
        afds.reserve(fds.size());
        for (int fd : fds) {
            auto a = AsyncFd::borrow(fd);
            CO_ASSERT(a.has_value());
            afds.push_back(std::move(*a));
        }
        const long rss0 = rss_kib();
        const char* cache = backend == Backend::io_uring ? "io_kiocb" : "eventpoll_epi";
        const long slab0 = slab_objects(cache);
        std::size_t woken = 0;
        std::vector<Task<void>> waits;
        for (AsyncFd& a : afds)
            waits.push_back([](AsyncFd& a, std::size_t& woken) -> Task<void> {
                CO_ASSERT(co_await a.readable().timeout(30s));
                ++woken;
            }(a, woken));
        auto poke = [](std::vector<int>& fds, long rss0, long slab0, const char* cache,
                       std::size_t& woken) -> Task<void> {
            co_await yield_now(); // every wait is armed (registered) by now
            const long rss = rss_kib(), slab = slab_objects(cache);
            if (rss0 >= 0 && rss >= 0)
                std::printf("[ memory ] %ld bytes of this process per armed wait (task frame "
                            "included)\n",
                            (rss - rss0) * 1024 / static_cast<long>(fds.size()));
            if (slab0 >= 0 && slab >= 0)
                std::printf("[ memory ] %s: %ld more kernel objects for %zu waits\n", cache,
                            slab - slab0, fds.size());
            CO_ASSERT(woken == 0);
            std::uint64_t one = 1;
            for (int fd : fds)
                CO_ASSERT(::write(fd, &one, sizeof one) == sizeof one);
        };
        waits.push_back(poke(fds, rss0, slab0, cache, woken));
        co_await when_all(std::move(waits));
        CO_ASSERT(woken == fds.size());
    }(fds, GetParam()));
    for (int fd : fds)
        ::close(fd);
}

GALAY_INSTANTIATE_BACKENDS(AsyncFdTest);
