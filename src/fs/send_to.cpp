// File::send_to: a range of a file to a socket with sendfile(2) (OpCode::sendfile; both drivers
// run it once the socket is writable, src/driver/splice.hpp).
#include "galay/fs/file.hpp"
#include "galay/net/tcp.hpp"

#include <algorithm>
#include <cerrno>

namespace galay::fs {
namespace {

// Linux's limit for one transfer (MAX_RW_COUNT), as for read_exact_at.
constexpr std::uint64_t kMaxSend = 0x7ffff000;

} // namespace

detail::FileTransferAwaitable File::send_to(const TcpStream& stream, std::uint64_t offset,
                                            std::uint64_t len) const noexcept {
    detail::IoOp op;
    op.code = detail::OpCode::sendfile;
    op.fd = stream.fd();
    op.aux = static_cast<std::uint64_t>(fd_.get());
    op.offset = offset;
    op.len = static_cast<std::uint32_t>(std::min(len, kMaxSend));
    std::error_code pre;
    if (fd_.get() < 0 || stream.fd() < 0)
        pre = errno_code(EBADF);
    else if (len > kMaxSend)
        pre = make_error_code(errc::transfer_too_large);
    return detail::FileTransferAwaitable(op, detail::FileXfer::some, pre);
}

} // namespace galay::fs
