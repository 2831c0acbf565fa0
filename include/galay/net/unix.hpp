// galay/net/unix.hpp: Unix domain sockets (AF_UNIX): streams, datagrams, descriptor passing.
//
//     galay::Task<void> serve() {
//         auto listener = galay::UnixListener::bind(*galay::UnixAddr::parse("@my-service"));
//         if (!listener) co_return;
//         auto conn = co_await listener->accept().timeout(std::chrono::seconds(5));
//         if (!conn) co_return;
//         auto who = conn->peer_cred();                  // Result<galay::PeerCred>: pid, uid, gid
//         std::array<char, 256> buf;
//         auto got = co_await conn->recv_with_fds(buf, 4);  // Result<galay::FdMessage>
//         if (got && !got->fds.empty()) { /* got->fds[0].get() is an fd, closed with got */ }
//         (void)who;
//     }
//
// Every operation returns `Result<...>` and accepts `.timeout(d)` and cancellation; destroying a
// socket closes it. Received descriptors are owned (`OwnedFd`, galay/owned_fd.hpp; `UniqueFd` is
// its other name) and close-on-exec.
#pragma once

#include "galay/detail/buffers.hpp"
#include "galay/detail/tcp_ops.hpp"
#include "galay/detail/transfer_ops.hpp"
#include "galay/detail/unix_ops.hpp"
#include "galay/fd_handle.hpp"
#include "galay/net/datagram.hpp"
#include "galay/net/tcp.hpp"
#include "galay/net/unix_addr.hpp"
#include "galay/owned_fd.hpp"

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace galay {

/// The credentials of the process at the other end, as of connect/socketpair: SO_PEERCRED on
/// Linux, LOCAL_PEERCRED on FreeBSD (pid 0 before FreeBSD 13), getpeereid and LOCAL_PEERPID on
/// macOS; `errc::not_supported` in the POSIX profile.
struct PeerCred {
    pid_t pid = 0; ///< its process id
    uid_t uid = 0; ///< its effective user id
    gid_t gid = 0; ///< its effective group id
};

/// What `recv_with_fds` produced: the bytes and the descriptors that came with them.
struct FdMessage {
    std::size_t size = 0;     ///< bytes stored in the caller's buffer (0: the peer closed)
    std::vector<OwnedFd> fds; ///< descriptors received (close-on-exec), owned
    bool truncated = false;   ///< a datagram longer than the buffer: the rest of it is lost
};

/// A connected Unix stream socket. Move-only; destroying it closes it. Same operations as
/// TcpStream, plus descriptor passing and peer credentials.
class UnixStream : public StreamSocket {
public:
    UnixStream() noexcept = default;
    /// Adopt a connected Unix stream socket (made non-blocking if it is not).
    explicit UnixStream(int fd) noexcept
        : StreamSocket(fd) {}

    /// Connect to `addr`: `co_await UnixStream::connect(addr).timeout(2s)` -> Result<UnixStream>.
    /// No listener at a path is `ECONNREFUSED` (socket file left behind) or `ENOENT`.
    [[nodiscard]] static detail::UnixConnectAwaitable connect(const UnixAddr& addr) noexcept {
        return detail::UnixConnectAwaitable(addr);
    }
    /// Two connected streams (socketpair(2)), for talking to a thread or a child process.
    static Result<std::pair<UnixStream, UnixStream>> pair() noexcept;

    /// Receive whatever has arrived into a buffer lent by the scheduler's pool (empty = the peer
    /// closed), as TcpStream::recv_pooled: on io_uring one multishot recv per connection over a
    /// provided-buffer ring, so a busy stream costs no submission and no poll arming per receive.
    /// Once a stream has used it, receive from it only with recv_pooled (the multishot recv stays
    /// armed and takes what arrives); descriptors sent to it are closed by the kernel, unread.
    [[nodiscard]] detail::RecvPooledAwaitable recv_pooled() noexcept {
        return detail::RecvPooledAwaitable(fd_.get());
    }

    /// Send `buf` (at least one byte: a descriptor travels with data) and the descriptors `fds`
    /// (at most 253) in one message; the caller keeps its own copies of them. Returns the bytes
    /// sent, which may be fewer than `buf.size()` (the descriptors went with the first of them).
    template <ConstBuffer B>
    [[nodiscard]] detail::FdSendAwaitable send_with_fds(const B& buf, std::span<const int> fds) {
        return {fd_.get(), detail::buffer_data(buf), std::ranges::size(buf), fds, nullptr};
    }
    /// Receive bytes and up to `max_fds` descriptors. More descriptors than that is
    /// `errc::control_truncated`: the ones that arrived are closed (none leaks) and the bytes of
    /// that message are lost. A stream delivers descriptors with the first byte they were sent
    /// with, so a receive never mixes the descriptors of two sends.
    template <MutableBuffer B>
    [[nodiscard]] detail::FdRecvAwaitable recv_with_fds(B&& buf, std::size_t max_fds) {
        return {fd_.get(), std::ranges::data(buf), std::ranges::size(buf), max_fds};
    }

    /// The other end's pid, uid and gid (see PeerCred).
    Result<PeerCred> peer_cred() const noexcept;
    /// The remote address (unnamed for a socketpair or an unbound client).
    Result<UnixAddr> peer_addr() const noexcept;
    /// The local address.
    Result<UnixAddr> local_addr() const noexcept;

private:
    friend class detail::UnixAcceptAwaitable;
    friend class detail::UnixConnectAwaitable;
    UnixStream(int fd, NonBlocking) noexcept
        : StreamSocket(fd, NonBlocking{}) {}
};

/// A listening Unix stream socket. A path listener removes its socket file when it is closed or
/// destroyed (if the file is still the one it created). At bind, a socket file that nobody listens
/// on (a crashed server's: connecting to it is refused) is removed and the bind retried; a live
/// one is `EADDRINUSE`, and a path that is not a socket is never removed. Its descriptor (`fd`,
/// `is_open`, `close`, `release`) is an FdHandle's; `close` and `release` are its own, for the
/// file (closed through an `FdHandle&`, the file is removed when the listener is destroyed).
class UnixListener : public FdHandle {
public:
    UnixListener() noexcept = default;
    /// Takes over the socket (and the file to remove) of `o`.
    UnixListener(UnixListener&& o) noexcept;
    /// Closes its own socket, then takes over the one of `o`.
    UnixListener& operator=(UnixListener&& o) noexcept;
    ~UnixListener();

    /// socket + bind + listen(backlog).
    static Result<UnixListener> bind(const UnixAddr& addr, int backlog = 4096);

    /// Wait for the next connection. `peer`, if given, receives its address (usually unnamed).
    [[nodiscard]] detail::UnixAcceptAwaitable accept(UnixAddr* peer = nullptr) noexcept {
        return detail::UnixAcceptAwaitable(fd_.get(), peer);
    }
    /// The bound address.
    Result<UnixAddr> local_addr() const noexcept;
    /// Remove the socket file now, then close asynchronously; the listener is empty at once.
    [[nodiscard]] detail::CloseAwaitable close() noexcept;
    /// Give up the socket and its file: galay forgets the socket, and neither closes it nor
    /// removes the file any more (the caller may go on listening on it).
    int release() noexcept;

private:
    void remove_file() noexcept;

    std::string path_; // the socket file this listener created ("" for abstract)
    dev_t dev_ = 0;    // and its identity, so a successor's file at that path is left alone
    ino_t ino_ = 0;
};

/// A Unix datagram socket: bound or not, connected or not. Message boundaries are kept. Its
/// descriptor (`fd`, `is_open`, `close`, `release`) is an FdHandle's.
class UnixDatagram : public FdHandle {
public:
    UnixDatagram() noexcept = default;
    /// An unbound socket (it can send; nobody can address a reply to it).
    static Result<UnixDatagram> unbound() noexcept;
    /// A socket bound to `addr` (a path's file is removed when the socket is destroyed).
    static Result<UnixDatagram> bind(const UnixAddr& addr);
    /// Two connected datagram sockets (socketpair(2)).
    static Result<std::pair<UnixDatagram, UnixDatagram>> pair() noexcept;
    /// Takes over the socket of `o`.
    UnixDatagram(UnixDatagram&& o) noexcept;
    /// Closes its own socket, then takes over the one of `o`.
    UnixDatagram& operator=(UnixDatagram&& o) noexcept;
    ~UnixDatagram();

    /// Fix the peer: send()/recv() then talk to `addr` only.
    Result<void> connect(const UnixAddr& addr) noexcept;
    /// Send one datagram to the connected peer.
    template <ConstBuffer B>
    [[nodiscard]] detail::TransferAwaitable send(const B& buf) noexcept {
        return {detail::OpCode::send,   fd_.get(), detail::buffer_data(buf), std::ranges::size(buf),
                detail::Transfer::some, 0};
    }
    /// Send one datagram to `to`.
    template <ConstBuffer B>
    [[nodiscard]] detail::FdSendAwaitable send_to(const B& buf, const UnixAddr& to) {
        return {fd_.get(), detail::buffer_data(buf), std::ranges::size(buf), {}, &to};
    }
    /// Receive one datagram; `truncated` says it did not fit (its tail is discarded).
    template <MutableBuffer B>
    [[nodiscard]] detail::UnixRecvFromAwaitable recv(B&& buf) noexcept {
        return {fd_.get(), std::ranges::data(buf), std::ranges::size(buf), nullptr};
    }
    /// Receive one datagram and its sender (unnamed if the sender is not bound).
    template <MutableBuffer B>
    [[nodiscard]] detail::UnixRecvFromAwaitable recv_from(B&& buf, UnixAddr* from) noexcept {
        return {fd_.get(), std::ranges::data(buf), std::ranges::size(buf), from};
    }
    /// Send one datagram and descriptors to the connected peer (see UnixStream::send_with_fds).
    template <ConstBuffer B>
    [[nodiscard]] detail::FdSendAwaitable send_with_fds(const B& buf, std::span<const int> fds) {
        return {fd_.get(), detail::buffer_data(buf), std::ranges::size(buf), fds, nullptr};
    }
    /// Receive one datagram and up to `max_fds` descriptors (see UnixStream::recv_with_fds).
    template <MutableBuffer B>
    [[nodiscard]] detail::FdRecvAwaitable recv_with_fds(B&& buf, std::size_t max_fds) {
        return {fd_.get(), std::ranges::data(buf), std::ranges::size(buf), max_fds};
    }
    /// The other end's credentials (a socketpair, or a connected socket).
    Result<PeerCred> peer_cred() const noexcept;
    /// The local address.
    Result<UnixAddr> local_addr() const noexcept;

private:
    std::string path_; // the socket file bind() created, removed on destruction
};

} // namespace galay
