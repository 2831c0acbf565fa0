// libFuzzer target: UnixAddr::parse / path / abstract / from_sockaddr / to_string on any bytes.
// Invariants: a parsed address prints as text that reads back to an equal address (a path that
// begins with '@' prints the same as an abstract name: it is read back with UnixAddr::path, the
// only way to name it); a path name
// holds no NUL byte (the kernel would cut it there); an abstract name keeps every byte; the
// sockaddr length never exceeds sockaddr_un; nothing reads out of bounds (ASan/UBSan).
#include <galay/net/unix_addr.hpp>

#include <sys/un.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto check = [](const galay::UnixAddr& a) {
        if (a.size() > sizeof(sockaddr_un)) __builtin_trap();
        const std::string printed = a.to_string();
        (void)a.name();
        if (a.is_unnamed()) return;
        auto back = !a.is_abstract() && printed.starts_with('@') ? galay::UnixAddr::path(printed)
                                                                 : galay::UnixAddr::parse(printed);
        if (!back || !(*back == a)) __builtin_trap();
    };
    if (auto a = galay::UnixAddr::parse(text)) {
        if (!a->is_abstract() && text.find('\0') != std::string_view::npos) __builtin_trap();
        check(*a);
    }
    if (auto p = galay::UnixAddr::path(text)) {
        if (p->is_abstract() || text.find('\0') != std::string_view::npos) __builtin_trap();
        check(*p);
    }
    if (auto n = galay::UnixAddr::abstract(text)) {
        if (!n->is_abstract() || n->name() != text) __builtin_trap();
        check(*n);
    }
    // Arbitrary bytes as a sockaddr of arbitrary length, from an exact-size heap copy.
    auto copy = std::make_unique<std::uint8_t[]>(size);
    if (size > 0) std::memcpy(copy.get(), data, size);
    const galay::UnixAddr d = galay::UnixAddr::from_sockaddr(
        reinterpret_cast<const sockaddr*>(copy.get()), static_cast<socklen_t>(size));
    if (d.size() > sizeof(sockaddr_un)) __builtin_trap();
    (void)d.to_string();
    (void)d.name();
    return 0;
}
