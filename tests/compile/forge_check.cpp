// Compile-only test (tests/compile/expect_diagnostics.cmake): an operation on a descriptor can be
// made only by the galay object that owns the descriptor. The awaitables of the operations have
// private constructors (their owning public types are their friends), so code outside galay cannot
// aim a close, a receive or a send at a raw descriptor that something else owns, nor make a
// JoinHandle or take an OwnedFd's descriptor behind its back. Every line marked `EXPECT-PRIVATE`
// must get an access error and no other line may get any diagnostic, so making one of these
// constructors public again fails the test. Never linked, never run.
#include <galay/galay.hpp>
#include <galay/tls/stream.hpp>

#include <netinet/in.h>
#include <sys/uio.h>

#include <span>
#include <system_error>

using namespace galay;
using detail::OpCode;

namespace {

// clang-format off
void forges(int fd, SocketAddr& addr, UnixAddr& uaddr, std::span<Datagram> in,
            std::span<const OutDatagram> out, std::span<const iovec> iov, process::Child& child,
            fs::Batch& batch, detail::SpawnPromise<int>& promise, OwnedFd& owned) {
    char b[16];
    const int fds[1] = {fd};
    const detail::IoOp op{};
    const std::error_code none;

    // Sockets and pipes
    (void)detail::CloseAwaitable(fd);                                              // EXPECT-PRIVATE
    (void)detail::TransferAwaitable(OpCode::send, fd, b, 16, detail::Transfer::all, 0); // EXPECT-PRIVATE
    (void)detail::VectorAwaitable(OpCode::sendmsg, fd, iov);                       // EXPECT-PRIVATE
    (void)detail::RecvPooledAwaitable(fd);                                         // EXPECT-PRIVATE
    (void)detail::AcceptAwaitable(fd, &addr);                                      // EXPECT-PRIVATE
    (void)detail::ConnectAwaitable(addr);                                          // EXPECT-PRIVATE
    (void)detail::SendToAwaitable(fd, AF_INET, b, 16, &addr);                      // EXPECT-PRIVATE
    (void)detail::RecvFromAwaitable(fd, b, 16, &addr, nullptr, 0, nullptr);        // EXPECT-PRIVATE
    (void)detail::RecvBatchAwaitable(fd, in, false, 0, nullptr, nullptr);          // EXPECT-PRIVATE
    (void)detail::SendBatchAwaitable(fd, AF_INET, out, nullptr, nullptr);          // EXPECT-PRIVATE
    (void)detail::UnixConnectAwaitable(uaddr);                                     // EXPECT-PRIVATE
    (void)detail::UnixAcceptAwaitable(fd, &uaddr);                                 // EXPECT-PRIVATE
    (void)detail::FdSendAwaitable(fd, b, 16, fds, nullptr);                        // EXPECT-PRIVATE
    (void)detail::FdRecvAwaitable(fd, b, 16, 1);                                   // EXPECT-PRIVATE
    (void)detail::UnixRecvFromAwaitable(fd, b, 16, &uaddr);                        // EXPECT-PRIVATE

    // Files, processes
    (void)detail::FileTransferAwaitable(op, detail::FileXfer::all, none);          // EXPECT-PRIVATE
    (void)detail::FileSyncAwaitable(op, none);                                     // EXPECT-PRIVATE
    (void)detail::BatchAwaitable(batch);                                           // EXPECT-PRIVATE
    (void)process::detail::WaitAwaitable(child);                                   // EXPECT-PRIVATE

    // Foreign descriptors: a wait is made by the AsyncFd that watches the descriptor
    (void)detail::ReadyAwaitable(fd, Interest::readable);                          // EXPECT-PRIVATE
    (void)detail::ReadinessAwaitable(fd, Interest::priority);                      // EXPECT-PRIVATE

    // Owners
    (void)JoinHandle<int>(promise);                                                // EXPECT-PRIVATE
    (void)owned.take();                                                            // EXPECT-PRIVATE
    FdHandle handle(fd);                                                           // EXPECT-PRIVATE
}
// clang-format on

} // namespace

// Keep the function odr-used so that the compiler checks everything in it.
auto* keep = &forges;
