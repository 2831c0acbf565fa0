// galay::signal: a process-wide handler that counts signals and writes an eventfd, and one
// dispatcher thread that reads it and posts the waiting tasks (see galay/signal.hpp for why not
// signalfd). Everything here is created on first use and never destroyed.
#include "galay/signal.hpp"
#include "galay/blocking.hpp"
#include "galay/detail/intrusive_list.hpp"
#include "galay/runtime.hpp"
#include "runtime/thread_signals.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <system_error>
#include <thread>

namespace galay {
namespace detail {
namespace {

constexpr int kMaxSignal = 63; // one bit each in a 64-bit mask

std::array<std::atomic<std::uint32_t>, kMaxSignal + 1> g_hits{};
std::atomic<int> g_efd{-1};

extern "C" void galay_on_signal(int s) {
    const int saved = errno;
    if (s > 0 && s <= kMaxSignal) g_hits[static_cast<std::size_t>(s)].fetch_add(1);
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(g_efd.load(std::memory_order_relaxed), &one, sizeof one);
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

    /// Install the handler for every signal in `mask` not yet handled. Returns 0 or an errno.
    int install(std::uint64_t mask) {
        std::lock_guard lk(m);
        if (g_efd.load(std::memory_order_relaxed) < 0) {
            const int fd =
                ::eventfd(0, EFD_CLOEXEC); // blocking: read only after ppoll says it is ready
            if (fd < 0) return errno;
            g_efd.store(fd, std::memory_order_release);
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
                ::close(fd);
                g_efd.store(-1, std::memory_order_release);
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
        ::pthread_setname_np(::pthread_self(), "galay-signal");
        // Every signal stays blocked here except while the thread waits in ppoll(2), which
        // unblocks them all for the wait only: a signal routed to this thread is handled inside
        // that call and nowhere else. That matters under ThreadSanitizer, which runs a handler at
        // once only inside the calls it treats as blocking (ppoll is one) and was seen to lose
        // one delivered elsewhere (runtime/thread_signals.hpp). Other threads take the signals
        // as the kernel chooses; this one takes them even when every other thread blocks them.
        sigset_t none;
        sigemptyset(&none);
        const int fd = g_efd.load(std::memory_order_acquire);
        for (;;) {
            pollfd p{fd, POLLIN, 0};
            if (::ppoll(&p, 1, nullptr, &none) < 0 && errno != EINTR) {
                std::perror("galay: signal dispatcher: ppoll");
                return;
            }
            if ((p.revents & POLLIN) == 0) continue;
            std::uint64_t v;
            if (::read(fd, &v, sizeof v) < 0) {
                if (errno == EINTR) continue;
                std::perror("galay: signal dispatcher: read");
                return;
            }
            std::lock_guard lk(m);
            for (int s = 1; s <= kMaxSignal; ++s) {
                if (g_hits[static_cast<std::size_t>(s)].exchange(0) == 0) continue;
                bool waited = false;
                for (SignalAwaiter* w = waiting.front(); w != nullptr;) {
                    SignalAwaiter* next = waiting.next(*w);
                    if ((w->mask() & bit(s)) != 0) {
                        waited = true;
                        w->deliver(s); // (unlinks it)
                    }
                    w = next;
                }
                if (!waited) pending |= bit(s);
            }
        }
    }

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
