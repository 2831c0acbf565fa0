// galay/op_kind.hpp: the kinds of operation galay hands to the kernel, as the metrics count them.
//
//     galay::metrics::WorkerMetrics m = galay::metrics::snapshot(galay::current_scheduler());
//     std::uint64_t recvs = m.op(galay::OpKind::recv).completed;
//     const char* label = galay::metrics::op_kind_name(galay::OpKind::recv); // "recv"
//
// Every operation of the public API is one of these: a socket's `recv` is `OpKind::recv`, a
// file's `read_exact_at` is `OpKind::read_at`, and so on. The drivers know them as
// `detail::OpCode` (the same enumeration): docs/driver.md says what each one carries and which
// function of each backend runs it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace galay {

/// One kind of kernel operation.
enum class OpKind : std::uint8_t {
    accept,      ///< a listener accepts a connection
    connect,     ///< a stream socket connects
    recv,        ///< a socket receive (recv, recv_exact)
    recv_pooled, ///< a receive into a buffer of the scheduler's pool (`recv_pooled`)
    send,        ///< a socket send (send, send_all; a connected datagram's send)
    recvmsg,     ///< recvmsg: a datagram with its sender, a vectored stream read, descriptors
    sendmsg,     ///< sendmsg: a datagram to an address, a vectored stream write, descriptors
    close,       ///< an asynchronous close
    read_at,     ///< pread on a file
    write_at,    ///< pwrite on a file
    readv_at,    ///< preadv on a file
    writev_at,   ///< pwritev on a file
    fsync,       ///< fsync
    fdatasync,   ///< fdatasync
    fallocate,   ///< fallocate
    recvmmsg,    ///< a UDP batch receive
    sendmmsg,    ///< a UDP batch send
    read,        ///< read(2) on a pipe
    write,       ///< write(2) on a pipe
    waitid,      ///< waiting for a child process to exit (and reaping it)
    openat,      ///< opening a file by path
    statx,       ///< a file's metadata by path
    renameat,    ///< rename
    unlinkat,    ///< unlink or rmdir
    mkdirat,     ///< mkdir
    linkat,      ///< a hard link
    symlinkat,   ///< a symbolic link
    splice_in,   ///< socket -> pipe (copy_bidirectional between TCP streams)
    splice_out,  ///< pipe -> socket
    sendfile,    ///< file -> socket (fs::File::send_to)
    send_zc,     ///< a send without copying (io::send_all_zc)
    poll,        ///< a readiness wait on a descriptor galay did not open (AsyncFd)
};

/// How many kinds there are (the size of the metrics' per-kind arrays).
inline constexpr std::size_t op_kind_count = static_cast<std::size_t>(OpKind::poll) + 1;

} // namespace galay
