// Pipes: both ends close-on-exec and in blocking mode (see driver/process_ops.hpp for why), and
// SIGPIPE ignored once a pipe exists, so a write to a closed pipe is EPIPE, not a dead process.
#include "galay/process.hpp"
#include "platform/fd_calls.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

namespace galay {

namespace {

void blocking_mode(int fd) noexcept {
    if (fd < 0) return;
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK)) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

/// A write to a pipe whose reader is gone raises SIGPIPE, which kills by default; ignore it
/// (unless the program installed a handler), as a socket send does with MSG_NOSIGNAL.
void ignore_sigpipe() noexcept {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction old {};
        if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
            struct sigaction ign {};
            ign.sa_handler = SIG_IGN;
            sigemptyset(&ign.sa_mask);
            ::sigaction(SIGPIPE, &ign, nullptr);
        }
    });
}

} // namespace

PipeReader::PipeReader(int fd) noexcept
    : FdHandle(fd) {
    blocking_mode(fd);
    ignore_sigpipe();
}

PipeWriter::PipeWriter(int fd) noexcept
    : FdHandle(fd) {
    blocking_mode(fd);
    ignore_sigpipe();
}

Result<Pipe> pipe() noexcept {
    int fds[2];
    if (platform::pipe_cloexec(fds, false) < 0) return fail(errno);
    return Pipe{PipeReader(fds[0]), PipeWriter(fds[1])};
}

} // namespace galay
