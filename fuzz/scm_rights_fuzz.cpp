// libFuzzer target: the SCM_RIGHTS walk over a recvmsg control buffer (src/net/scm_rights.hpp) on
// any bytes. The buffer is an exact-size heap copy, so a read past its end is an ASan report.
// Invariants: every descriptor it returns comes from a whole SOL_SOCKET/SCM_RIGHTS message inside
// the buffer (the count is checked against a walk written here on its own), and nothing it
// returns is owned or closed by it (the numbers are arbitrary: closing one would close a
// descriptor of this process).
#include "net/scm_rights.hpp"

#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace {

/// The number of descriptors a careful walk finds: whole headers, inside the buffer.
std::size_t expected_count(const std::byte* p, std::size_t size) {
    std::size_t at = 0, n = 0;
    while (size - at >= sizeof(cmsghdr)) {
        cmsghdr h;
        std::memcpy(&h, p + at, sizeof h);
        if (h.cmsg_len < CMSG_LEN(0) || h.cmsg_len > size - at) break;
        if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS)
            n += (h.cmsg_len - CMSG_LEN(0)) / sizeof(int);
        if (CMSG_ALIGN(h.cmsg_len) > size - at) break;
        at += CMSG_ALIGN(h.cmsg_len);
    }
    return n;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto copy = std::make_unique<std::byte[]>(size); // (exactly `size` bytes: ASan sees overruns)
    if (size > 0) std::memcpy(copy.get(), data, size);
    std::vector<int> fds;
    galay::detail::scm_rights_fds(std::span<const std::byte>(copy.get(), size), fds);
    if (fds.size() != expected_count(copy.get(), size)) __builtin_trap();
    return 0;
}
