// A child process: its pidfd, waiting for it (the `waitid` op), signals, and what dropping it
// does (kill and reap: no zombie is left by any path). Without pidfds (the POSIX profile, macOS,
// FreeBSD) `pidfd_` is the read end of its exit pipe (process/exit_watch.hpp) and the calls take
// its pid, which stays its own until galay reaps it.
#include "galay/process.hpp"
#include "process/exit_watch.hpp"

#if GALAY_HAVE_PIDFD
#include <sys/syscall.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace galay::process {

namespace {

ExitStatus status_of(const siginfo_t& info) noexcept {
    ExitStatus s;
    if (info.si_code == CLD_EXITED) {
        s.exited = true;
        s.code = info.si_status;
    } else {
        s.signal = info.si_status;
    }
    return s;
}

} // namespace

std::string ExitStatus::to_string() const {
    return exited ? "exit " + std::to_string(code) : "signal " + std::to_string(signal);
}

namespace detail {

WaitAwaitable::WaitAwaitable(Child& child) noexcept
    : child_(&child) {
    op_.code = galay::detail::OpCode::waitid;
    op_.fd = child.pidfd_.get();
    op_.aux = static_cast<std::uint64_t>(child.pid_);
}

bool WaitAwaitable::await_ready() const noexcept {
    return child_->status_.has_value() || op_.fd < 0;
}

Result<ExitStatus> WaitAwaitable::result() {
    if (child_->status_) return *child_->status_;
    if (op_.fd < 0) return fail(ECHILD);
    if (op_.result < 0) return fail(static_cast<int>(-op_.result));
    child_->status_ = status_of(info_);
    return *child_->status_;
}

} // namespace detail

Child::Child(Child&& o) noexcept
    : pid_(std::exchange(o.pid_, -1))
    , pidfd_(std::move(o.pidfd_))
    , status_(std::exchange(o.status_, std::nullopt))
    , stdin_(std::move(o.stdin_))
    , stdout_(std::move(o.stdout_))
    , stderr_(std::move(o.stderr_)) {}

Child& Child::operator=(Child&& o) noexcept {
    if (this != &o) {
        reap_now();
        pid_ = std::exchange(o.pid_, -1);
        pidfd_ = std::move(o.pidfd_);
        status_ = std::exchange(o.status_, std::nullopt);
        stdin_ = std::move(o.stdin_);
        stdout_ = std::move(o.stdout_);
        stderr_ = std::move(o.stderr_);
    }
    return *this;
}

Child::~Child() {
    reap_now();
}

void Child::reap_now() noexcept {
    if (pidfd_.is_open() && !status_) {
        (void)kill(SIGKILL);
        siginfo_t info{};
#if GALAY_HAVE_PIDFD
        while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
                        WEXITED) < 0 &&
               errno == EINTR) {
        }
#else
        (void)galay::detail::reap_watched(pid_, &info, true);
#endif
        status_ = status_of(info);
    }
    pidfd_ = galay::OwnedFd();
}

pid_t Child::detach() noexcept {
    const pid_t pid = pidfd_.is_open() && !status_ ? pid_ : -1;
#if !GALAY_HAVE_PIDFD
    if (pid > 0) galay::detail::unwatch_exit(pid);
#endif
    pidfd_ = galay::OwnedFd(); // (closing a pidfd neither signals nor reaps)
    stdin_ = PipeWriter();
    stdout_ = PipeReader();
    stderr_ = PipeReader();
    pid_ = -1;
    return pid;
}

Result<void> Child::kill(int sig) noexcept {
    if (!pidfd_.is_open() || status_) return fail(ESRCH);
#if GALAY_HAVE_PIDFD
    if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), sig, nullptr, 0) < 0) return fail(errno);
#else
    if (::kill(pid_, sig) < 0) return fail(errno); // not reaped: the pid is still the child's
#endif
    return {};
}

Result<std::optional<ExitStatus>> Child::try_wait() noexcept {
    if (status_) return status_;
    if (!pidfd_.is_open()) return fail(ECHILD);
    siginfo_t info{};
#if GALAY_HAVE_PIDFD
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
                 WEXITED | WNOHANG) < 0)
        return fail(errno);
#else
    if (galay::detail::reap_watched(pid_, &info, false) < 0) return fail(errno);
#endif
    if (info.si_pid == 0) return std::optional<ExitStatus>{};
    status_ = status_of(info);
    return status_;
}

} // namespace galay::process
