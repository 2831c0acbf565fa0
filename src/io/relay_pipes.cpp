// The per-thread pool of pipes that io::copy splices through. A relay takes a pipe only while
// bytes move and gives it back empty, so idle relays hold no descriptors and a busy thread
// reuses a handful of pipes instead of making two per connection.
#include "io/relay_pipes.hpp"
#include "platform/fd_calls.hpp"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace galay::io::detail {
namespace {

// Pipes kept per thread beyond the ones in use; more are closed when given back.
constexpr std::size_t kMaxPooled = 256;

struct PipePool {
    std::vector<RelayPipe> free;
    ~PipePool() {
        for (RelayPipe& p : free) {
            ::close(p.read);
            ::close(p.write);
        }
    }
};

PipePool& pool() noexcept {
    thread_local PipePool p;
    return p;
}

void close_pipe(RelayPipe p) noexcept {
    ::close(p.read);
    ::close(p.write);
}

} // namespace

Result<RelayPipe> take_relay_pipe() noexcept {
    PipePool& p = pool();
    if (!p.free.empty()) {
        RelayPipe r = p.free.back();
        p.free.pop_back();
        return r;
    }
    int fds[2];
    if (platform::pipe_cloexec(fds, true) < 0) return fail(errno);
#ifdef F_GETPIPE_SZ
    const int size = ::fcntl(fds[0], F_GETPIPE_SZ);
#else
    const int size = PIPE_BUF;
#endif
    return RelayPipe{fds[0], fds[1], static_cast<std::uint32_t>(size > 0 ? size : 4096)};
}

void give_relay_pipe(RelayPipe p, bool empty) noexcept {
    PipePool& pl = pool();
    if (!empty || pl.free.size() >= kMaxPooled) {
        close_pipe(p);
        return;
    }
    try {
        pl.free.push_back(p);
    } catch (...) {
        close_pipe(p);
    }
}

std::size_t relay_pipes_pooled() noexcept {
    return pool().free.size();
}

} // namespace galay::io::detail
