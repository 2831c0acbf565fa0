// io_uring SQEs for the filesystem namespace: OPENAT, STATX, RENAMEAT, UNLINKAT, MKDIRAT,
// LINKAT, SYMLINKAT. Each opcode is probed once; one the kernel lacks is answered EOPNOTSUPP in
// submit and the fs layer runs its system call on the blocking pool.
#include "driver/fs_ops.hpp"

#include <liburing.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string_view>

namespace galay::detail {

namespace {

int uring_opcode(OpCode c) noexcept {
    switch (c) {
    case OpCode::openat:
        return IORING_OP_OPENAT;
    case OpCode::statx:
        return IORING_OP_STATX;
    case OpCode::renameat:
        return IORING_OP_RENAMEAT;
    case OpCode::unlinkat:
        return IORING_OP_UNLINKAT;
    case OpCode::mkdirat:
        return IORING_OP_MKDIRAT;
    case OpCode::linkat:
        return IORING_OP_LINKAT;
    case OpCode::symlinkat:
        return IORING_OP_SYMLINKAT;
    default:
        return -1;
    }
}

constexpr std::array<const char*, 7> kNames{"openat",  "statx",  "renameat", "unlinkat",
                                            "mkdirat", "linkat", "symlinkat"};

/// Tests of the fallback to the blocking pool (GALAY_FAULT_INJECTION builds only):
/// GALAY_FAKE_URING_NO_OPS="renameat,statx" (or "all") makes the probe say no for those.
bool faked_missing(std::size_t i) noexcept {
    const char* list = GALAY_FAULT_INJECTION ? std::getenv("GALAY_FAKE_URING_NO_OPS") : nullptr;
    if (list == nullptr) return false;
    const std::string_view all(list), name(kNames[i]);
    if (all == "all") return true;
    for (std::size_t at = 0; at <= all.size();) {
        const std::size_t comma = std::min(all.find(',', at), all.size());
        if (all.substr(at, comma - at) == name) return true;
        at = comma + 1;
    }
    return false;
}

} // namespace

bool uring_fs_op_supported(OpCode c) noexcept {
    static const auto supported = [] {
        std::array<bool, 7> ok{};
        io_uring ring;
        if (io_uring_queue_init(2, &ring, 0) < 0) return ok;
        if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
            for (int i = 0; i < 7; ++i) {
                const auto code = static_cast<OpCode>(static_cast<int>(OpCode::openat) + i);
                ok[static_cast<std::size_t>(i)] =
                    io_uring_opcode_supported(probe, uring_opcode(code)) != 0 &&
                    !faked_missing(static_cast<std::size_t>(i));
            }
            io_uring_free_probe(probe);
        }
        io_uring_queue_exit(&ring);
        return ok;
    }();
    if (!is_namespace_op(c)) return false;
    return supported[static_cast<std::size_t>(static_cast<int>(c) -
                                              static_cast<int>(OpCode::openat))];
}

void prep_fs_op(io_uring_sqe* e, IoOp& op) noexcept {
    const char* path = static_cast<const char*>(op.buf);
    switch (op.code) {
    case OpCode::openat:
        io_uring_prep_openat(e, op.fd, path, op.msg_flags, static_cast<mode_t>(op.len));
        break;
    case OpCode::statx:
        io_uring_prep_statx(e, op.fd, path, op.msg_flags, op.len,
                            reinterpret_cast<struct statx*>(static_cast<std::uintptr_t>(op.aux)));
        break;
    case OpCode::renameat:
        io_uring_prep_renameat(e, op.fd, path, AT_FDCWD, second_path(op),
                               static_cast<unsigned>(op.msg_flags));
        break;
    case OpCode::unlinkat:
        io_uring_prep_unlinkat(e, op.fd, path, op.msg_flags);
        break;
    case OpCode::mkdirat:
        io_uring_prep_mkdirat(e, op.fd, path, static_cast<mode_t>(op.len));
        break;
    case OpCode::linkat:
        io_uring_prep_linkat(e, op.fd, path, AT_FDCWD, second_path(op), op.msg_flags);
        break;
    case OpCode::symlinkat:
        io_uring_prep_symlinkat(e, path, op.fd, second_path(op));
        break;
    default:
        break;
    }
}

} // namespace galay::detail
