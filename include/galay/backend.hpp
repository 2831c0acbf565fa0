// galay/backend.hpp: which kernel interface a scheduler drives (io_uring or epoll on Linux, kqueue
// on macOS and FreeBSD), and asking this machine which of them it can run.
//
//     galay::Result<galay::Backend> b = galay::resolve_backend(galay::Backend::automatic);
//     if (b) std::printf("galay runs on %s here\n", galay::backend_name(*b));
//     if (!galay::probe_io_uring().usable)
//         std::printf("no io_uring: %s\n", galay::probe_io_uring().reason.c_str());
//
// `Backend::automatic` uses io_uring when the kernel allows it and epoll otherwise, printing one
// line when it falls back (on macOS and FreeBSD: kqueue); `GALAY_BACKEND=epoll|io_uring|kqueue|
// auto` overrides it. A backend is chosen per scheduler (`SchedulerOptions::backend`,
// galay/scheduler.hpp). Every value exists on every system, so code that names one compiles
// everywhere; asking for one the system lacks (kqueue on Linux, epoll or io_uring on macOS) is
// errc::backend_unavailable with a message that says so.
#pragma once

#include "galay/error.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace galay {

/// The kernel interface a scheduler's driver uses.
enum class Backend : std::uint8_t {
    automatic, ///< io_uring where the kernel allows it, else epoll; kqueue on macOS and FreeBSD
    io_uring,  ///< io_uring (liburing): completions (Linux)
    epoll,     ///< epoll, with libaio (or the blocking pool) for files: readiness (Linux)
    kqueue,    ///< kqueue, with the blocking pool for files: readiness (macOS, FreeBSD)
};

/// "io_uring", "epoll", "kqueue" or "auto".
const char* backend_name(Backend b) noexcept;
/// Parses "auto", "io_uring" (or "uring"), "epoll", "kqueue". Returns nullopt for anything else.
std::optional<Backend> parse_backend(std::string_view s) noexcept;

/// Result of probing io_uring on this kernel.
struct UringProbe {
    /// True when io_uring can run here with every opcode galay uses.
    bool usable = false;
    std::error_code error; ///< why not, when !usable
    std::string reason;    ///< a sentence naming the failing step (setup, missing opcode, sysctl)
};
/// Probe io_uring: ring set-up plus every opcode galay uses. Cached after the first call.
/// In a build with GALAY_FAULT_INJECTION (tests), `GALAY_FAKE_URING_PROBE=<errno name or number>`
/// makes the probe fail that way.
const UringProbe& probe_io_uring();
/// The backends this build of galay contains, in the order Backend::automatic tries them (the
/// CMake options GALAY_WITH_URING=OFF and so on leave one out; asking for it is then an error
/// that names the option). Whether the kernel allows a built backend is `probe_io_uring`'s
/// question.
std::span<const Backend> built_backends() noexcept;

/// The backend `requested` resolves to on this machine (automatic -> io_uring, epoll or kqueue,
/// after looking at `GALAY_BACKEND`), or an error when a forced backend cannot run here.
Result<Backend> resolve_backend(Backend requested);

} // namespace galay
