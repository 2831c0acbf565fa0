// The awaitables of byte transfers on a descriptor galay owns: recv, send and their all/exact
// forms (sockets, and read/write on pipes), and the vectored readv/writev. What StreamSocket,
// UnixDatagram, PipeReader and PipeWriter return; each is made only by those types, on the
// descriptor they own (docs/driver.md: who makes an operation).
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace galay {
class StreamSocket;
class TcpStream;
class UnixDatagram;
class PipeReader;
class PipeWriter;
} // namespace galay

namespace galay::detail {

/// How much of its buffer a stream transfer moves before it completes.
enum class Transfer : std::uint8_t {
    some,  // what one system call moves (recv, send)
    all,   // every byte, or an error (send_all)
    exact, // every byte; EOF before that is `errc::unexpected_eof` (recv_exact)
};

/// recv/send/read/write (`code`) of `len` bytes at `buf` on the owner's descriptor.
class [[nodiscard]] TransferAwaitable : public IoAwaitable<TransferAwaitable> {
public:
    /// An all-or-error transfer larger than one op can carry fails at once (never in part).
    bool await_ready() const noexcept { return too_large_; }
    Result<std::size_t> result();
    /// After completion: the bytes moved, also when it failed (a send_all that timed out after
    /// sending part of its buffer tells how much of it left).
    std::size_t transferred() const noexcept { return op_.done; }

private:
    friend class galay::StreamSocket;
    friend class galay::TcpStream; // (io::send_all_zc)
    friend class galay::UnixDatagram;
    friend class galay::PipeReader;
    friend class galay::PipeWriter;
    TransferAwaitable(OpCode code, int fd, const void* buf, std::size_t len, Transfer mode,
                      int flags) noexcept;

    bool exact_;             // recv_exact: fewer bytes than asked (EOF) is an error
    bool too_large_ = false; // send_all/recv_exact of more than UINT32_MAX bytes
};

/// recvmsg/sendmsg over the caller's iovecs (StreamSocket's readv/writev).
class [[nodiscard]] VectorAwaitable : public IoAwaitable<VectorAwaitable> {
public:
    void prepare() noexcept { op_.buf = &msg_; }
    Result<std::size_t> result() { return size_result(op_.result); }

private:
    friend class galay::StreamSocket;
    VectorAwaitable(OpCode code, int fd, std::span<const iovec> iov) noexcept;

    msghdr msg_{};
};

} // namespace galay::detail
