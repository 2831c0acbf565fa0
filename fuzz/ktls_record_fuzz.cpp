// libFuzzer target: the kTLS receive path's record handling (src/tls/ktls_io.cpp) on any bytes:
// a recvmsg's control messages (received_record_type), then a peer's control records (alerts,
// handshake messages) in pieces of any size (read_control). Invariants: nothing reads or writes
// out of bounds (ASan/UBSan), the header being gathered never exceeds its 4 bytes, and nothing
// is read after a close_notify or a refusal.
#include "tls/ktls.hpp"

#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    // The first byte: how many of the next bytes are control messages (as the kernel would place
    // them: in a buffer aligned for cmsghdr).
    const std::size_t control_len = std::min<std::size_t>(data[0], size - 1);
    std::vector<cmsghdr> aligned(control_len / sizeof(cmsghdr) + 1);
    std::memcpy(aligned.data(), data + 1, control_len);
    (void)galay::tls::detail::received_record_type(aligned.data(), control_len);

    // The rest: records as [type][length][bytes], fed until the reader stops.
    galay::tls::detail::KtlsTrack t;
    const std::uint8_t* p = data + 1 + control_len;
    std::size_t left = size - 1 - control_len;
    while (left >= 2) {
        // Mostly alerts (21) and handshake messages (22), the types the reader follows; a
        // quarter of the bytes name any type (p[0] / 4: 0..63).
        const unsigned char type =
            p[0] % 4 != 3 ? static_cast<unsigned char>(21 + p[0] % 2) : p[0] / 4;
        const std::size_t n = std::min<std::size_t>(p[1], left - 2);
        const auto r = galay::tls::detail::read_control(t, type, p + 2, n);
        if (t.control_have >= t.control.size()) __builtin_trap();
        if (r.kind != galay::tls::detail::ControlRead::Kind::more) {
            if (r.kind == galay::tls::detail::ControlRead::Kind::refused && r.reason.empty())
                __builtin_trap();
            break;
        }
        p += 2 + n;
        left -= 2 + n;
    }
    return 0;
}
