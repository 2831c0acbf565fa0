// galay::signal: a process-wide handler that counts signals and writes a wake-up descriptor (an
// eventfd, or a pipe where there is none), and one dispatcher thread that reads it and posts the
// waiting tasks (see galay/signal.hpp for why not signalfd). Where there is no pidfd, the same
// thread also tells child processes' waits that a child ended (process/exit_watch.hpp).
// Everything here is created on first use and never destroyed.
#include "galay/signal.hpp"
#include "galay/blocking.hpp"
#include "galay/detail/intrusive_list.hpp"
#include "galay/runtime.hpp"
#include "platform/fd_calls.hpp"
#include "platform/thread_calls.hpp"
#include "process/exit_watch.hpp"
#include "runtime/thread_signals.hpp"

#include <poll.h>
#if defined(__APPLE__)
#include <sys/select.h>
#endif
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

namespace galay {
namespace detail {
namespace {

constexpr int kMaxSignal = 63; // one bit each in a 64-bit mask

std::array<std::atomic<std::uint32_t>, kMaxSignal + 1> g_hits{};
// Set (under Hub::m) before any handler is installed, never reset after.
std::atomic<platform::WakeFd*> g_wake{nullptr};

extern "C" void galay_on_signal(int s) {
    const int saved = errno;
    if (s > 0 && s <= kMaxSignal) g_hits[static_cast<std::size_t>(s)].fetch_add(1);
    g_wake.load(std::memory_order_acquire)->signal();
    errno = saved;
}

std::uint64_t bit(int s) {
    return std::uint64_t{1} << s;
}

class Hub {
public:
    std::mutex m;
    std::uint64_t pending = 0;                         // arrived while nobody waited for them
    IntrusiveList<SignalAwaiter, SignalLinks> waiting; // tasks waiting for a signal
    std::unordered_map<pid_t, int> exits;              // watched children: the pipes' write ends

    /// Install the handler for every signal in `mask` not yet handled; `user`: galay::signal's
    /// (a signal only the child watch installed is never kept pending). Returns 0 or an errno.
    int install(std::uint64_t mask, bool user = true) {
        std::lock_guard lk(m);
        if (user) user_ |= mask;
        if (g_wake.load(std::memory_order_relaxed) == nullptr) {
            auto* w = new platform::WakeFd;
            if (w->open() < 0) {
                const int e = errno;
                delete w;
                return e;
            }
            g_wake.store(w, std::memory_order_release);
            // The dispatcher starts with every signal blocked (it unblocks them only while it
            // waits in ppoll): block them here around its creation, since a thread inherits
            // the mask of the one that creates it.
            sigset_t all, old;
            sigfillset(&all);
            ::pthread_sigmask(SIG_SETMASK, &all, &old);
            int err = 0;
            try {
                std::thread([this] { dispatch(); }).detach();
            } catch (const std::system_error& e) {
                err = e.code().value() != 0 ? e.code().value() : EAGAIN;
            }
            ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
            if (err != 0) {
                g_wake.store(nullptr, std::memory_order_release);
                delete w;
                return err;
            }
        }
        for (int s = 1; s <= kMaxSignal; ++s) {
            if ((mask & bit(s)) == 0 || (installed_ & bit(s)) != 0) continue;
            struct sigaction sa {};
            sa.sa_handler = &galay_on_signal;
            sa.sa_flags = SA_RESTART;
            sigemptyset(&sa.sa_mask);
            if (::sigaction(s, &sa, nullptr) != 0) return errno;
            installed_ |= bit(s);
        }
        return 0;
    }

    /// Lowest pending signal in `mask`, consumed; 0 when none.
    int take(std::uint64_t mask) noexcept {
        const std::uint64_t hit = pending & mask;
        if (hit == 0) return 0;
        const int s = __builtin_ctzll(hit);
        pending &= ~bit(s);
        return s;
    }

private:
    void dispatch() noexcept {
        platform::set_thread_name("galay-signal");
        // Every signal stays blocked here except while the thread waits in ppoll(2), which
        // unblocks them all for the wait only: a signal routed to this thread is handled inside
        // that call and nowhere else. That matters under ThreadSanitizer, which runs a handler at
        // once only inside the calls it treats as blocking (ppoll is one) and was seen to lose
        // one delivered elsewhere (runtime/thread_signals.hpp). Other threads take the signals
        // as the kernel chooses; this one takes them even when every other thread blocks them.
        sigset_t none;
        sigemptyset(&none);
        platform::WakeFd* const wake = g_wake.load(std::memory_order_acquire);
        for (;;) {
            pollfd p{wake->read_fd(), POLLIN, 0};
            if (wait_unblocked(p, none) < 0 && errno != EINTR) {
                std::perror("galay: signal dispatcher: ppoll");
                return;
            }
            if ((p.revents & POLLIN) == 0) continue;
            wake->drain();
            std::lock_guard lk(m);
            for (int s = 1; s <= kMaxSignal; ++s) {
                if (g_hits[static_cast<std::size_t>(s)].exchange(0) == 0) continue;
                if (s == SIGCHLD) check_exits();
                bool waited = false;
                for (SignalAwaiter* w = waiting.front(); w != nullptr;) {
                    SignalAwaiter* next = waiting.next(*w);
                    if ((w->mask() & bit(s)) != 0) {
                        waited = true;
                        w->deliver(s); // (unlinks it)
                    }
                    w = next;
                }
                if (!waited && (user_ & bit(s)) != 0) pending |= bit(s);
            }
        }
    }

