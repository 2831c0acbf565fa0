// galay::signal: a process-wide handler that counts signals and writes a wake-up descriptor (an
// eventfd, or a pipe where there is none), and one dispatcher thread that reads it and posts the
// waiting tasks (see galay/signal.hpp for why not signalfd). Where there is no pidfd, the same
// thread also tells child processes' waits that a child ended (process/exit_watch.hpp).
// On macOS and FreeBSD the dispatcher waits in kevent(2) instead: NOTE_EXIT per watched child,
// and on FreeBSD EVFILT_SIGNAL counts the signals (docs/driver.md, "Signals and children").
// Everything here is created on first use and never destroyed.
#include "galay/signal.hpp"
#include "galay/blocking.hpp"
#include "galay/detail/intrusive_list.hpp"
#include "galay/runtime.hpp"
#include "platform/fd_calls.hpp"
#include "platform/thread_calls.hpp"
#include "process/exit_watch.hpp"
#include "runtime/thread_signals.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#if GALAY_SIGNAL_KQUEUE
#include <sys/event.h>
#include <sys/time.h>
#include <sys/types.h>
#endif
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
#if GALAY_SIGNAL_FILTER
    (void)s; // EVFILT_SIGNAL counts it; being caught is what keeps its default action from running
#else
    const int saved = errno;
    if (s > 0 && s <= kMaxSignal) g_hits[static_cast<std::size_t>(s)].fetch_add(1);
    g_wake.load(std::memory_order_acquire)->signal();
    errno = saved;
#endif
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
        if (!started_) {
            if (const int e = start(); e != 0) return e;
        }
        for (int s = 1; s <= kMaxSignal; ++s) {
            if ((mask & bit(s)) == 0 || (installed_ & bit(s)) != 0) continue;
#if GALAY_SIGNAL_FILTER
            // The filter first: from the handler on, only the filter sees the signal.
            struct kevent ev;
            EV_SET(&ev, static_cast<uintptr_t>(s), EVFILT_SIGNAL, EV_ADD, 0, 0, nullptr);
            if (::kevent(kq_, &ev, 1, nullptr, 0, nullptr) < 0) return errno;
#endif
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
    /// Under `m`, once: the dispatcher and what it waits on. 0 or an errno.
    int start() noexcept {
#if GALAY_SIGNAL_KQUEUE
        kq_ = ::kqueue();
        if (kq_ < 0) return errno;
        ::fcntl(kq_, F_SETFD, FD_CLOEXEC);
#endif
#if !GALAY_SIGNAL_FILTER
        auto* w = new platform::WakeFd;
        int err = w->open() < 0 ? errno : 0;
#if GALAY_SIGNAL_KQUEUE
        if (err == 0) {
            struct kevent ev;
            EV_SET(&ev, static_cast<uintptr_t>(w->read_fd()), EVFILT_READ, EV_ADD, 0, 0, nullptr);
            if (::kevent(kq_, &ev, 1, nullptr, 0, nullptr) < 0) err = errno;
        }
#endif
        if (err != 0) {
            delete w; // (closes what it opened)
            return close_kqueue(err);
        }
        g_wake.store(w, std::memory_order_release);
#endif
        // The dispatcher starts with every signal blocked (see dispatch): block them here around
        // its creation, since a thread inherits the mask of the one that creates it.
        sigset_t all, old;
        sigfillset(&all);
        ::pthread_sigmask(SIG_SETMASK, &all, &old);
        int e = 0;
        try {
            std::thread([this] { dispatch(); }).detach();
        } catch (const std::system_error& ex) {
            e = ex.code().value() != 0 ? ex.code().value() : EAGAIN;
        }
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        if (e != 0) {
#if !GALAY_SIGNAL_FILTER
            delete g_wake.exchange(nullptr, std::memory_order_acq_rel);
#endif
            return close_kqueue(e);
        }
        started_ = true;
        return 0;
    }

    int close_kqueue(int err) noexcept {
#if GALAY_SIGNAL_KQUEUE
        ::close(kq_);
        kq_ = -1;
#endif
        return err;
    }

    /// Under `m`: signal `s` came; wake the tasks waiting for it, or keep it for the next wait.
    void arrived(int s) noexcept {
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

    /// Under `m`: every signal the handler has counted since the last look.
    void take_counted() noexcept {
        for (int s = 1; s <= kMaxSignal; ++s) {
            if (g_hits[static_cast<std::size_t>(s)].exchange(0) == 0) continue;
#if !GALAY_SIGNAL_KQUEUE
            if (s == SIGCHLD) check_exits();
#endif
            arrived(s);
        }
    }

#if GALAY_SIGNAL_KQUEUE
    void dispatch() noexcept {
        platform::set_thread_name("galay-signal");
        // kevent has no signal mask of its own to wait with (ppoll's), so this thread takes
        // signals at any time: a signal every other thread blocks still comes here.
        sigset_t none;
        sigemptyset(&none);
        ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
        std::array<struct kevent, 16> evs;
        for (;;) {
            const int n =
                ::kevent(kq_, nullptr, 0, evs.data(), static_cast<int>(evs.size()), nullptr);
            if (n < 0) {
                if (errno == EINTR) continue;
                std::perror("galay: signal dispatcher: kevent");
                return;
            }
            std::lock_guard lk(m);
            for (int i = 0; i < n; ++i) {
                const struct kevent& ev = evs[static_cast<std::size_t>(i)];
                if (ev.filter == EVFILT_PROC) {
                    check_exit(static_cast<pid_t>(ev.ident)); // NOTE_EXIT (and EV_ONESHOT)
                } else if (ev.filter == EVFILT_SIGNAL) {
                    arrived(static_cast<int>(ev.ident)); // data: how many times; one is kept
                } else if (ev.filter == EVFILT_READ) {
                    g_wake.load(std::memory_order_acquire)->drain();
                    take_counted();
                }
            }
        }
    }
#else
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
            if (::ppoll(&p, 1, nullptr, &none) < 0 && errno != EINTR) {
                std::perror("galay: signal dispatcher: ppoll");
                return;
            }
            if ((p.revents & POLLIN) == 0) continue;
            wake->drain();
            std::lock_guard lk(m);
            take_counted();
        }
    }
