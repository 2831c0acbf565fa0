// The awaitables of galay::AsyncFd (galay/async_fd.hpp): one readiness wait on a descriptor, and
// the interest and readiness values they carry. Made only by AsyncFd (docs/driver.md: who makes
// an operation).
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"

#include <cstdint>

namespace galay {

class AsyncFd;

/// What a wait on an AsyncFd waits for; combine with `|`.
enum class Interest : std::uint8_t {
    readable = 1, ///< a read will not block
    writable = 2, ///< a write will not block
    priority = 4, ///< priority data (POLLPRI)
};

constexpr Interest operator|(Interest a, Interest b) noexcept {
    return static_cast<Interest>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}

/// What a completed AsyncFd::ready() found: the interests that hold, and an error or a hang-up,
/// which are reported whatever was asked (the next read or write says which error).
class Readiness {
public:
    static constexpr std::uint8_t kReadable = 1, kWritable = 2, kPriority = 4, kError = 8,
                                  kHangup = 16;
    Readiness() noexcept = default;
    explicit Readiness(std::uint8_t bits) noexcept
        : bits_(bits) {}
    /// A read will not block.
    bool readable() const noexcept { return (bits_ & kReadable) != 0; }
    /// A write will not block.
    bool writable() const noexcept { return (bits_ & kWritable) != 0; }
    /// Priority data is there.
    bool priority() const noexcept { return (bits_ & kPriority) != 0; }
    /// The descriptor has an error pending (POLLERR: a reset connection, a failed connect).
    bool error() const noexcept { return (bits_ & kError) != 0; }
    /// The peer hung up (POLLHUP, or POLLRDHUP: it shut its side down).
    bool hangup() const noexcept { return (bits_ & kHangup) != 0; }
    /// All of it, as the k* bits.
    std::uint8_t bits() const noexcept { return bits_; }

private:
    std::uint8_t bits_ = 0;
};

} // namespace galay

namespace galay::detail {

/// The poll(2) events a wait for `interest` asks for (readable includes POLLRDHUP).
int poll_events(Interest interest) noexcept;
/// A readiness op's result (poll(2) revents, or -errno) as Readiness, or the error.
Result<Readiness> readiness_result(std::int64_t result);

/// A readiness wait (OpCode::poll) for `interest` on the AsyncFd's descriptor. The op carries
/// the poll(2) events in `msg_flags`; its result is the revents (or -errno).
template <class Derived>
class ReadinessWait : public IoAwaitable<Derived> {
public:
    /// An empty AsyncFd fails at once (EBADF).
    bool await_ready() const noexcept { return this->op_.fd < 0; }

protected:
    ReadinessWait(int fd, Interest interest) noexcept {
        this->op_.code = OpCode::poll;
        this->op_.fd = fd;
        this->op_.msg_flags = poll_events(interest);
        this->op_.result = -EBADF; // (what an empty AsyncFd's wait reports)
    }
};

/// AsyncFd::readable(), writable(), priority() -> Result<void>.
class [[nodiscard]] ReadyAwaitable : public ReadinessWait<ReadyAwaitable> {
public:
    Result<void> result() const {
        if (op_.result < 0) return fail(static_cast<int>(-op_.result));
        return {};
    }

private:
    friend class galay::AsyncFd;
    ReadyAwaitable(int fd, Interest interest) noexcept
        : ReadinessWait(fd, interest) {}
};

/// AsyncFd::ready(interest) -> Result<Readiness>.
class [[nodiscard]] ReadinessAwaitable : public ReadinessWait<ReadinessAwaitable> {
public:
    Result<Readiness> result() const { return readiness_result(op_.result); }

private:
    friend class galay::AsyncFd;
    ReadinessAwaitable(int fd, Interest interest) noexcept
        : ReadinessWait(fd, interest) {}
};

} // namespace galay::detail
