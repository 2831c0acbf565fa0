#include "galay/net/socket_addr.hpp"
#include "galay/blocking.hpp"
#include "galay/runtime.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace galay {

SocketAddr::SocketAddr() noexcept {
    std::memset(&storage_, 0, sizeof storage_);
    storage_.any.sa_family = AF_UNSPEC;
}

socklen_t SocketAddr::size() const noexcept {
    if (is_v4()) return sizeof(sockaddr_in);
    if (is_v6()) return sizeof(sockaddr_in6);
    return 0;
}

std::uint16_t SocketAddr::port() const noexcept {
    if (is_v4()) return ntohs(storage_.v4.sin_port);
    if (is_v6()) return ntohs(storage_.v6.sin6_port);
    return 0;
}

void SocketAddr::set_port(std::uint16_t port) noexcept {
    if (is_v4())
        storage_.v4.sin_port = htons(port);
    else if (is_v6())
        storage_.v6.sin6_port = htons(port);
}

Result<SocketAddr> SocketAddr::from_ip(std::string_view ip, std::uint16_t port) {
    // inet_pton reads a C string: "::\0junk" would be "::". (Found by fuzz/socket_addr_fuzz.)
    if (ip.find('\0') != std::string_view::npos) return fail(EINVAL);
    std::string s(ip);
    SocketAddr a;
    if (::inet_pton(AF_INET, s.c_str(), &a.storage_.v4.sin_addr) == 1) {
        a.storage_.v4.sin_family = AF_INET;
        a.storage_.v4.sin_port = htons(port);
        return a;
    }
    // Allow a zone suffix for link-local addresses ("fe80::1%eth0").
    std::string zone;
    if (auto pct = s.find('%'); pct != std::string::npos) {
        zone = s.substr(pct + 1);
        s.resize(pct);
    }
    if (::inet_pton(AF_INET6, s.c_str(), &a.storage_.v6.sin6_addr) == 1) {
        a.storage_.v6.sin6_family = AF_INET6;
        a.storage_.v6.sin6_port = htons(port);
        if (!zone.empty()) {
            a.storage_.v6.sin6_scope_id = if_nametoindex(zone.c_str());
            if (a.storage_.v6.sin6_scope_id == 0) return fail(EINVAL);
        }
        return a;
    }
    return fail(EINVAL);
}

Result<SocketAddr> SocketAddr::parse(std::string_view text) {
    std::string_view host;
    std::string_view port_text;
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return fail(EINVAL);
        host = text.substr(1, close - 1);
        port_text = text.substr(close + 2);
    } else {
        auto colon = text.rfind(':');
        if (colon == std::string_view::npos || text.find(':') != colon) return fail(EINVAL);
        host = text.substr(0, colon);
        port_text = text.substr(colon + 1);
    }
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc{} || end != port_text.data() + port_text.size() || port > 65535 ||
        port_text.empty())
        return fail(EINVAL);
    return from_ip(host, static_cast<std::uint16_t>(port));
}

SocketAddr SocketAddr::from_sockaddr(const sockaddr* sa, socklen_t len) noexcept {
    SocketAddr a;
    if (sa != nullptr && len > 0)
        std::memcpy(&a.storage_, sa, std::min<socklen_t>(len, capacity()));
    return a;
}

SocketAddr SocketAddr::any_v4(std::uint16_t port) noexcept {
    SocketAddr a;
    a.storage_.v4.sin_family = AF_INET;
    a.storage_.v4.sin_addr.s_addr = htonl(INADDR_ANY);
    a.storage_.v4.sin_port = htons(port);
    return a;
}

SocketAddr SocketAddr::loopback_v4(std::uint16_t port) noexcept {
    SocketAddr a = any_v4(port);
    a.storage_.v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

SocketAddr SocketAddr::any_v6(std::uint16_t port) noexcept {
    SocketAddr a;
    a.storage_.v6.sin6_family = AF_INET6;
    a.storage_.v6.sin6_addr = in6addr_any;
    a.storage_.v6.sin6_port = htons(port);
    return a;
}

SocketAddr SocketAddr::loopback_v6(std::uint16_t port) noexcept {
    SocketAddr a = any_v6(port);
    a.storage_.v6.sin6_addr = in6addr_loopback;
    return a;
}

std::string SocketAddr::ip() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (is_v4())
        ::inet_ntop(AF_INET, &storage_.v4.sin_addr, buf, sizeof buf);
    else if (is_v6())
        ::inet_ntop(AF_INET6, &storage_.v6.sin6_addr, buf, sizeof buf);
    else
        return "unspecified";
    return buf;
}

std::string SocketAddr::to_string() const {
    if (is_v6()) return "[" + ip() + "]:" + std::to_string(port());
    if (is_v4()) return ip() + ":" + std::to_string(port());
    return "unspecified";
}

bool operator==(const SocketAddr& a, const SocketAddr& b) noexcept {
    if (a.family() != b.family()) return false;
    if (a.is_v4())
        return a.storage_.v4.sin_port == b.storage_.v4.sin_port &&
               a.storage_.v4.sin_addr.s_addr == b.storage_.v4.sin_addr.s_addr;
    if (a.is_v6())
        return a.storage_.v6.sin6_port == b.storage_.v6.sin6_port &&
               std::memcmp(&a.storage_.v6.sin6_addr, &b.storage_.v6.sin6_addr, 16) == 0 &&
               a.storage_.v6.sin6_scope_id == b.storage_.v6.sin6_scope_id;
    return true;
}

namespace {

struct Lookup {
    std::string host;
    std::uint16_t port;
    Result<std::vector<SocketAddr>> result{std::vector<SocketAddr>{}};
    int gai_error = 0;
};

class ResolverCategory final : public std::error_category {
public:
    const char* name() const noexcept override { return "resolver"; }
    std::string message(int ev) const override { return ::gai_strerror(ev); }
    /// "Try again later" still compares equal to std::errc::resource_unavailable_try_again.
    std::error_condition default_error_condition(int ev) const noexcept override {
        if (ev == EAI_AGAIN) return std::errc::resource_unavailable_try_again;
        return {ev, *this};
    }
};

std::error_code gai_to_error(int rc) {
    switch (rc) {
    case EAI_MEMORY:
        return std::make_error_code(std::errc::not_enough_memory);
    case EAI_SYSTEM:
        return errno_code(errno);
    default: // EAI_NONAME, EAI_AGAIN, EAI_FAIL, ...: the resolver's own words
        return {rc, resolver_category()};
    }
}

void run_lookup(Lookup& l) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(l.host.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
        l.gai_error = rc;
        l.result = std::unexpected(gai_to_error(rc));
        return;
    }
    std::vector<SocketAddr> out;
    for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
        SocketAddr a = SocketAddr::from_sockaddr(p->ai_addr, p->ai_addrlen);
        a.set_port(l.port);
        if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    }
    ::freeaddrinfo(res);
    l.result = std::move(out);
}

} // namespace

const std::error_category& resolver_category() noexcept {
    static const ResolverCategory category;
    return category;
}

Task<Result<std::vector<SocketAddr>>> resolve(std::string host, std::uint16_t port) {
    Result<SocketAddr> numeric = SocketAddr::from_ip(host, port);
    if (numeric) co_return std::vector<SocketAddr>{*numeric};
    // getaddrinfo blocks: on the blocking pool (cancellable until a pool thread starts it).
    Lookup l;
    l.host = std::move(host);
    l.port = port;
    co_return co_await spawn_blocking([&l] {
        run_lookup(l);
        return std::move(l.result);
    });
}

} // namespace galay
