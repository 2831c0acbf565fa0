// io_uring ring set-up and teardown: creating the ring with the best flags this kernel takes (and
// saying clearly why it failed), the one-time MSG_RING probe, and the driver's constructor and
// destructor, which set up the buffer ring, the registered-file table and the wake-up eventfd.
#include "driver/uring/uring_driver.hpp"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <mutex>
#include <string>

namespace galay::detail {

std::string sysctl_note() {
    std::ifstream f("/proc/sys/kernel/io_uring_disabled");
    int v = 0;
    if (f >> v && v != 0)
        return "; kernel.io_uring_disabled=" + std::to_string(v) +
               (v == 2 ? " (io_uring is disabled for all processes)"
                       : " (io_uring is limited to the io_uring_group)");
    return {};
}

// liburing maps and unmaps its rings with raw system calls, which ThreadSanitizer does not see.
// A ring mapped where another thread's ring was unmapped inherits that ring's access history, and
// the first SQE prepared in it is reported as a race with the other, long gone, thread. The kernel
// orders the unmap before the map; these two calls tell ThreadSanitizer so (nothing otherwise).
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
namespace {
char g_ring_mappings; // the address the two synchronise on
}
void ring_mapped() {
    __tsan_acquire(&g_ring_mappings);
}
void ring_unmapping() {
    __tsan_release(&g_ring_mappings);
}
#else
void ring_mapped() {}
void ring_unmapping() {}
#endif

/// io_uring set-up fails with ENOMEM under a small RLIMIT_MEMLOCK (unprivileged users) far more
/// often than for want of memory: say which limit and how to raise it.
std::string memlock_note() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return {};
    return " (RLIMIT_MEMLOCK is " + std::to_string(rl.rlim_cur / 1024) +
           " KiB: raise it with `ulimit -l unlimited` or LimitMEMLOCK=, or use "
           "GALAY_BACKEND=epoll)";
}

int setup_ring(io_uring& ring, unsigned entries, unsigned* flags_used) {
    const unsigned attempts[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_COOP_TASKRUN,
        0,
    };
    int ret = -EINVAL;
    for (unsigned flags : attempts) {
        io_uring_params p{};
        p.flags = flags | IORING_SETUP_CQSIZE;
        p.cq_entries = entries * 8; // room for many connections' completions per turn
        ret = io_uring_queue_init_params(entries, &ring, &p);
        if (ret == 0) {
            ring_mapped();
            if (flags_used != nullptr) *flags_used = flags;
            return 0;
        }
        if (ret != -EINVAL) return ret; // EPERM/ENOSYS/ENOMEM: flags are not the problem
    }
    return ret;
}

namespace {

/// IORING_OP_MSG_RING (5.18) and IOSQE_CQE_SKIP_SUCCESS (5.17), probed once per process.
bool msg_ring_supported() {
    static const bool supported = [] {
        io_uring ring;
        if (setup_ring(ring, 8, nullptr) < 0) return false;
        bool ok = false;
        if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
            ok = io_uring_opcode_supported(probe, IORING_OP_MSG_RING) &&
                 (ring.features & IORING_FEAT_CQE_SKIP) != 0;
            io_uring_free_probe(probe);
        }
        io_uring_queue_exit(&ring);
        return ok;
    }();
    return supported;
}

} // namespace

UringDriver::UringDriver(Scheduler& s, const SchedulerOptions& options)
    : sched_(s) {
    unsigned entries = options.ring_entries == 0 ? 1024 : options.ring_entries;
    int ret = setup_ring(ring_, entries, &flags_);
    if (ret < 0)
        throw Error(errno_code(-ret), "galay: io_uring_queue_init failed" + sysctl_note() +
                                          (ret == -ENOMEM ? memlock_note() : ""));
    setup_buffer_ring(options);
    if (options.register_files) setup_file_table();
    multishot_accept_ = options.multishot_accept && multishot_accept_supported();
    fair_ = options.fair_completions;
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) {
        int e = errno;
        ring_unmapping();
        io_uring_queue_exit(&ring_);
        throw Error(errno_code(e), "galay: eventfd failed");
    }
    arm_wake();
    msg_ring_ = options.msg_ring_wake && msg_ring_supported();
}

UringDriver::~UringDriver() {
    { // nobody may name us as an owner once we are gone
        std::lock_guard lock(FdOwners::mutex());
        for (std::size_t fd = 0; fd < fds_.size(); ++fd)
            if (fds_[fd].owned) FdOwners::disown(static_cast<int>(fd), this);
    }
    ring_unmapping();
    io_uring_queue_exit(&ring_); // (drops the registered files with the ring)
    ::close(wake_fd_);
    if (buf_ring_ != nullptr) ::munmap(buf_ring_, buf_ring_bytes_);
}

} // namespace galay::detail
