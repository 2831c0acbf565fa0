// An AsyncFd let go of on another thread than its loop's: the epoll driver records itself as the
// owner of each descriptor an AsyncFd wait registered (FdOwners), so that a reset, release or
// destruction anywhere takes the file out of this loop's set at once and clears its state here.
#include "driver/epoll/epoll_driver.hpp"
#include "runtime/fd_owners.hpp"

#include <mutex>

namespace galay::detail {

void EpollDriver::own(int fd, FdState& st) noexcept {
    // (Another driver may own the number: then a forget elsewhere reaches only that one, and
    // this registration is cleared when this loop next forgets or registers the number.)
    if (!st.owned && FdOwners::in_range(fd)) st.owned = FdOwners::claim(fd, this);
}

void EpollDriver::disown_all() noexcept {
    std::lock_guard lock(FdOwners::mutex());
    for (std::size_t fd = 0; fd < fds_.size(); ++fd)
        if (fds_[fd].owned) FdOwners::disown(static_cast<int>(fd), this);
}

void EpollDriver::forget_fd_remote(int fd) noexcept {
    // Called with FdOwners::mutex() held (this driver cannot be destroyed meanwhile), before the
    // caller closes the descriptor, so the number still names the file: take it out of the set
    // now (epoll_ctl is safe beside this loop's epoll_wait), as forget_fd would. A dup elsewhere
    // would otherwise keep it there, and no call can name that file once the number is closed.
    poller_.unwatch(fd);
    remote_forgets_.push(fd);
    wake(); // its waits, if any, end with ECANCELED at this loop's next turn
}

void EpollDriver::drain_remote_forgets() noexcept {
    for (int fd : remote_forgets_.take()) {
        if (static_cast<std::size_t>(fd) >= fds_.size()) continue;
        FdState& st = fds_[static_cast<std::size_t>(fd)];
        st.owned = false;   // (FdOwners already forgot us)
        st.foreign = false; // out of the set already: the number may be another file's now
        forget_fd(fd);
    }
}

} // namespace galay::detail