#endif

    /// Has child `pid` ended (or is it not ours to wait for: the wait then reports that)? Looks
    /// without reaping.
    static bool has_ended(pid_t pid) noexcept {
        siginfo_t info{};
        const int r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
        return !(r == 0 && info.si_pid == 0);
    }

public:
    /// Under `m`: close the pipe of every watched child that has ended (not reaping it).
    void check_exits() noexcept {
        for (auto it = exits.begin(); it != exits.end();) {
            if (!has_ended(it->first)) {
                ++it;
                continue;
            }
            ::close(it->second);
            it = exits.erase(it);
        }
    }

    /// Under `m`: close the pipe of child `pid` if it is watched and has ended (`ended`: known).
    void check_exit(pid_t pid, bool ended = false) noexcept {
        auto it = exits.find(pid);
        if (it == exits.end() || !(ended || has_ended(pid))) return;
        ::close(it->second);
        exits.erase(it);
    }

#if GALAY_SIGNAL_KQUEUE
    int kq_ = -1; // the dispatcher's: NOTE_EXIT per watched child, the signals
#endif

private:
    std::uint64_t user_ = 0;
    std::uint64_t installed_ = 0;
    bool started_ = false;
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
#if GALAY_SIGNAL_KQUEUE
    // NOTE_EXIT instead of SIGCHLD: galay leaves SIGCHLD's disposition alone.
    if (const int e = h.install(0, false); e != 0) {
        ::close(write_fd);
        return e;
    }
    std::lock_guard lk(h.m);
    h.exits[pid] = write_fd;
    struct kevent ev;
    EV_SET(&ev, static_cast<uintptr_t>(pid), EVFILT_PROC, EV_ADD | EV_ONESHOT, NOTE_EXIT, 0,
           nullptr);
    if (::kevent(h.kq_, &ev, 1, nullptr, 0, nullptr) < 0) {
        const int e = errno;
        if (e != ESRCH) { // ESRCH: gone already (a zombie is not attachable on every system)
            h.exits.erase(pid);
            ::close(write_fd);
            return e;
        }
        h.check_exit(pid, true);
        return 0;
    }
    h.check_exit(pid); // it may have ended before the filter was there
    return 0;
#else
    if (const int e = h.install(bit(SIGCHLD), false); e != 0) {
        ::close(write_fd);
        return e;
    }
    std::lock_guard lk(h.m);
    h.exits[pid] = write_fd;
    h.check_exits(); // it may have ended before the handler was there
    return 0;
#endif
}

void unwatch_exit(pid_t pid) noexcept {
    Hub& h = hub();
    std::lock_guard lk(h.m);
    if (auto it = h.exits.find(pid); it != h.exits.end()) {
#if GALAY_SIGNAL_KQUEUE
        // Before it is reaped: a later exit of a detached child must not wake a recycled pid's
        // watch (ENOENT when NOTE_EXIT has fired already).
        struct kevent ev;
        EV_SET(&ev, static_cast<uintptr_t>(pid), EVFILT_PROC, EV_DELETE, 0, 0, nullptr);
        ::kevent(h.kq_, &ev, 1, nullptr, 0, nullptr);
#endif
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
