// Closing an fd: every driver that holds state about it forgets it first (the current thread's at
// once, another thread's through FdOwners), so that close(2) really closes it.
#include "galay/owned_fd.hpp"
#include "runtime/fd_owners.hpp"
#include "runtime/scheduler_access.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace galay {

namespace detail {

std::atomic<Driver*> FdOwners::slots_[FdOwners::kMaxFd];
std::mutex FdOwners::mutex_;

bool forget_fd_everywhere(int fd) noexcept {
    if (fd < 0) return true;
    Scheduler* s = Scheduler::current();
    Driver* mine = s != nullptr ? &SchedulerAccess::driver(*s) : nullptr;
    if (mine != nullptr) mine->forget_fd(fd);
    if (!FdOwners::in_range(fd)) return true;
    if (Driver* owner = FdOwners::owner(fd); owner == nullptr || owner == mine) return true;
    // Another driver holds it. Under the mutex it cannot be destroyed while we look at it.
    std::unique_lock lock(FdOwners::mutex());
    Driver* owner = FdOwners::owner(fd);
    if (owner == nullptr || owner == mine) return true;
    if (owner->runs_on_this_thread()) {
        // This thread's scheduler, outside block_on (or another scheduler's block_on is running
        // on this thread): nothing else touches that driver, so it drops the fd right now.
        lock.unlock();
        owner->forget_fd(fd);
        return true;
    }
    if (!FdOwners::disown(fd, owner)) return true;
    owner->forget_fd_remote(fd);
    return false;
}

void close_fd(int fd) noexcept {
    if (fd < 0) return;
    // In a task, the current driver may take the close over (io_uring: an IORING_OP_CLOSE
    // submitted with the stream's cancel), unless a driver of another thread holds it.
    if (Scheduler* s = Scheduler::current(); s != nullptr && FdOwners::in_range(fd)) {
        Driver* owner = FdOwners::owner(fd);
        if ((owner == nullptr || owner == &SchedulerAccess::driver(*s)) &&
            SchedulerAccess::driver(*s).close_later(fd))
            return;
    }
    if (!forget_fd_everywhere(fd)) {
        // A driver on another thread holds the file (a registered slot, an armed recv) until it
        // next runs, which may be a while if its thread is outside block_on. shutdown(2) makes
        // the close visible now: the FIN leaves and a listener stops listening. (Not with
        // SO_LINGER 0: that peer must get the RST which the final release sends. Not a socket:
        // nothing to do, the kernel object is released when that driver lets go.)
        linger l{};
        socklen_t len = sizeof l;
        if (::getsockopt(fd, SOL_SOCKET, SO_LINGER, &l, &len) == 0 &&
            !(l.l_onoff != 0 && l.l_linger == 0))
            ::shutdown(fd, SHUT_RDWR);
    }
    ::close(fd);
}

} // namespace detail
} // namespace galay