    /// poll `p` with every signal unblocked for the wait only (ppoll; pselect on macOS, which has
    /// no ppoll).
    static int wait_unblocked(pollfd& p, const sigset_t& none) noexcept {
#if defined(__APPLE__)
        fd_set in;
        FD_ZERO(&in);
        FD_SET(p.fd, &in);
        const int r = ::pselect(p.fd + 1, &in, nullptr, nullptr, nullptr, &none);
        p.revents = r > 0 ? POLLIN : 0;
        return r;
#else
        return ::ppoll(&p, 1, nullptr, &none);
#endif
    }

public:
    /// Under `m`: close the pipe of every watched child that has ended (not reaping it).
    void check_exits() noexcept {
        for (auto it = exits.begin(); it != exits.end();) {
            siginfo_t info{};
            const int r =
                ::waitid(P_PID, static_cast<id_t>(it->first), &info, WEXITED | WNOHANG | WNOWAIT);
            if (r == 0 && info.si_pid == 0) {
                ++it;
                continue;
            }
            ::close(it->second); // ended (or not ours to wait for: the wait reports that)
            it = exits.erase(it);
        }
    }

private:
    std::uint64_t user_ = 0;

    std::uint64_t installed_ = 0;
};

Hub& hub() {
    static Hub* h = new Hub; // never destroyed: the handler and the dispatcher outlive everything
    return *h;
}

} // namespace

void SignalAwaiter::deliver(int signo) noexcept {
    hub().waiting.remove(*this);
    got_ = signo;
    post_to(*sched_, waiter_); // the waiter's frame cannot go away: it unlinks under our lock
}

bool SignalAwaiter::take_pending() noexcept {
    Hub& h = hub();
    std::lock_guard lk(h.m);
    got_ = h.take(mask_);
    return got_ != 0;
}

bool SignalAwaiter::enlist() {
    Hub& h = hub();
    std::lock_guard lk(h.m);
    got_ = h.take(mask_);
    if (got_ != 0) return false;
    h.waiting.push_back(*this);
    return true;
}

bool SignalAwaiter::withdraw() noexcept {
    Hub& h = hub();
    std::lock_guard lk(h.m);
    return h.waiting.remove(*this); // false: delivered, the post is on its way
}

SignalAwaiter::~SignalAwaiter() {
    if (waiter_) { // it was awaited: make sure the dispatcher no longer knows it
        Hub& h = hub();
        std::lock_guard lk(h.m);
        h.waiting.remove(*this);
    }
}

int watch_exit(pid_t pid, int write_fd) noexcept {
    Hub& h = hub();
    if (const int e = h.install(bit(SIGCHLD), false); e != 0) {
        ::close(write_fd);
        return e;
    }
    std::lock_guard lk(h.m);
    h.exits[pid] = write_fd;
    h.check_exits(); // it may have ended before the handler was there
    return 0;
}

void unwatch_exit(pid_t pid) noexcept {
    Hub& h = hub();
    std::lock_guard lk(h.m);
    if (auto it = h.exits.find(pid); it != h.exits.end()) {
        ::close(it->second);
        h.exits.erase(it);
    }
}

int reap_watched(pid_t pid, siginfo_t* info, bool block) noexcept {
    const int flags = block ? WEXITED : WEXITED | WNOHANG;
    for (;;) {
        info->si_pid = 0;
        if (::waitid(P_PID, static_cast<id_t>(pid), info, flags | WNOWAIT) == 0) {
            if (info->si_pid == 0) return 0; // still running
            unwatch_exit(pid);
            info->si_pid = 0;
            if (::waitid(P_PID, static_cast<id_t>(pid), info, WEXITED) == 0) return 0;
        }
        if (errno != EINTR) return -1;
    }
}

} // namespace detail

detail::SignalAwaiter signal(std::initializer_list<int> signos) {
    std::uint64_t mask = 0;
    for (int s : signos) {
        if (s <= 0 || s > detail::kMaxSignal) return detail::SignalAwaiter(0, EINVAL);
        mask |= detail::bit(s);
    }
    if (mask == 0) return detail::SignalAwaiter(0, EINVAL);
    return detail::SignalAwaiter(mask, detail::hub().install(mask));
}

detail::SignalAwaiter signal(int signo) {
    return signal({signo});
}

} // namespace galay
