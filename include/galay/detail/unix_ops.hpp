// The awaitables of the Unix sockets' own operations (galay/net/unix.hpp): connect, accept,
// descriptor passing and datagram receives. Each is made only by the socket type whose operation
// it is, on the descriptor it owns (docs/driver.md: who makes an operation).
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"
#include "galay/net/unix_addr.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace galay {
struct FdMessage;
struct RecvInfo;
class UnixStream;
class UnixListener;
class UnixDatagram;
} // namespace galay

namespace galay::detail {

/// The most descriptors one message may carry (the kernel's SCM_MAX_FD).
inline constexpr std::size_t kMaxFdsPerMessage = 253;

/// A new socket connected to a Unix address -> Result<UnixStream>.
class [[nodiscard]] UnixConnectAwaitable : public IoAwaitable<UnixConnectAwaitable> {
public:
    UnixConnectAwaitable(UnixConnectAwaitable&& o) noexcept;
    ~UnixConnectAwaitable();
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept { op_.set_connect_address(addr_.data(), addr_.size()); }
    Result<UnixStream> result();

private:
    friend class galay::UnixStream;
    explicit UnixConnectAwaitable(const UnixAddr& addr) noexcept;

    UnixAddr addr_;
    int setup_error_ = 0;
};

/// The next connection of a UnixListener -> Result<UnixStream>.
class [[nodiscard]] UnixAcceptAwaitable : public IoAwaitable<UnixAcceptAwaitable> {
public:
    void prepare() noexcept {
        if (peer_ != nullptr) op_.set_accept_address(addr_.data(), &addrlen_);
    }
    Result<UnixStream> result();

private:
    friend class galay::UnixListener;
    UnixAcceptAwaitable(int fd, UnixAddr* peer) noexcept;

    UnixAddr addr_;
    std::uint32_t addrlen_ = UnixAddr::capacity();
    UnixAddr* peer_;
};

/// sendmsg with the descriptors in an SCM_RIGHTS control message.
class [[nodiscard]] FdSendAwaitable : public IoAwaitable<FdSendAwaitable> {
public:
    bool await_ready() const noexcept { return setup_error_ != 0; }
    void prepare() noexcept;
    Result<std::size_t> result();

private:
    friend class galay::UnixStream;
    friend class galay::UnixDatagram;
    FdSendAwaitable(int fd, const void* buf, std::size_t len, std::span<const int> fds,
                    const UnixAddr* to);

    iovec iov_{};
    msghdr msg_{};
    std::vector<char> control_;
    const UnixAddr* to_;
    int setup_error_ = 0;
};

/// recvmsg with room for `max_fds` descriptors, MSG_CMSG_CLOEXEC.
class [[nodiscard]] FdRecvAwaitable : public IoAwaitable<FdRecvAwaitable> {
public:
    void prepare() noexcept;
    Result<FdMessage> result();

private:
    friend class galay::UnixStream;
    friend class galay::UnixDatagram;
    FdRecvAwaitable(int fd, void* buf, std::size_t len, std::size_t max_fds);

    iovec iov_{};
    msghdr msg_{};
    std::vector<char> control_;
};

/// A datagram receive (recvmsg, MSG_TRUNC): the size, truncation and sender.
class [[nodiscard]] UnixRecvFromAwaitable : public IoAwaitable<UnixRecvFromAwaitable> {
public:
    void prepare() noexcept;
    Result<RecvInfo> result();

private:
    friend class galay::UnixDatagram;
    UnixRecvFromAwaitable(int fd, void* buf, std::size_t len, UnixAddr* from) noexcept;

    iovec iov_{};
    msghdr msg_{};
    UnixAddr* from_;
};

} // namespace galay::detail
