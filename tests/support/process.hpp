// Running a tool as a process: its stdout and stderr through pipes, waiting for a line it prints
// (so a signal is sent only once the tool has said it is running), signals, and its exit.
//
// Nothing here sleeps for a fixed time: every wait is for an event (output, delivery of a
// signal, exit) and is bounded by a generous deadline that fails the test instead of hanging it.
//
// A tool never outlives its test: the destructor kills and reaps it, and it runs with a
// parent-death signal (SIGKILL), so a test process that crashes or is killed by ctest's timeout
// takes it along (through util-linux's `setpriv --pdeathsig`, which sets it and execs the tool in
// the same process: posix_spawn cannot set one).
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace galay::test {

struct ProcessResult {
    bool exited = false;    ///< ended with exit(); else killed by `signal`
    int exit_code = -1;     ///< exit status, or 128 + signal (what a shell shows)
    int signal = 0;         ///< the signal that killed it, or 0
    bool timed_out = false; ///< the deadline passed and the test killed it
    std::string out, err;
};

class Process {
public:
    /// Start `argv[0]` with `argv`. `keep_stdout_writer`: the test keeps a second write end of
    /// the stdout pipe (fill_stdout_pipe).
    explicit Process(std::vector<std::string> argv, bool keep_stdout_writer = false) {
        int out[2], err[2];
        if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
            ADD_FAILURE() << "pipe: " << std::strerror(errno);
            return;
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, err[1], 2);
        std::vector<char*> args;
        static const bool have_setpriv = ::access(kSetpriv, X_OK) == 0;
        static std::string pdeathsig[] = {kSetpriv, "--pdeathsig", "KILL", "--"};
        if (have_setpriv)
            for (std::string& a : pdeathsig)
                args.push_back(a.data());
        for (std::string& a : argv)
            args.push_back(a.data());
        args.push_back(nullptr);
        const int rc = ::posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (keep_stdout_writer)
            out_writer_ = out[1];
        else
            ::close(out[1]);
        ::close(err[1]);
        out_fd_ = out[0];
        err_fd_ = err[0];
        if (rc != 0) {
            ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
            pid_ = -1;
        }
    }
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;
    ~Process() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        for (int fd : {out_fd_, err_fd_, out_writer_})
            if (fd >= 0) ::close(fd);
    }

    pid_t pid() const noexcept { return pid_; }
    const std::string& out() const noexcept { return out_; }
    const std::string& err() const noexcept { return err_; }

    /// Read until stdout (or stderr, `from_stderr`) contains `text`. False when the process
    /// closed its output first or the deadline passed.
    bool wait_for(const std::string& text, bool from_stderr = false,
                  std::chrono::seconds deadline = std::chrono::seconds(60)) {
        const auto until = std::chrono::steady_clock::now() + deadline;
        const std::string& buf = from_stderr ? err_ : out_;
        while (buf.find(text) == std::string::npos) {
            if (!pump(until)) return buf.find(text) != std::string::npos;
        }
        return true;
    }

    void signal(int sig) const { ::kill(pid_, sig); }

    /// Wait until `sig`, sent to the process, has been taken by one of its threads (it is no
    /// longer pending), or the process has gone. Reads /proc/<pid>/status.
    bool wait_delivered(int sig, std::chrono::seconds deadline = std::chrono::seconds(30)) {
        const auto until = std::chrono::steady_clock::now() + deadline;
        const unsigned long long bit = 1ull << (sig - 1);
        while (std::chrono::steady_clock::now() < until) {
            std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
            std::string line;
            bool pending = false, alive = false;
            while (std::getline(f, line)) {
                if (line.rfind("State:", 0) == 0) alive = line.find('Z') == std::string::npos;
                if (line.rfind("ShdPnd:", 0) == 0 || line.rfind("SigPnd:", 0) == 0)
                    pending |= (std::stoull(line.substr(7), nullptr, 16) & bit) != 0;
            }
            if (!alive || !pending) return true;
            std::this_thread::yield();
        }
        return false;
    }

    /// Wait until the process catches `sig` (its handler is installed: SigCgt in /proc).
    bool wait_catches(int sig, std::chrono::seconds deadline = std::chrono::seconds(30)) {
        const auto until = std::chrono::steady_clock::now() + deadline;
        const unsigned long long bit = 1ull << (sig - 1);
        while (std::chrono::steady_clock::now() < until) {
            std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
            std::string line;
            while (std::getline(f, line))
                if (line.rfind("SigCgt:", 0) == 0 &&
                    (std::stoull(line.substr(7), nullptr, 16) & bit) != 0)
                    return true;
            std::this_thread::yield();
        }
        return false;
    }

    /// Fill the stdout pipe until it is full, so that the process's next write to stdout blocks
    /// (needs keep_stdout_writer). The `fill` bytes are read back by finish(), after whatever
    /// the pipe held already.
    void fill_stdout_pipe(char fill) {
        // A second open of the pipe has a file description of its own: non-blocking here does
        // not make the process's stdout non-blocking.
        const std::string self = "/proc/self/fd/" + std::to_string(out_writer_);
        const int fd = ::open(self.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            ADD_FAILURE() << "open " << self << ": " << std::strerror(errno);
            return;
        }
        const std::string junk(4096, fill);
        while (::write(fd, junk.data(), junk.size()) > 0) {
        }
        while (::write(fd, junk.data(), 1) > 0) { // the rest of the last page, byte by byte
        }
        ::close(fd);
        ::close(out_writer_);
        out_writer_ = -1;
    }

    /// Read all output until the process closes it, then reap it. Past the deadline the process
    /// is killed and `timed_out` is set.
    ProcessResult finish(std::chrono::seconds deadline = std::chrono::seconds(120)) {
        ProcessResult r;
        if (out_writer_ >= 0) {
            ::close(out_writer_);
            out_writer_ = -1;
        }
        const auto until = std::chrono::steady_clock::now() + deadline;
        while (pump(until)) {
        }
        if (std::chrono::steady_clock::now() >= until && (out_fd_ >= 0 || err_fd_ >= 0)) {
            r.timed_out = true;
            ::kill(pid_, SIGKILL);
        }
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        reaped_ = true;
        r.exited = WIFEXITED(status);
        r.exit_code = r.exited ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        r.out = out_;
        r.err = err_;
        return r;
    }

