// libFuzzer target: SocketAddr::parse / from_ip / from_sockaddr / to_string on any bytes.
// Invariants: a parsed address prints as text that parses back to the same address; text that
// parses has no NUL byte (C strings would silently cut it); nothing crashes or reads out of
// bounds (ASan/UBSan).
#include <galay/net/socket_addr.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const bool has_nul = text.find('\0') != std::string_view::npos;

    if (auto a = galay::SocketAddr::parse(text)) {
        if (has_nul) __builtin_trap();
        const std::string printed = a->to_string();
        auto b = galay::SocketAddr::parse(printed);
        // A zone ("fe80::1%eth0") is kept as a scope id and not printed: compare without it.
        if (!b) __builtin_trap();
        if (a->port() != b->port() || a->ip() != b->ip() || a->family() != b->family())
            __builtin_trap();
    }
    if (auto c = galay::SocketAddr::from_ip(text, 8080)) {
        if (has_nul) __builtin_trap();
        if (c->port() != 8080) __builtin_trap();
        (void)c->to_string();
    }
    // Arbitrary bytes as a sockaddr of arbitrary length.
    const galay::SocketAddr d = galay::SocketAddr::from_sockaddr(
        reinterpret_cast<const sockaddr*>(data), static_cast<socklen_t>(size));
    (void)d.to_string();
    (void)d.port();
    (void)d.size();
    return 0;
}
