// What the drivers ask about an OpCode, answered in one table (one row per OpCode) instead of a
// switch per question in each driver. The questions compile to a shift and a mask on a constant,
// as the switches did; the work each driver does per op (SQE preparation, the system call) stays
// a switch in that driver.
#pragma once

#include "galay/detail/io_op.hpp"
#include "runtime/worker_counters.hpp"

#include <cstddef>
#include <cstdint>
#include <iterator>

namespace galay::detail {

struct OpTraits {
    OpCode code;
    /// A file op (read_at .. fallocate): the epoll driver hands it to its file engine.
    bool file;
    /// fsync or fdatasync: no RWF_* flags on their iocb, not interruptible.
    bool sync;
    /// Waits for the fd to become readable (readiness drivers); the others wait for writable.
    bool reads;
    /// Run by a system call once its fd is ready, on both drivers (driver/mmsg.hpp): the UDP
    /// batches (recvmmsg/sendmmsg) and the splices between a socket and a pipe.
    bool mmsg;
    /// Transfers on an fd worth putting in io_uring's registered-file table.
    bool registers_file;
    /// Issued again when its completion says EINTR (and, for sockets, EAGAIN), as a system call
    /// would be retried; also the ops fault injection may fail.
    bool retried;
    /// One contiguous range `cursor()`/`remaining()` (recv, send, read_at, write_at).
    bool contiguous;
};

// clang-format off
inline constexpr OpTraits kOpTraits[] = {
    // code                file   sync   reads  mmsg   regfile retried contiguous
    {OpCode::accept,       false, false, true,  false, false,  true,   false},
    {OpCode::connect,      false, false, false, false, false,  false,  false},
    {OpCode::recv,         false, false, true,  false, true,   true,   true},
    {OpCode::recv_pooled,  false, false, true,  false, true,   true,   false},
    {OpCode::send,         false, false, false, false, true,   true,   true},
    {OpCode::recvmsg,      false, false, true,  false, true,   true,   false},
    {OpCode::sendmsg,      false, false, false, false, true,   true,   false},
    {OpCode::close,        false, false, false, false, false,  false,  false},
    {OpCode::read_at,      true,  false, false, false, true,   true,   true},
    {OpCode::write_at,     true,  false, false, false, true,   true,   true},
    {OpCode::readv_at,     true,  false, false, false, true,   true,   false},
    {OpCode::writev_at,    true,  false, false, false, true,   true,   false},
    {OpCode::fsync,        true,  true,  false, false, false,  true,   false},
    {OpCode::fdatasync,    true,  true,  false, false, false,  true,   false},
    {OpCode::fallocate,    true,  false, false, false, false,  false,  false},
    {OpCode::recvmmsg,     false, false, true,  true,  false,  false,  false},
    {OpCode::sendmmsg,     false, false, false, true,  false,  false,  false},
    {OpCode::read,         false, false, true,  false, false,  true,   true},
    {OpCode::write,        false, false, false, false, false,  true,   true},
    {OpCode::waitid,       false, false, true,  false, false,  false,  false},
    {OpCode::openat,       true,  false, false, false, false,  true,   false},
    {OpCode::statx,        true,  false, false, false, false,  true,   false},
    {OpCode::renameat,     true,  false, false, false, false,  true,   false},
    {OpCode::unlinkat,     true,  false, false, false, false,  true,   false},
    {OpCode::mkdirat,      true,  false, false, false, false,  true,   false},
    {OpCode::linkat,       true,  false, false, false, false,  true,   false},
    {OpCode::symlinkat,    true,  false, false, false, false,  true,   false},
    {OpCode::splice_in,    false, false, true,  true,  false,  false,  false},
    {OpCode::splice_out,   false, false, false, true,  false,  false,  false},
    {OpCode::sendfile,     false, false, false, true,  false,  false,  false},
    {OpCode::send_zc,      false, false, false, false, false,  true,   true},
    // (poll: its queue on a readiness driver follows its events, not the `reads` column)
    {OpCode::poll,         false, false, false, false, false,  false,  false},
};
// clang-format on

static_assert(std::size(kOpTraits) == static_cast<std::size_t>(OpCode::poll) + 1,
              "one row per OpCode");
static_assert(std::size(kOpTraits) <= 32, "the masks below hold 32 op codes");
static_assert(std::size(kOpTraits) == kOpKinds, "the metrics count every OpCode (kOpKinds)");

namespace op_traits_detail {
consteval bool rows_in_order() {
    for (std::size_t i = 0; i < std::size(kOpTraits); ++i)
        if (static_cast<std::size_t>(kOpTraits[i].code) != i) return false;
    return true;
}
static_assert(rows_in_order(), "kOpTraits[i] describes OpCode i");

/// The op codes whose `column` is true, as a bit mask.
consteval std::uint32_t ops_where(bool OpTraits::*column) {
    std::uint32_t mask = 0;
    for (const OpTraits& t : kOpTraits)
        if (t.*column) mask |= std::uint32_t{1} << static_cast<unsigned>(t.code);
    return mask;
}

template <bool OpTraits::*Column>
inline constexpr std::uint32_t kMask = ops_where(Column);

template <bool OpTraits::*Column>
constexpr bool has(OpCode c) noexcept {
    return (kMask<Column> >> static_cast<unsigned>(c)) & 1u;
}
} // namespace op_traits_detail

constexpr bool is_file_op(OpCode c) noexcept {
    return op_traits_detail::has<&OpTraits::file>(c);
}
constexpr bool is_sync_op(OpCode c) noexcept {
    return op_traits_detail::has<&OpTraits::sync>(c);
}
constexpr bool waits_for_read(OpCode c) noexcept {
    return op_traits_detail::has<&OpTraits::reads>(c);
}
constexpr bool is_mmsg(OpCode c) noexcept {
    return op_traits_detail::has<&OpTraits::mmsg>(c);
}
constexpr bool registers_file(OpCode c) noexcept {
    return op_traits_detail::has<&OpTraits::registers_file>(c);
}
constexpr bool retried_when_interrupted(OpCode c) noexcept {
    return op_traits_detail::has<&OpTraits::retried>(c);
}
constexpr bool is_contiguous(OpCode c) noexcept {
    return op_traits_detail::has<&OpTraits::contiguous>(c);
}

} // namespace galay::detail
