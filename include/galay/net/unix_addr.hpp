// galay/net/unix_addr.hpp: the address of a Unix domain socket (a path, an abstract name, or
// none).
//
//     auto path = galay::UnixAddr::parse("/run/my-service.sock"); // Result<UnixAddr>
//     auto name = galay::UnixAddr::parse("@my-service");          // abstract: no file
//     if (path && name) std::printf("%s and %s\n", path->to_string().c_str(),
//                                   name->to_string().c_str());
//
// A value type; the sockets that take and give it are in galay/net/unix.hpp.
#pragma once

#include "galay/error.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <string>
#include <string_view>

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

} // namespace galay
