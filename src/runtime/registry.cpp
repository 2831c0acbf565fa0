// The driver registry (see drivers.hpp): which backends this build contains, their probes (run
// once per process) and the order Backend::automatic tries them in. A new backend adds its
// folder under src/driver/ and one line to kBackends.
#include "runtime/drivers.hpp"

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>

#ifndef GALAY_WITH_URING
#define GALAY_WITH_URING 1
#endif

namespace galay::detail {

namespace {

#if GALAY_WITH_URING
constexpr const DriverEntry* kUring = &uring_driver_entry;
#else
constexpr const DriverEntry* kUring = nullptr;
#endif

// One readiness driver per system: its poller is kqueue or epoll, the other is not there.
#if GALAY_KQUEUE
constexpr const DriverEntry* kEpoll = nullptr;
constexpr const DriverEntry* kKqueue = &readiness_driver_entry;
#else
constexpr const DriverEntry* kEpoll = &readiness_driver_entry;
constexpr const DriverEntry* kKqueue = nullptr;
#endif

constexpr std::array kBackends{
    KnownBackend{Backend::io_uring, "GALAY_WITH_URING", kUring},
    KnownBackend{Backend::kqueue, nullptr, kKqueue},
    KnownBackend{Backend::epoll, nullptr, kEpoll},
};

BackendProbe left_out(const KnownBackend& k) {
    BackendProbe out;
    out.error = make_error_code(errc::backend_unavailable);
    if (k.cmake_option == nullptr)
        out.reason =
            std::string(backend_name(k.backend)) + " is not on this system (" +
            (k.backend == Backend::kqueue ? "kqueue is macOS and FreeBSD's" : "epoll is Linux's") +
            ")";
    else
        out.reason = std::string("galay was built without ") + backend_name(k.backend) + " (" +
                     k.cmake_option + "=OFF)";
    return out;
}

} // namespace

std::span<const KnownBackend> known_backends() noexcept {
    return kBackends;
}

const KnownBackend* find_backend(Backend b) noexcept {
    for (const KnownBackend& k : kBackends)
        if (k.backend == b) return &k;
    return nullptr;
}

const BackendProbe& probe_backend(Backend b) {
    // Each backend is probed once, on first use (probing io_uring sets up a ring). The done flags
    // are our own atomics rather than std::call_once, whose flag libc++ sets where ThreadSanitizer
    // cannot see it publish the probe.
    static std::array<BackendProbe, kBackends.size()> probes;
    static std::array<std::atomic<bool>, kBackends.size()> done{};
    static std::mutex probing;
    static const BackendProbe unknown = [] {
        BackendProbe out;
        out.error = make_error_code(errc::backend_unavailable);
        out.reason = "not a backend";
        return out;
    }();
    for (std::size_t i = 0; i < kBackends.size(); ++i) {
        const KnownBackend& k = kBackends[i];
        if (k.backend != b) continue;
        if (!done[i].load(std::memory_order_acquire)) {
            std::lock_guard lock(probing);
            if (!done[i].load(std::memory_order_relaxed)) {
                probes[i] = k.entry ? k.entry->probe() : left_out(k);
                done[i].store(true, std::memory_order_release);
            }
        }
        return probes[i];
    }
    return unknown;
}

} // namespace galay::detail

namespace galay {

std::span<const Backend> built_backends() noexcept {
    static const auto built = [] {
        std::array<Backend, detail::kBackends.size()> out{};
        std::size_t n = 0;
        for (const detail::KnownBackend& k : detail::kBackends)
            if (k.entry != nullptr) out[n++] = k.backend;
        return std::pair{out, n};
    }();
    return {built.first.data(), built.second};
}

} // namespace galay
