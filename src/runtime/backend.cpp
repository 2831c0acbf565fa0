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
    case Backend::automatic:
        return "auto";
    }
    return "?";
}

std::optional<Backend> parse_backend(std::string_view s) noexcept {
    if (s == "auto" || s == "automatic") return Backend::automatic;
    if (s == "io_uring" || s == "uring" || s == "iouring") return Backend::io_uring;
    if (s == "epoll") return Backend::epoll;
    return std::nullopt;
}

const UringProbe& probe_io_uring() {
    static const UringProbe probe = detail::run_uring_probe();
    return probe;
}

Result<Backend> resolve_backend(Backend requested) {
    if (requested == Backend::automatic) {
        if (const char* env = std::getenv("GALAY_BACKEND"); env != nullptr && *env != '\0') {
            std::optional<Backend> b = parse_backend(env);
            if (!b) {
                std::fprintf(stderr,
                             "galay: GALAY_BACKEND=%s is not a backend (use epoll, io_uring or "
                             "auto)\n",
                             env);
                return fail(EINVAL);
            }
            requested = *b;
        }
    }
    if (requested == Backend::epoll) return Backend::epoll;
    const UringProbe& p = probe_io_uring();
    if (requested == Backend::io_uring) {
        if (p.usable) return Backend::io_uring;
        std::fprintf(stderr, "galay: io_uring was requested but cannot be used: %s\n",
                     p.reason.c_str());
        return std::unexpected(p.error ? p.error : make_error_code(errc::backend_unavailable));
    }
    if (p.usable) return Backend::io_uring;
    // Resource errors are not a reason to fall back silently: the user has to fix them.
    if (p.error == std::errc::not_enough_memory) {
        std::fprintf(stderr, "galay: io_uring set-up failed: %s\n", p.reason.c_str());
        return std::unexpected(p.error);
    }
    static std::once_flag said;
    std::call_once(said, [&] {
        std::fprintf(stderr, "galay: io_uring unavailable (%s); falling back to epoll\n",
                     p.reason.c_str());
    });
    return Backend::epoll;
}

} // namespace galay
