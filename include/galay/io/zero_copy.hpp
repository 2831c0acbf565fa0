// galay/io/zero_copy.hpp: sending a large buffer without copying it into the kernel.
//
//     galay::Task<void> send_blob(galay::TcpStream& conn, std::span<const char> blob) {
//         if (!galay::io::zero_copy_send_available())
//             std::fprintf(stderr, "zero-copy send unavailable: copying\n");
//         auto sent = co_await galay::io::send_all_zc(conn, blob).timeout(30s);
//         // `blob` may be reused or freed now: the kernel has let go of it.
//     }
//
// `send_all_zc` sends every byte of the buffer the way `TcpStream::send_all` does, but the
// kernel reads the bytes from the caller's pages instead of copying them into socket buffers:
// io_uring IORING_OP_SEND_ZC, epoll send(2) with MSG_ZEROCOPY. The awaitable completes only
// after the kernel's notification that it no longer reads the buffer (the notification CQE on
// io_uring, the socket's error queue on epoll), so the buffer must not change until then and is
// free to change after. Each backend's support is probed at run time; where it is missing
// (io_uring before 6.0, a kernel without MSG_ZEROCOPY) the same call is a plain copying send
// and `zero_copy_send_available()` says false.
//
// Where it pays: large sends (64 KiB and more) to a real network device, where the copy is
// what the CPU spends its time on. On loopback the kernel copies the bytes when it delivers
// them to the local peer anyway, so a zero-copy send there costs a notification more than a
// plain one for nothing. Small sends lose everywhere: pinning pages and the notification cost
// more than copying a few KiB. It is an explicit option for that reason, never the default.
//
// A timeout or cancellation that comes after the bytes went out waits for the notification
// and reports the real result; one that comes before ends it at once, as for `send_all`. Do
// not close the socket while a send is pending. On epoll the notification raises EPOLLERR on
// the socket, after which the driver tries that socket's reads before waiting for an edge.
#pragma once

#include "galay/net/tcp.hpp"

namespace galay::io {

namespace detail {
/// The zero-copy send's way to the stream's socket (a TcpStream makes the op, as it makes its
/// other sends).
struct ZeroCopy {
    static galay::detail::TransferAwaitable send(TcpStream& s, const void* buf,
                                                 std::size_t len) noexcept {
        return s.send_zc(buf, len);
    }
};
} // namespace detail

/// Send all of `buf` on `stream` without copying it (see the top of this header); completes
/// once the kernel has let go of `buf`. More than 4 GiB - 1 bytes is `errc::transfer_too_large`.
template <ConstBuffer B>
[[nodiscard]] galay::detail::TransferAwaitable send_all_zc(TcpStream& stream,
                                                           const B& buf) noexcept {
    return detail::ZeroCopy::send(stream, galay::detail::buffer_data(buf), std::ranges::size(buf));
}

/// Whether `send_all_zc` avoids the copy on this thread's scheduler (false: it is a plain
/// send here, or there is no scheduler on this thread).
bool zero_copy_send_available() noexcept;

} // namespace galay::io
