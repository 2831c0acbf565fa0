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
// socket closes it. Received descriptors are owned (`UniqueFd`) and close-on-exec.
#pragma once

#include "galay/net/tcp.hpp"
#include "galay/net/udp.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace galay {

/// A Unix socket address: a filesystem path, an abstract name (Linux, written "@name"), or
/// unnamed (an unbound socket). A value type.
class UnixAddr {
public:
    /// An unnamed address.
    UnixAddr() noexcept;
    /// A filesystem path. Longer than `sun_path` (107 bytes) is `ENAMETOOLONG`, never truncated;
    /// empty or containing a NUL byte is `EINVAL`.
    static Result<UnixAddr> path(std::string_view path);
    /// An abstract name (no file; gone when the last socket bound to it closes). At most 107
    /// bytes (`ENAMETOOLONG`).
    static Result<UnixAddr> abstract(std::string_view name);
    /// "@name" is abstract, anything else a path.
    static Result<UnixAddr> parse(std::string_view text);
    /// A copy of the `len` bytes at `sa` (as accept or recvfrom give them).
    static UnixAddr from_sockaddr(const sockaddr* sa, socklen_t len) noexcept;

    /// True for an abstract name.
    bool is_abstract() const noexcept;
    /// True for an unbound socket's address.
    bool is_unnamed() const noexcept;
    /// The path, or the abstract name without its "@"; empty when unnamed.
    std::string name() const;
    /// The path, "@name", or "(unnamed)".
    std::string to_string() const;

    /// The address as the socket calls take it.
    const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&un_); }
    /// The storage, for a socket call to fill (up to capacity() bytes; then set_size).
    sockaddr* data() noexcept { return reinterpret_cast<sockaddr*>(&un_); }
    /// The length of the address for the socket calls.
    socklen_t size() const noexcept { return len_; }
    /// Set the length a socket call reported.
    void set_size(socklen_t len) noexcept;
    /// The room data() offers.
    static constexpr socklen_t capacity() noexcept { return sizeof(sockaddr_un); }

    /// Same family, same name.
    friend bool operator==(const UnixAddr& a, const UnixAddr& b) noexcept;

private:
    sockaddr_un un_{};
    socklen_t len_ = 0;
};

/// A descriptor with one owner: destroying it closes it. Move-only.
class UniqueFd {
public:
    UniqueFd() noexcept = default;
    /// Take ownership of `fd` (-1: none).
    explicit UniqueFd(int fd) noexcept
        : fd_(fd) {}
    /// Takes over the descriptor of `o`.
    UniqueFd(UniqueFd&& o) noexcept = default;
    /// Closes its own descriptor, then takes over the one of `o`.
    UniqueFd& operator=(UniqueFd&& o) noexcept = default;
    ~UniqueFd() = default;

    /// The descriptor (-1 when empty), still owned.
    int get() const noexcept { return fd_.get(); }
    /// True while it holds a descriptor.
    bool is_open() const noexcept { return fd_.is_open(); }
    /// Give up ownership: closing it is now the caller's job.
    int release() noexcept { return fd_.release(); }

private:
    detail::OwnedFd fd_;
};

/// The credentials of the process at the other end (SO_PEERCRED), as of connect/socketpair.
struct PeerCred {
    pid_t pid = 0; ///< its process id
    uid_t uid = 0; ///< its effective user id
    gid_t gid = 0; ///< its effective group id
};

/// What `recv_with_fds` produced: the bytes and the descriptors that came with them.
struct FdMessage {
    std::size_t size = 0;      ///< bytes stored in the caller's buffer (0: the peer closed)
    std::vector<UniqueFd> fds; ///< descriptors received (close-on-exec), owned
    bool truncated = false;    ///< a datagram longer than the buffer: the rest of it is lost
};

class UnixStream;
class UnixDatagram;

namespace detail {

/// The most descriptors one message may carry (the kernel's SCM_MAX_FD).
inline constexpr std::size_t kMaxFdsPerMessage = 253;

class [[nodiscard]] UnixConnectAwaitable : public IoAwaitable<UnixConnectAwaitable> {
public:
    explicit UnixConnectAwaitable(const UnixAddr& addr) noexcept;
    UnixConnectAwaitable(UnixConnectAwaitable&& o) noexcept;
    ~UnixConnectAwaitable();
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept { op_.set_connect_address(addr_.data(), addr_.size()); }
    Result<UnixStream> result();

private:
    UnixAddr addr_;
    int setup_error_ = 0;
};

class [[nodiscard]] UnixAcceptAwaitable : public IoAwaitable<UnixAcceptAwaitable> {
public:
    UnixAcceptAwaitable(int fd, UnixAddr* peer) noexcept;
    void prepare() noexcept {
        if (peer_ != nullptr) op_.set_accept_address(addr_.data(), &addrlen_);
    }
    Result<UnixStream> result();

private:
    UnixAddr addr_;
    std::uint32_t addrlen_ = UnixAddr::capacity();
    UnixAddr* peer_;
};

/// sendmsg with the descriptors in an SCM_RIGHTS control message.
class [[nodiscard]] FdSendAwaitable : public IoAwaitable<FdSendAwaitable> {
public:
    FdSendAwaitable(int fd, const void* buf, std::size_t len, std::span<const int> fds,
                    const UnixAddr* to);
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept;
    Result<std::size_t> result();

private:
    iovec iov_{};
    msghdr msg_{};
    std::vector<char> control_;
    const UnixAddr* to_;
    int setup_error_ = 0;
};

/// recvmsg with room for `max_fds` descriptors, MSG_CMSG_CLOEXEC.
class [[nodiscard]] FdRecvAwaitable : public IoAwaitable<FdRecvAwaitable> {
public:
    FdRecvAwaitable(int fd, void* buf, std::size_t len, std::size_t max_fds);
    void prepare() noexcept;
    Result<FdMessage> result();

private:
    iovec iov_{};
    msghdr msg_{};
    std::vector<char> control_;
};

/// A datagram receive (recvmsg, MSG_TRUNC): the size, truncation and sender.
class [[nodiscard]] UnixRecvFromAwaitable : public IoAwaitable<UnixRecvFromAwaitable> {
public:
    UnixRecvFromAwaitable(int fd, void* buf, std::size_t len, UnixAddr* from) noexcept;
    void prepare() noexcept;
    Result<RecvInfo> result();

private:
    iovec iov_{};
    msghdr msg_{};
    UnixAddr* from_;
};

} // namespace detail

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

    /// The other end's pid, uid and gid (SO_PEERCRED).
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
/// one is `EADDRINUSE`, and a path that is not a socket is never removed.
class UnixListener {
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
    /// The socket's descriptor, still owned by the listener (-1 when empty).
    int fd() const noexcept { return fd_.get(); }
    /// Remove the socket file now, then close asynchronously; the listener is empty at once.
    [[nodiscard]] detail::CloseAwaitable close() noexcept;

private:
    void remove_file() noexcept;

    detail::OwnedFd fd_;
    std::string path_; // the socket file this listener created ("" for abstract)
    dev_t dev_ = 0;    // and its identity, so a successor's file at that path is left alone
    ino_t ino_ = 0;
};

/// A Unix datagram socket: bound or not, connected or not. Message boundaries are kept.
class UnixDatagram {
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
    /// The socket's descriptor, still owned (-1 when empty).
    int fd() const noexcept { return fd_.get(); }
    /// True while it holds an open socket.
    bool is_open() const noexcept { return fd_.is_open(); }

private:
    detail::OwnedFd fd_;
    std::string path_; // the socket file bind() created, removed on destruction
};

} // namespace galay