private:
    static constexpr const char* kSetpriv = "/usr/bin/setpriv";

    /// One poll over the open pipes and one read from each readable one. False once both are
    /// closed or the deadline passed.
    bool pump(std::chrono::steady_clock::time_point until) {
        pollfd fds[2];
        int n = 0;
        for (int fd : {out_fd_, err_fd_})
            if (fd >= 0) fds[n++] = {fd, POLLIN, 0};
        if (n == 0) return false;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              until - std::chrono::steady_clock::now())
                              .count();
        if (left <= 0) return false;
        if (::poll(fds, n, static_cast<int>(left)) <= 0) return true;
        char buf[65536];
        for (int i = 0; i < n; ++i) {
            if (fds[i].revents == 0) continue;
            const bool is_out = fds[i].fd == out_fd_;
            const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
            if (got > 0) {
                (is_out ? out_ : err_).append(buf, static_cast<std::size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                (is_out ? out_fd_ : err_fd_) = -1;
            }
        }
        return true;
    }

    pid_t pid_ = -1;
    int out_fd_ = -1, err_fd_ = -1, out_writer_ = -1;
    bool reaped_ = false;
    std::string out_, err_;
};

/// Run a process to the end.
inline ProcessResult run_process(std::vector<std::string> argv,
                                 std::chrono::seconds deadline = std::chrono::seconds(120)) {
    Process p(std::move(argv));
    return p.finish(deadline);
}

} // namespace galay::test
