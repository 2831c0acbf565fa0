// The one idea of galay: an I/O operation is described once, as a small value (`IoOp`) that lives
// in the awaiting coroutine's frame, and the driver of the current thread decides how to complete
// it (io_uring: an SQE; epoll: try the syscall, wait for readiness on EAGAIN).
//
// Nothing in this header touches a kernel interface. The drivers and the interface they implement
// (`Driver`) live in src/driver/ and are not installed.
#pragma once

#include "galay/op_kind.hpp"

#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>

struct iovec;
struct sockaddr;

namespace galay::detail {

/// What an IoOp asks the driver to do: the public operation kinds (galay/op_kind.hpp). Which
/// fields each one uses is the table of docs/driver.md: recvmsg and sendmsg carry a msghdr in
/// `buf` (also for vectored stream reads: io_uring's readv fails on O_NONBLOCK sockets), the UDP
/// batches an mmsghdr array; read and write are read(2)/write(2) on a pollable fd that is not a
/// socket (a pipe); the namespace ops take a directory fd (AT_FDCWD) in `fd`, a path in `buf`, a
/// second path (or statx's buffer) in `aux`, the call's flags in `msg_flags` and a mode (or
/// statx's mask) in `len`; splice_in/splice_out move up to `len` bytes between the socket `fd`
/// and the pipe end `aux` (0 = EOF); sendfile sends `len` bytes of the file `aux` from `offset`
/// to the socket `fd`; send_zc completes once the kernel lets go of `buf`.
using OpCode = OpKind;

/// A node of the scheduler's timer heap (a sleep, or the deadline of an I/O op).
struct TimerNode {
    std::int64_t deadline_ns = 0;    // steady clock, nanoseconds
    std::uint32_t slot = UINT32_MAX; // its slot in the heap's slot table; UINT32_MAX = not armed
    void (*on_fire)(TimerNode*) = nullptr;
    void* context = nullptr; // what on_fire acts on
    bool armed() const noexcept { return slot != UINT32_MAX; }
};

/// One I/O operation. Filled by an awaitable, completed by a driver. Never copied while pending.
///
/// It lives in every awaiting coroutine's frame (an echo loop holds two, for every connection), so
/// it is kept small: 104 bytes. Accept and connect keep their address in `buf`/`len`/`aux`
/// rather than in fields of their own. What a driver keeps about the op for itself lives in
/// `driver_scratch`, which only the drivers give a meaning (src/driver/common/op_scratch.hpp).
struct IoOp {
    /// `flags` bits: hints from the awaitable to the driver, which may ignore them.
    /// kMoreFollows: the task submits more ops before it suspends (fs::Batch marks all but its
    /// last); the driver may hold this one back and hand them to the kernel together (epoll: one
    /// io_submit for a batch of O_DIRECT ops).
    static constexpr std::uint8_t kMoreFollows = 1;

    OpCode code{};
    bool all = false;       // send/recv: finish short transfers before completing
    bool timed_out = false; // the deadline fired (result becomes -ETIMEDOUT)
    bool cancelled = false; // cancellation was requested
    bool pending = false;   // the driver holds the op (in the kernel, or waiting for readiness)
    bool direct = false;    // file ops: the fd is O_DIRECT (epoll: libaio; otherwise a thread pool)
    bool fixed_buffer = false; // read_at/write_at: `buf` is in the registered buffer number `aux`
    std::uint8_t flags = 0;    // kMoreFollows
    int fd = -1;
    int msg_flags = 0;        // send/recv flags; fallocate mode
    std::uint32_t len = 0;    // buffer length, iovec count; connect: address length
    std::uint32_t done = 0;   // bytes (or messages) moved so far (for `all`); connect: issued
    void* buf = nullptr;      // data buffer, iovec array, or msghdr; accept/connect: the address
    std::uint64_t offset = 0; // file offset
    std::uint64_t aux = 0;    // pool buffer id, registered buffer, fallocate length; accept: the
                              // address of the in/out address length (socklen_t)
    std::int64_t result = 0;  // >= 0: value (bytes, fd); < 0: -errno
    std::coroutine_handle<> waiter;
    TimerNode timer; // deadline, when the op has a timeout
    /// The driver's own bookkeeping while it holds the op (epoll: the link of its per-fd queue;
    /// io_uring: whether the op went out on a registered file). Opaque here: sized only, typed
    /// by each driver in src/driver/; no awaitable reads or writes it.
    struct DriverScratch {
        alignas(void*) unsigned char bytes[sizeof(void*)] = {};
    } driver_scratch;

    /// accept and connect: the peer address (out for accept, in for connect).
    sockaddr* address() const noexcept { return static_cast<sockaddr*>(buf); }
    /// accept: the in/out address length.
    std::uint32_t* address_length() const noexcept {
        return reinterpret_cast<std::uint32_t*>(static_cast<std::uintptr_t>(aux));
    }
    void set_accept_address(sockaddr* a, std::uint32_t* a_len) noexcept {
        buf = a;
        aux = reinterpret_cast<std::uintptr_t>(a_len);
    }
    void set_connect_address(const sockaddr* a, std::uint32_t a_len) noexcept {
        buf = const_cast<sockaddr*>(a);
        len = a_len;
    }

    /// Fold one transfer result into the op. Returns true when the op must be issued again
    /// (an `all` transfer that moved some bytes but not all of them).
    bool absorb(std::int64_t res) noexcept {
        if (res < 0) {
            result = res;
            return false;
        }
        done += static_cast<std::uint32_t>(res); // res <= remaining(): no overflow
        if (all && res > 0 && done < len) return true;
        result = all ? static_cast<std::int64_t>(done) : res;
        return false;
    }
    /// The buffer position for the next piece of an `all` transfer.
    char* cursor() const noexcept { return static_cast<char*>(buf) + done; }
    std::uint32_t remaining() const noexcept { return len - done; }
};
static_assert(sizeof(void*) != 8 || sizeof(IoOp) <= 104,
              "IoOp grew: it is in every awaiting frame");

} // namespace galay::detail
