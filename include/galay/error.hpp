// galay/error.hpp: how every I/O result is reported.
//
// I/O operations return `galay::Result<T>` (a `std::expected<T, std::error_code>`): no exceptions
// on the hot path. Errors are ordinary `std::error_code`s in the system category (errno values), so
// `ec == std::errc::timed_out` and `ec.message()` work as usual. Errors that have no errno of their
// own (an `O_DIRECT` buffer that is not aligned, an echo that came back wrong) live in
// `galay::errc`.
//
//     galay::Result<std::size_t> n = co_await stream.recv(buf).timeout(2s);
//     if (!n) std::cerr << "recv failed: " << n.error().message() << '\n';
#pragma once

#include <cerrno>
#include <expected>
#include <string>
#include <system_error>

namespace galay {

/// What every fallible galay operation gives: a `T` or an error code.
template <class T>
using Result = std::expected<T, std::error_code>;

/// Errors specific to galay (not errno values).
enum class errc {
    misaligned_direct_io = 1, ///< O_DIRECT buffer, offset or length not aligned to the block size
    unexpected_eof,           ///< the peer closed (or the file ended) before all bytes arrived
    backend_unavailable,      ///< the requested backend cannot run on this kernel
    direct_io_unsupported,    ///< the filesystem refuses O_DIRECT (open fails with EINVAL)
    transfer_too_large,       ///< send_all/recv_exact/read_exact_at/write_all_at: more than one
                              ///< call can move (TCP: 4 GiB - 1; files: 2 GiB - 4 KiB); split it
    closed,                   ///< the channel was closed (nothing more to receive, nobody to send
                              ///< to), or the other end of a oneshot is gone
    end_of_stream,     ///< io::BufReader: the peer closed cleanly before the first byte of a read
    limit_exceeded,    ///< io::BufReader: no delimiter within the reader's capacity (a line longer
                       ///< than its limit), or a peek larger than the capacity
    control_truncated, ///< recv_with_fds: more descriptors arrived than the receive allowed
                       ///< (MSG_CTRUNC); those that did arrive were closed
    output_too_large,  ///< process::Command::output: the child wrote more than the limit
    lagged,            ///< Broadcast: the receiver fell behind and messages were overwritten before
                       ///< it read them (Receiver::missed() says how many); the next recv goes on
    not_pollable,      ///< AsyncFd: a regular file or a directory is always ready, so readiness
                       ///< means nothing there (read it with fs::File)
    not_supported,     ///< the feature needs a Linux-only call this build does not use (the POSIX
                       ///< profile, macOS, FreeBSD): splice, kTLS, SCM_CREDENTIALS ...
};

/// The category of galay::errc codes (name "galay").
const std::error_category& galay_category() noexcept;

/// An error code of galay_category() (makes `errc` usable as a `std::error_code`).
inline std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), galay_category()};
}

/// An error code from a (positive) errno value.
inline std::error_code errno_code(int err) noexcept {
    return {err, std::system_category()};
}

/// `std::unexpected` from a (positive) errno value: `return fail(EINVAL);`.
inline std::unexpected<std::error_code> fail(int err) noexcept {
    return std::unexpected(errno_code(err));
}
/// `std::unexpected` from a galay::errc: `return fail(errc::closed);`.
inline std::unexpected<std::error_code> fail(errc e) noexcept {
    return std::unexpected(make_error_code(e));
}

/// Thrown by set-up code (creating a runtime, binding a listener in a constructor) where a value
/// cannot be returned.
class Error : public std::system_error {
public:
    using std::system_error::system_error;
};

} // namespace galay

template <>
struct std::is_error_code_enum<galay::errc> : std::true_type {};
