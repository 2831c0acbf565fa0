#include "common/signals.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace galay::tools {
namespace {

std::atomic<int> g_first_sig{0};
SignalFacts g_first; // written once, by the first handler, before g_recorded is set
std::atomic<bool> g_recorded{false};
int g_fds[2] = {-1, -1}; // [0]: stop_fd(), [1]: written by the handler
void (*g_on_first)() = nullptr;
void (*g_on_forced_exit)() = nullptr;

long long now_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts); // async-signal-safe
    return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

extern "C" void on_stop_signal(int sig, siginfo_t* info, void*) {
    const int saved_errno = errno;
    const SignalFacts facts{sig, info != nullptr ? info->si_code : 0,
                            info != nullptr ? long(info->si_pid) : 0, now_ns()};
    int expected = 0;
    if (g_first_sig.compare_exchange_strong(expected, sig)) {
        g_first = facts;
        g_recorded.store(true);
        if (g_on_first != nullptr) g_on_first();
        if (g_fds[1] >= 0) {
            const char byte = 1;
            [[maybe_unused]] ssize_t n = ::write(g_fds[1], &byte, 1);
        }
        errno = saved_errno;
        return;
    }
    // The first handler may be running on another thread right now (SIGINT and SIGTERM are
    // blocked while a handler runs, so not on this one): its facts are a few stores away.
    while (!g_recorded.load()) {
    }
    if (is_duplicate_stop(g_first, facts)) {
        errno = saved_errno;
        return;
    }
    if (g_on_forced_exit != nullptr) g_on_forced_exit();
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
    ::_exit(128 + sig); // not reached: the default action of SIGINT/SIGTERM terminates
}

} // namespace

bool is_duplicate_stop(const SignalFacts& first, const SignalFacts& later) noexcept {
    return later.sig == first.sig && first.code == SI_USER && later.code == SI_USER &&
           later.pid == first.pid && later.at_ns - first.at_ns < 1'000'000'000LL;
}

void install_stop_handlers(void (*on_first)(), void (*on_forced_exit)()) {
    g_on_first = on_first;
    g_on_forced_exit = on_forced_exit;
    if (g_fds[0] < 0 &&
        ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, g_fds) != 0)
        g_fds[0] = g_fds[1] = -1; // stop_signal() still works; nothing can wait on the fd
    struct sigaction sa {};
    sa.sa_sigaction = on_stop_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART; // no SA_RESETHAND: a second signal is decided above
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() noexcept {
    return g_first_sig.load();
}

int stop_fd() noexcept {
    return g_fds[0];
}

} // namespace galay::tools
