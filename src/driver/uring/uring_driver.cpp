// The io_uring driver's probe (can io_uring run here, and if not, why) and its factory. The driver
// itself is declared in uring_driver.hpp and defined by concept in the other files of this folder.
#include "driver/uring/uring_driver.hpp"
#include "runtime/drivers.hpp"

#include <liburing.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace galay::detail {
namespace {

int errno_from_name(const char* s) {
    struct Named {
        const char* name;
        int value;
    };
    static constexpr Named names[] = {{"ENOSYS", ENOSYS}, {"EPERM", EPERM},
                                      {"EACCES", EACCES}, {"EINVAL", EINVAL},
                                      {"ENOMEM", ENOMEM}, {"EOPNOTSUPP", EOPNOTSUPP}};
    for (const Named& n : names)
        if (std::strcmp(s, n.name) == 0) return n.value;
    int v = std::atoi(s);
    return v > 0 ? v : ENOSYS;
}

constexpr struct {
    int op;
    const char* name;
} kRequiredOps[] = {
    {IORING_OP_ACCEPT, "ACCEPT"},   {IORING_OP_CONNECT, "CONNECT"},
    {IORING_OP_RECV, "RECV"},       {IORING_OP_SEND, "SEND"},
    {IORING_OP_READV, "READV"},     {IORING_OP_WRITEV, "WRITEV"},
    {IORING_OP_SENDMSG, "SENDMSG"}, {IORING_OP_RECVMSG, "RECVMSG"},
    {IORING_OP_CLOSE, "CLOSE"},     {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
    {IORING_OP_READ, "READ"},       {IORING_OP_WRITE, "WRITE"},
    {IORING_OP_FSYNC, "FSYNC"},     {IORING_OP_FALLOCATE, "FALLOCATE"},
};

} // namespace

UringProbe run_uring_probe() {
    UringProbe out;
    // Tests of the fallback to epoll (GALAY_FAULT_INJECTION builds only).
    if (const char* fake = GALAY_FAULT_INJECTION ? std::getenv("GALAY_FAKE_URING_PROBE") : nullptr;
        fake != nullptr && *fake) {
        int e = errno_from_name(fake);
        out.error = errno_code(e);
        out.reason = std::string("io_uring_setup: ") + std::strerror(e) +
                     " (simulated by GALAY_FAKE_URING_PROBE)";
        return out;
    }
    io_uring ring;
    int ret = setup_ring(ring, 8, nullptr);
    if (ret < 0) {
        out.error = errno_code(-ret);
        out.reason = std::string("io_uring_setup: ") + std::strerror(-ret) + sysctl_note() +
                     (ret == -ENOMEM ? memlock_note() : "");
        return out;
    }
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    if (probe == nullptr) {
        out.error = errno_code(ENOSYS);
        out.reason = "the kernel cannot report which io_uring opcodes it supports (too old)";
        ring_unmapping();
        io_uring_queue_exit(&ring);
        return out;
    }
    for (const auto& op : kRequiredOps) {
        if (!io_uring_opcode_supported(probe, op.op)) {
            out.error = errno_code(ENOSYS);
            out.reason = std::string("the kernel lacks the io_uring opcode IORING_OP_") + op.name;
            break;
        }
    }
    io_uring_free_probe(probe);
    ring_unmapping();
    io_uring_queue_exit(&ring);
    out.usable = !out.error;
    return out;
}

const DriverEntry uring_driver_entry{
    .backend = Backend::io_uring,
    .probe = run_uring_probe,
    .make = [](Scheduler& s, const SchedulerOptions& options) -> std::unique_ptr<Driver> {
        return std::make_unique<UringDriver>(s, options);
    },
};

} // namespace galay::detail
