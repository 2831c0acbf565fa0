// The driver registry: the backends this build contains, in the order Backend::automatic tries
// them (the only code that includes kernel interface headers lives in src/driver/). A backend is
// a folder under src/driver/ that defines one DriverEntry (its Backend value, name, probe and
// factory); src/runtime/registry.cpp lists it in `kBackends` with the CMake option that builds it.
#pragma once

#include "driver/driver.hpp"
#include "galay/runtime.hpp"

#include <memory>
#include <span>

namespace galay::detail {

/// Can a backend run here, and if not, why (the public UringProbe has this shape for every
/// backend).
using BackendProbe = UringProbe;

struct DriverEntry {
    Backend backend;
    /// Run the backend's probe (set-up and feature check) without caching; the registry caches.
    BackendProbe (*probe)();
    /// Create the driver. Throws galay::Error with a clear message when it cannot.
    std::unique_ptr<Driver> (*make)(Scheduler& s, const SchedulerOptions& options);
};

/// A backend galay knows of, whether this build contains it or not.
struct KnownBackend {
    Backend backend;
    /// The option that builds it ("GALAY_WITH_URING"); null: always, on the systems that have it.
    const char* cmake_option;
    const DriverEntry* entry; ///< null when this build leaves it out
};

/// Every known backend, in the order Backend::automatic tries them.
std::span<const KnownBackend> known_backends() noexcept;
/// The entry of `b` (not automatic), or null when this build leaves it out.
const KnownBackend* find_backend(Backend b) noexcept;
/// `b`'s probe, run once per process. A backend left out of the build is unusable, with
/// errc::backend_unavailable and a reason naming its CMake option.
const BackendProbe& probe_backend(Backend b);

/// The io_uring probe (ring set-up and opcode check), uncached: uring_driver_entry's probe.
UringProbe run_uring_probe();

// The entries, one per folder under src/driver/ (defined next to each driver's class).
extern const DriverEntry uring_driver_entry;
/// The readiness driver (src/driver/epoll/) on this system's poller: Backend::epoll on Linux,
/// Backend::kqueue on macOS and FreeBSD (driver/poller/poller.hpp).
extern const DriverEntry readiness_driver_entry;

} // namespace galay::detail
