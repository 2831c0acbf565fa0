// Command: building the child's argv, environment and stdio, posix_spawn (vfork-fast, and a
// missing program is an error from spawn itself), the pidfd, and output().
#include "galay/process.hpp"
#include "platform/fd_calls.hpp"
#include "process/exit_watch.hpp"

#include <fcntl.h>
#include <spawn.h>
#if GALAY_HAVE_PIDFD
#include <sys/syscall.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>

extern char** environ;

namespace galay::process {

namespace {

/// The descriptors a spawn opens; the parent's ends go to the Child, the rest close here.
struct StdioPlan {
    int child_fd[3] = {-1, -1, -1}; // dup2'd onto 0, 1, 2 in the child
    galay::OwnedFd close_after[3];  // the child's ends (and /dev/null), closed after spawn
};

Result<void> plan_one(Stdio how, int target, StdioPlan& plan, Child& child, PipeWriter& in,
                      PipeReader& out) {
    (void)child;
    if (how == Stdio::inherit) return {};
    if (how == Stdio::null) {
        int fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0) return fail(errno);
        plan.close_after[target] = galay::OwnedFd(fd);
        plan.child_fd[target] = fd;
        return {};
    }
    auto p = galay::pipe();
    if (!p) return std::unexpected(p.error());
    if (target == 0) {
        plan.child_fd[0] = p->reader.fd();
        plan.close_after[0] = galay::OwnedFd(p->reader.release());
        in = std::move(p->writer);
    } else {
        plan.child_fd[target] = p->writer.fd();
        plan.close_after[target] = galay::OwnedFd(p->writer.release());
        out = std::move(p->reader);
    }
    return {};
}

std::vector<std::string>
child_environment(bool clear,
                  const std::vector<std::pair<std::string, std::optional<std::string>>>& changes) {
    std::map<std::string, std::string> env;
    if (!clear)
        for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
            std::string_view kv(*e);
            const auto eq = kv.find('=');
            if (eq != std::string_view::npos)
                env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
        }
    for (const auto& [k, v] : changes) {
        if (v)
            env[k] = *v;
        else
            env.erase(k);
    }
    std::vector<std::string> out;
    out.reserve(env.size());
    for (const auto& [k, v] : env)
        out.push_back(k + "=" + v);
    return out;
}

/// Read all of `from` into `into`, up to `limit` bytes. More is output_too_large: the child is
/// killed and `stop` cancels the read of its other stream (which a grandchild, one end of a
/// shell pipeline, may still hold open after the child is gone).
Task<Result<void>> read_all(PipeReader& from, std::string& into, std::size_t limit, Child& child,
                            CancelSource& stop) {
    char chunk[16384];
    for (;;) {
        auto n = co_await from.read(std::span(chunk, sizeof chunk));
        if (!n) co_return std::unexpected(n.error());
        if (*n == 0) co_return Result<void>{};
        if (into.size() + *n > limit) {
            (void)child.kill(SIGKILL);
            stop.cancel();
            co_return std::unexpected(make_error_code(errc::output_too_large));
        }
        into.append(chunk, *n);
    }
}

} // namespace

Command::Command(std::string program)
    : program_(std::move(program)) {}

Command& Command::arg(std::string a) {
    args_.push_back(std::move(a));
    return *this;
}
Command& Command::args(std::vector<std::string> as) {
    for (auto& a : as)
        args_.push_back(std::move(a));
    return *this;
}
Command& Command::env(std::string key, std::string value) {
    env_.emplace_back(std::move(key), std::move(value));
    return *this;
}
Command& Command::env_remove(const std::string& key) {
    env_.emplace_back(key, std::nullopt);
    return *this;
}
Command& Command::env_clear() {
    env_clear_ = true;
    env_.clear();
    return *this;
}
Command& Command::current_dir(std::string dir) {
    dir_ = std::move(dir);
    return *this;
}
Command& Command::set_stdin(Stdio s) noexcept {
    stdin_ = s;
    return *this;
}
Command& Command::set_stdout(Stdio s) noexcept {
    stdout_ = s;
    return *this;
}
Command& Command::set_stderr(Stdio s) noexcept {
    stderr_ = s;
    return *this;
}

