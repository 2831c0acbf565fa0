// The registered-file table: an fd that keeps transferring (a file's second transfer, a
// stream's fourth: see register_file) is put into the ring's file table, in the slot of the same
// number (a FILES_UPDATE request queued before the op, so it costs no system call). Ops on it then
// skip the per-request fget/fput of the file. The slot is cleared (another FILES_UPDATE) before
// galay closes or releases the fd, on whatever thread.
#include "driver/uring/uring_driver.hpp"

#include <sys/resource.h>

namespace galay::detail {

void UringDriver::setup_file_table() {
    rlimit rl{};
    std::size_t n = 65536; // (the kernel allocates 8 bytes per slot up front)
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n)
        n = static_cast<std::size_t>(rl.rlim_cur);
    if (n == 0 || io_uring_register_files_sparse(&ring_, static_cast<unsigned>(n)) != 0)
        return; // (kernels before 5.19, or no room): plain fds
    slot_values_.resize(n);
    for (std::size_t i = 0; i < n; ++i)
        slot_values_[i] = static_cast<int>(i);
}

/// A FILES_UPDATE completed. A failed registration leaves the fd on plain ops; ops already
/// issued on the empty slot fail with EBADF and are issued again (see reap).
void UringDriver::on_files_update(std::uint64_t ud, std::int32_t res) noexcept {
    if (res >= 0 || (ud & 7) != kRegisterTag) return;
    FdState& st = state(static_cast<int>(ud >> 32));
    if (st.file == FdState::kRegistered) st.file = FdState::kRefused;
}

} // namespace galay::detail
