// Naming the calling thread and pinning it to a CPU, in each system's form: Linux's
// sched_getaffinity/pthread_setaffinity_np, FreeBSD's cpuset_t through <pthread_np.h>, and on
// macOS, which has no thread affinity, none (galay/detail/platform.hpp decides).
#pragma once

#include "galay/detail/platform.hpp"

#include <pthread.h>
#include <sched.h>
#if defined(__FreeBSD__)
#include <pthread_np.h>
#endif

#include <vector>

namespace galay::platform {

/// Names the calling thread (shown by top, ps and debuggers; at most 15 characters on Linux).
inline void set_thread_name(const char* name) noexcept {
#if defined(__APPLE__)
    ::pthread_setname_np(name); // macOS names only the calling thread
#else
    ::pthread_setname_np(::pthread_self(), name);
#endif
}

#if GALAY_HAVE_CPU_AFFINITY
#if defined(__FreeBSD__)
using CpuSet = cpuset_t;
#else
using CpuSet = cpu_set_t;
#endif

/// The CPUs this process may run on, in increasing order (empty if the system does not say).
inline std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
    CpuSet set;
    CPU_ZERO(&set);
#if defined(__FreeBSD__)
    const int r = ::pthread_getaffinity_np(::pthread_self(), sizeof set, &set);
#else
    const int r = ::sched_getaffinity(0, sizeof set, &set);
#endif
    if (r == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

/// Pins the calling thread to `cpu` (best effort, as the scheduler may refuse).
inline void pin_thread(int cpu) noexcept {
    CpuSet set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
}
#endif // (none on macOS: Runtime refuses pin_workers there)

} // namespace galay::platform
