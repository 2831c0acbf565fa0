// galay/process.hpp: pipes and child processes.
//
//     galay::Task<void> run() {
//         galay::process::Command ls("ls");
//         ls.arg("-l");
//         auto out = co_await ls.output(1 << 20);   // Result<galay::process::Output>
//         if (!out) co_return; // ENOENT: no such program; errc::output_too_large
//         if (out->status.success()) { /* out->out: ls's stdout, out->err: its stderr */ }
//         galay::process::Command sleeper("sleep");
//         sleeper.arg("100");
//         auto child = sleeper.spawn();
//         if (!child) co_return;
//         auto st = co_await child->wait().timeout(std::chrono::seconds(1));
//         if (!st) { (void)child->kill(SIGKILL); st = co_await child->wait(); }
//     }
//
// Every operation takes `.timeout(d)` and cancellation. A child is waited for through its pidfd
// (io_uring's WAITID where the kernel has it, the pidfd's readiness otherwise). Nothing galay
// opens leaks into a child: every descriptor galay makes is close-on-exec.
#pragma once

#include "galay/detail/buffers.hpp"
#include "galay/detail/process_ops.hpp"
#include "galay/detail/transfer_ops.hpp"
#include "galay/fd_handle.hpp"
#include "galay/owned_fd.hpp"
#include "galay/task.hpp"

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace galay {

/// The read end of a pipe. Move-only; destroying it closes it. Has `recv` too, so io::BufReader
/// reads lines from it. Its descriptor (`fd`, `is_open`, `close`, `release`) is an FdHandle's.
class PipeReader : public FdHandle {
public:
    PipeReader() noexcept = default;
    /// Adopt a pipe's read end. It is put in blocking mode (a child may share it); galay itself
    /// never blocks on it.
    explicit PipeReader(int fd) noexcept;

    /// Read up to `buf.size()` bytes; 0 means every writer has closed.
    template <MutableBuffer B>
    [[nodiscard]] detail::TransferAwaitable read(B&& buf) noexcept {
        return {detail::OpCode::read,   fd_.get(), std::ranges::data(buf), std::ranges::size(buf),
                detail::Transfer::some, 0};
    }
    /// The same as read(), under the name the buffered I/O layer asks for.
    template <MutableBuffer B>
    [[nodiscard]] detail::TransferAwaitable recv(B&& buf) noexcept {
        return read(std::forward<B>(buf));
    }
    /// Read exactly `buf.size()` bytes; EOF before that is `errc::unexpected_eof`.
    template <MutableBuffer B>
    [[nodiscard]] detail::TransferAwaitable read_exact(B&& buf) noexcept {
        return {detail::OpCode::read,    fd_.get(), std::ranges::data(buf), std::ranges::size(buf),
                detail::Transfer::exact, 0};
    }
};

/// The write end of a pipe. Move-only; destroying it closes it (the reader then sees EOF; so
/// does `close()`). Writing to a pipe nobody reads is `EPIPE` (galay ignores SIGPIPE once it makes
/// a pipe). Its descriptor (`fd`, `is_open`, `close`, `release`) is an FdHandle's.
class PipeWriter : public FdHandle {
public:
    PipeWriter() noexcept = default;
    /// Adopt a pipe's write end (put in blocking mode, as PipeReader's).
    explicit PipeWriter(int fd) noexcept;

    /// Write some of `buf`; returns how many bytes the pipe took.
    template <ConstBuffer B>
    [[nodiscard]] detail::TransferAwaitable write(const B& buf) noexcept {
        return {detail::OpCode::write,  fd_.get(), detail::buffer_data(buf), std::ranges::size(buf),
                detail::Transfer::some, 0};
    }
    /// Write all of `buf`.
    template <ConstBuffer B>
    [[nodiscard]] detail::TransferAwaitable write_all(const B& buf) noexcept {
        return {detail::OpCode::write, fd_.get(), detail::buffer_data(buf), std::ranges::size(buf),
                detail::Transfer::all, 0};
    }
};

/// Both ends of a new pipe.
struct Pipe {
    PipeReader reader; ///< the read end
    PipeWriter writer; ///< the write end
};

/// A new pipe (close-on-exec at both ends).
Result<Pipe> pipe() noexcept;

namespace process {

/// Where a child's stdin, stdout or stderr goes.
enum class Stdio {
    inherit, ///< the parent's own
    null,    ///< /dev/null
    piped,   ///< a pipe to the parent (Child::stdin_pipe() / stdout_pipe() / stderr_pipe())
};

/// How a child ended.
struct ExitStatus {
    bool exited = false; ///< it called exit(); else a signal ended it
    int code = -1;       ///< its exit code (when exited)
    int signal = 0;      ///< the signal that ended it (when not exited)
    /// Exited with code 0.
    bool success() const noexcept { return exited && code == 0; }
    /// "exit 0", "exit 3", "signal 9".
    std::string to_string() const;
};

/// What `Command::output` collected.
struct Output {
    ExitStatus status; ///< how the child ended
    std::string out;   ///< its stdout
    std::string err;   ///< its stderr
};

/// A running (or finished) child process. Move-only, but not while a wait() is pending.
/// Dropping a child that has not been waited for kills it (SIGKILL) and reaps it, so no zombie
/// is left; it blocks the thread only for the moment the kernel takes to end it. To let a
/// child outlive its Child (and this process), `detach()` it.
class Child {
public:
    Child() noexcept = default;
    /// Takes over the child of `o`.
    Child(Child&& o) noexcept;
    /// Kills and reaps its own child (if any), then takes over the one of `o`.
    Child& operator=(Child&& o) noexcept;
    ~Child();

    /// Its process id.
    pid_t id() const noexcept { return pid_; }
    /// Wait for it to end and reap it: `Result<ExitStatus>`. Once reaped, returns the same
    /// status at once.
    [[nodiscard]] detail::WaitAwaitable wait() noexcept { return detail::WaitAwaitable(*this); }
    /// Send `sig` (through the pidfd: never to a recycled pid). `ESRCH` once it is reaped.
    Result<void> kill(int sig = SIGKILL) noexcept;
    /// Its status if it has ended (reaping it), nothing while it runs.
    Result<std::optional<ExitStatus>> try_wait() noexcept;
    /// Let the child run on without this Child: galay closes its pidfd and pipes and will
    /// neither kill nor reap it. Reaping is then the caller's job: a detached child that ends
    /// while this process runs stays a zombie until this process waits for its pid or exits
    /// (then init, or the nearest subreaper, reaps it). For a successor that outlives its parent
    /// (examples/hot_restart.cpp). Returns its pid (-1 when there was none or it was reaped).
    pid_t detach() noexcept;

    /// The pipe to its stdin (empty unless Stdio::piped). Close it to send EOF.
    PipeWriter& stdin_pipe() noexcept { return stdin_; }
    /// The pipe from its stdout (empty unless Stdio::piped).
    PipeReader& stdout_pipe() noexcept { return stdout_; }
    /// The pipe from its stderr (empty unless Stdio::piped).
    PipeReader& stderr_pipe() noexcept { return stderr_; }

private:
    friend class Command;
    friend class detail::WaitAwaitable;
    void reap_now() noexcept;

    pid_t pid_ = -1;
    galay::OwnedFd pidfd_;
    std::optional<ExitStatus> status_; // set once reaped
    PipeWriter stdin_;
    PipeReader stdout_, stderr_;
};

/// What to run and how: program, arguments, environment, working directory, stdio.
class Command {
public:
    /// Run `program` (looked up in PATH when it has no '/').
    explicit Command(std::string program);

    /// Add one argument.
    Command& arg(std::string a);
    /// Add several arguments.
    Command& args(std::vector<std::string> as);
    /// Set an environment variable of the child.
    Command& env(std::string key, std::string value);
    /// Remove an environment variable from the child's environment.
    Command& env_remove(const std::string& key);
    /// Start the child with an empty environment (then add to it with env()).
    Command& env_clear();
    /// The child's working directory.
    Command& current_dir(std::string dir);
    /// Where the child's stdin comes from (default: inherit).
    Command& set_stdin(Stdio s) noexcept;
    /// Where the child's stdout goes (default: inherit).
    Command& set_stdout(Stdio s) noexcept;
    /// Where the child's stderr goes (default: inherit).
    Command& set_stderr(Stdio s) noexcept;
    /// Start the child in process group `pgid`, as setpgid(0, pgid) in the child would; 0 makes
    /// a new group whose id is the child's pid, so that `kill(-pid, sig)` reaches every process
    /// it starts (that does not leave the group). Default: the parent's group.
    Command& process_group(pid_t pgid) noexcept;

    /// Start it. A program that does not exist is `ENOENT` (not executable: `EACCES`), a
    /// working directory that does not exist `ENOENT` too, at once. The child starts with no
    /// signal blocked and every signal at its default action.
    Result<Child> spawn();
    /// Run it to the end with stdout and stderr piped (stdin null unless set) and collect both,
    /// up to `limit` bytes each. More is `errc::output_too_large`, and the child is killed and
    /// reaped. Cancelling it (or a timeout around it) kills and reaps the child too.
    [[nodiscard]] Task<Result<Output>> output(std::size_t limit);

private:
    std::string program_;
    std::vector<std::string> args_;
    std::vector<std::pair<std::string, std::optional<std::string>>> env_; // nullopt: remove
    bool env_clear_ = false;
    std::optional<std::string> dir_;
    Stdio stdin_ = Stdio::inherit, stdout_ = Stdio::inherit, stderr_ = Stdio::inherit;
    std::optional<pid_t> pgroup_;
};

} // namespace process
} // namespace galay
