#include "galay/runtime.hpp"
#include "runtime/drivers.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace galay {

namespace {
class GalayCategory final : public std::error_category {
public:
    const char* name() const noexcept override { return "galay"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::misaligned_direct_io:
            return "O_DIRECT requires the buffer address, file offset and length to be aligned to "
                   "the device's logical block size";
        case errc::unexpected_eof:
            return "end of file, or the peer closed the connection, before all bytes arrived";
        case errc::backend_unavailable:
            return "the requested I/O backend is not available here";
        case errc::direct_io_unsupported:
            return "the filesystem does not support O_DIRECT";
        case errc::transfer_too_large:
            return "buffer too large for one all-or-error transfer (TCP send_all/recv_exact: at "
                   "most 4 GiB - 1 bytes; files read_exact_at/write_all_at: at most 2 GiB - 4 "
                   "KiB); "
                   "split it";
        case errc::closed:
            return "the channel is closed (or the other end of the oneshot is gone)";
        case errc::end_of_stream:
            return "end of stream: the peer closed the connection";
        case errc::limit_exceeded:
            return "no delimiter within the buffered reader's limit (a line or message longer "
                   "than its capacity)";
        case errc::control_truncated:
            return "control message truncated (MSG_CTRUNC): more descriptors arrived than the "
                   "receive allowed; those that arrived were closed";
        case errc::output_too_large:
            return "the child process wrote more output than the limit given to output(); it "
                   "was killed";
        case errc::lagged:
            return "the broadcast receiver fell behind: messages were overwritten before it read "
                   "them";
        case errc::not_pollable:
            return "a regular file or a directory is always ready: AsyncFd cannot wait on it "
                   "(read it with fs::File)";
        case errc::not_supported:
            return "not supported here: it needs a Linux-only system call that this build does "
                   "not use (the POSIX profile, GALAY_POSIX_ONLY, or macOS/FreeBSD)";
        }
        return "unknown galay error " + std::to_string(ev);
    }
};
} // namespace

const std::error_category& galay_category() noexcept {
    static const GalayCategory category;
    return category;
}

const char* backend_name(Backend b) noexcept {
    switch (b) {
    case Backend::io_uring:
        return "io_uring";
    case Backend::epoll:
        return "epoll";
    case Backend::kqueue:
        return "kqueue";
    case Backend::automatic:
        return "auto";
    }
    return "?";
}

std::optional<Backend> parse_backend(std::string_view s) noexcept {
    if (s == "auto" || s == "automatic") return Backend::automatic;
    if (s == "io_uring" || s == "uring" || s == "iouring") return Backend::io_uring;
    if (s == "epoll") return Backend::epoll;
    if (s == "kqueue") return Backend::kqueue;
    return std::nullopt;
}

const UringProbe& probe_io_uring() {
    return detail::probe_backend(Backend::io_uring);
}

Result<Backend> resolve_backend(Backend requested) {
    if (requested == Backend::automatic) {
        if (const char* env = std::getenv("GALAY_BACKEND"); env != nullptr && *env != '\0') {
            std::optional<Backend> b = parse_backend(env);
            if (!b) {
                std::fprintf(stderr,
                             "galay: GALAY_BACKEND=%s is not a backend (use epoll, io_uring, "
                             "kqueue or auto)\n",
                             env);
                return fail(EINVAL);
            }
            requested = *b;
        }
    }
    if (requested != Backend::automatic) {
        const detail::BackendProbe& p = detail::probe_backend(requested);
        if (p.usable) return requested;
        std::fprintf(stderr, "galay: %s was requested but cannot be used: %s\n",
                     backend_name(requested), p.reason.c_str());
        return std::unexpected(p.error ? p.error : make_error_code(errc::backend_unavailable));
    }
    // Automatic: the first backend of the build that the kernel allows, in the registry's order.
    const detail::KnownBackend* refused = nullptr;
    for (const detail::KnownBackend& k : detail::known_backends()) {
        if (k.entry == nullptr) continue; // not in this build: nothing to fall back from
        const detail::BackendProbe& p = detail::probe_backend(k.backend);
        if (p.usable) {
            if (refused != nullptr) {
                static std::once_flag said;
                std::call_once(said, [&] {
                    std::fprintf(stderr, "galay: %s unavailable (%s); falling back to %s\n",
                                 backend_name(refused->backend),
                                 detail::probe_backend(refused->backend).reason.c_str(),
                                 backend_name(k.backend));
                });
            }
            return k.backend;
        }
        // Resource errors are not a reason to fall back silently: the user has to fix them.
        if (p.error == std::errc::not_enough_memory) {
            std::fprintf(stderr, "galay: %s set-up failed: %s\n", backend_name(k.backend),
                         p.reason.c_str());
            return std::unexpected(p.error);
        }
        if (refused == nullptr) refused = &k;
    }
    const char* why = refused != nullptr ? detail::probe_backend(refused->backend).reason.c_str()
                                         : "this build contains none";
    std::fprintf(stderr, "galay: no I/O backend can run here (%s)\n", why);
    return std::unexpected(make_error_code(errc::backend_unavailable));
}

} // namespace galay