Command& Command::process_group(pid_t pgid) noexcept {
    pgroup_ = pgid;
    return *this;
}

Result<Child> Command::spawn() {
    Child child;
    StdioPlan plan;
    PipeReader unused;
    PipeWriter unused_in;
    if (auto r = plan_one(stdin_, 0, plan, child, child.stdin_, unused); !r)
        return fail(r.error().value());
    if (auto r = plan_one(stdout_, 1, plan, child, unused_in, child.stdout_); !r)
        return fail(r.error().value());
    if (auto r = plan_one(stderr_, 2, plan, child, unused_in, child.stderr_); !r)
        return fail(r.error().value());

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int t = 0; t < 3; ++t)
        if (plan.child_fd[t] >= 0) posix_spawn_file_actions_adddup2(&fa, plan.child_fd[t], t);
    if (dir_) posix_spawn_file_actions_addchdir_np(&fa, dir_->c_str());
    // The thread that spawns may block signals (galay's signal handling does); the child must
    // start as a fresh program would.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (pgroup_) {
        posix_spawnattr_setpgroup(&attr, *pgroup_);
        flags |= POSIX_SPAWN_SETPGROUP;
    }
    posix_spawnattr_setflags(&attr, flags);

    std::vector<char*> argv;
    argv.push_back(program_.data());
    for (auto& a : args_)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    std::vector<char*> envp;
    char** env = environ;
    if (env_clear_ || !env_.empty()) {
        env_strings = child_environment(env_clear_, env_);
        for (auto& e : env_strings)
            envp.push_back(e.data());
        envp.push_back(nullptr);
        env = envp.data();
    }
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, program_.c_str(), &fa, &attr, argv.data(), env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) return fail(rc);
#if GALAY_HAVE_PIDFD
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); // close-on-exec
    const int err = pidfd < 0 ? errno : 0;
#else
    int exit_pipe[2] = {-1, -1};
    int err = platform::pipe_cloexec(exit_pipe, true) < 0 ? errno : 0;
    if (err == 0) err = galay::detail::watch_exit(pid, exit_pipe[1]);
    if (err != 0 && exit_pipe[0] >= 0) ::close(exit_pipe[0]);
    const int pidfd = err != 0 ? -1 : exit_pipe[0];
#endif
    if (pidfd < 0) {
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        return fail(err);
    }
    child.pid_ = pid;
    child.pidfd_ = galay::OwnedFd(pidfd);
    return child;
}

Task<Result<Output>> Command::output(std::size_t limit) {
    Command c = *this;
    if (c.stdin_ == Stdio::inherit) c.stdin_ = Stdio::null;
    c.stdout_ = Stdio::piped;
    c.stderr_ = Stdio::piped;
    auto child = c.spawn();
    if (!child) co_return std::unexpected(child.error());
    Output out;
    CancelSource stop;
    auto [o, e] = co_await when_all(
        with_cancel(stop, read_all(child->stdout_pipe(), out.out, limit, *child, stop)),
        with_cancel(stop, read_all(child->stderr_pipe(), out.err, limit, *child, stop)));
    if (!o || !e) {
        (void)child->kill(SIGKILL);
        (void)co_await child->wait();
        // The stream that overflowed says so; the other one was only cancelled because of it.
        const bool out_failed = !o && (e || o.error() == errc::output_too_large);
        co_return std::unexpected(out_failed ? o.error() : e.error());
    }
    auto st = co_await child->wait();
    if (!st) co_return std::unexpected(st.error());
    out.status = *st;
    co_return out;
}

} // namespace galay::process
