// Which scheduler's driver holds kernel state for an fd that outlives close(2) of the fd.
//
// On io_uring, a registered-file slot and an armed multishot recv each hold a reference to the
// socket or file, so close(2) alone would leave it open (a peer would never see the FIN). They
// must be dropped whenever galay closes or releases that fd, from whatever thread that happens
// on. The owner of each fd (at most one driver) is recorded here so that a close on another
// thread, or on a thread with no scheduler, can tell the owning driver to drop them.
#pragma once

#include "driver/driver.hpp"

#include <atomic>
#include <mutex>
#include <vector>

namespace galay::detail {

class FdOwners {
public:
    /// The kernel's default ceiling for RLIMIT_NOFILE (fs.nr_open): 8 MiB of address space,
    /// of which only the pages for fds in use are ever touched.
    static constexpr int kMaxFd = 1 << 20;

    static bool in_range(int fd) noexcept { return fd >= 0 && fd < kMaxFd; }
    static Driver* owner(int fd) noexcept { return slots_[fd].load(std::memory_order_acquire); }
    /// Make `d` the owner of `fd`; false when another driver owns it.
    static bool claim(int fd, Driver* d) noexcept {
        Driver* expected = nullptr;
        return slots_[fd].compare_exchange_strong(expected, d, std::memory_order_acq_rel);
    }
    /// Clear the owner of `fd` if it is `d`.
    static bool disown(int fd, Driver* d) noexcept {
        Driver* expected = d;
        return slots_[fd].compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
    }
    /// Held while a driver is told from another thread to drop an fd, and while a driver that
    /// owns fds is destroyed, so the one never meets the other half-destroyed.
    static std::mutex& mutex() noexcept { return mutex_; }

private:
    static std::atomic<Driver*> slots_[kMaxFd];
    static std::mutex mutex_;
};

/// The fds other threads forgot for one driver (its forget_fd_remote), which the driver's own
/// thread then drops: filled under FdOwners::mutex(), which forget_fd_remote's caller holds, and
/// emptied under it by take().
class RemoteForgets {
public:
    /// With FdOwners::mutex() held.
    void push(int fd) {
        fds_.push_back(fd);
        pending_.store(true, std::memory_order_release);
    }
    bool pending() const noexcept { return pending_.load(std::memory_order_acquire); }
    /// The queued fds, the queue left empty.
    std::vector<int> take() {
        std::vector<int> fds;
        std::lock_guard lock(FdOwners::mutex());
        fds.swap(fds_);
        pending_.store(false, std::memory_order_relaxed);
        return fds;
    }

private:
    std::vector<int> fds_;
    std::atomic<bool> pending_{false};
};

} // namespace galay::detail
