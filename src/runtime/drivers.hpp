// Factory functions for the drivers (the only code that includes kernel interface headers lives
// in src/driver/).
#pragma once

#include "galay/runtime.hpp"

#include <memory>

namespace galay::detail {

/// Throws galay::Error with a clear message when the ring cannot be created.
std::unique_ptr<Driver> make_uring_driver(Scheduler& s, const SchedulerOptions& options);
std::unique_ptr<Driver> make_epoll_driver(Scheduler& s, const SchedulerOptions& options);

/// Run the io_uring probe (ring set-up and opcode check) without caching.
UringProbe run_uring_probe();

} // namespace galay::detail
