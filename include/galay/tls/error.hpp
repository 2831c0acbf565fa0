// galay/tls/error.hpp: how a TLS operation reports what went wrong.
//
//     galay::Result<void> hs = co_await tls_stream.handshake().timeout(5s);
//     if (hs.error() == galay::tls::errc::certificate_verify_failed)
//         std::cerr << tls_stream.last_error() << '\n'; // "... certificate has expired"
//
// TLS operations return `galay::Result<T>` like every galay operation. Transport failures keep
// their errno codes (`timed_out`, `operation_canceled`, `connection_reset`); what only TLS can
// get wrong is a `galay::tls::errc`. The code says what kind of failure it was; the stream's
// `last_error()` holds OpenSSL's own reason text (and, for a certificate, the X509 verify reason).
#pragma once

#include "galay/error.hpp"

#include <system_error>

namespace galay::tls {

/// What only TLS can get wrong (transport failures keep their errno codes).
enum class errc {
    handshake_failed = 1,      ///< the handshake failed (OpenSSL's reason in last_error())
    certificate_verify_failed, ///< the peer's certificate did not verify (expired, wrong host,
                               ///< untrusted: the X509 reason in last_error())
    truncated,      ///< the peer closed the connection without close_notify: the data may be cut
    protocol_error, ///< a TLS record or alert that ends the connection (bad MAC, fatal alert)
    broken,         ///< an earlier operation failed after its bytes were encrypted: the stream
                    ///< cannot go on (only closing it makes sense)
    not_connected,  ///< an operation that needs the handshake, before it completed
};

/// The category of `tls::errc` codes ("galay.tls").
const std::error_category& tls_category() noexcept;

/// `e` as a `std::error_code` (so `ec == tls::errc::truncated` works).
inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), tls_category()};
}

} // namespace galay::tls

template <>
struct std::is_error_code_enum<galay::tls::errc> : std::true_type {};
