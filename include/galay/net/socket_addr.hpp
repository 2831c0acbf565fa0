// galay/net/socket_addr.hpp: IPv4 and IPv6 socket addresses.
//
//     auto a = galay::SocketAddr::parse("127.0.0.1:8080");   // Result<SocketAddr>
//     auto b = galay::SocketAddr::parse("[::1]:8080");
//     auto c = galay::SocketAddr::from_ip("fe80::1", 53);
//     std::string s = a->to_string();                          // "127.0.0.1:8080"
//     auto all = co_await galay::resolve("localhost", 8080);   // Result<std::vector<SocketAddr>>
#pragma once

#include "galay/error.hpp"
#include "galay/task.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace galay {

/// An IPv4 or IPv6 socket address (address and port), a value type.
class SocketAddr {
public:
    /// An unspecified address (family AF_UNSPEC).
    SocketAddr() noexcept;

    /// "a.b.c.d:port" or "[v6]:port". Numeric only (use `resolve` for host names).
    static Result<SocketAddr> parse(std::string_view text);
    /// A numeric IPv4 or IPv6 address and a port.
    static Result<SocketAddr> from_ip(std::string_view ip, std::uint16_t port);
    /// A copy of the `len` bytes at `sa` (as accept or recvfrom give them).
    static SocketAddr from_sockaddr(const sockaddr* sa, socklen_t len) noexcept;
    /// 0.0.0.0:`port` (every IPv4 interface).
    static SocketAddr any_v4(std::uint16_t port) noexcept;
    /// 127.0.0.1:`port`.
    static SocketAddr loopback_v4(std::uint16_t port) noexcept;
    /// The IPv6 wildcard address (`[::]`, every IPv6 interface) with `port`.
    static SocketAddr any_v6(std::uint16_t port) noexcept;
    /// The IPv6 loopback address (`[::1]`) with `port`.
    static SocketAddr loopback_v6(std::uint16_t port) noexcept;

    /// AF_INET, AF_INET6 or AF_UNSPEC.
    int family() const noexcept { return storage_.v4.sin_family; }
    /// True for an IPv4 address.
    bool is_v4() const noexcept { return family() == AF_INET; }
    /// True for an IPv6 address.
    bool is_v6() const noexcept { return family() == AF_INET6; }
    /// The port, in host byte order (0 when unspecified).
    std::uint16_t port() const noexcept;
    /// Change the port (nothing on an unspecified address).
    void set_port(std::uint16_t port) noexcept;
    /// The address without the port: "127.0.0.1", "::1".
    std::string ip() const;
    /// "127.0.0.1:8080" or "[::1]:8080".
    std::string to_string() const;

    /// The address as the socket calls take it.
    const sockaddr* data() const noexcept { return &storage_.any; }
    /// The storage, for a socket call to fill (up to capacity() bytes).
    sockaddr* data() noexcept { return &storage_.any; }
    /// The length of the address for the socket calls (0 when unspecified).
    socklen_t size() const noexcept;
    /// The room data() offers, for either family.
    static constexpr socklen_t capacity() noexcept { return sizeof(Storage); }

    friend bool operator==(const SocketAddr& a, const SocketAddr& b) noexcept;

private:
    union Storage {
        sockaddr any;
        sockaddr_in v4;
        sockaddr_in6 v6;
    } storage_;
};

/// Resolve `host` (a name or a numeric address) to socket addresses with `port`. Numeric
/// addresses resolve at once; names are looked up (getaddrinfo) on the blocking pool
/// (galay/blocking.hpp) so the scheduler keeps running. Cancellable until a pool thread starts
/// the lookup. A failed lookup is an error of `resolver_category()` whose message is the
/// resolver's ("Name or service not known", "Temporary failure in name resolution"), not a
/// socket error such as "No route to host".
[[nodiscard]] Task<Result<std::vector<SocketAddr>>> resolve(std::string host, std::uint16_t port);

/// The category of resolver (getaddrinfo) errors; the values are its EAI_* codes.
const std::error_category& resolver_category() noexcept;

} // namespace galay
