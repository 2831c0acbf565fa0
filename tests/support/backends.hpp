// Every integration test runs on every backend: this fixture is parameterised over io_uring and
// epoll (those of them this build contains). A backend the kernel refuses is skipped with its
// reason, unless GALAY_REQUIRE_BACKENDS names it (CI sets it), in which case the test fails instead
// of skipping.
#pragma once

#include "support/profile.hpp"

#include <galay/galay.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace galay::test {

inline bool backend_required(Backend b) {
    const char* req = std::getenv("GALAY_REQUIRE_BACKENDS");
    return req != nullptr && std::string(req).find(backend_name(b)) != std::string::npos;
}

/// For a fixture's SetUp: skip the test (saying why) when the kernel refuses backend `b`, or
/// fail it when GALAY_REQUIRE_BACKENDS names `b`. (gtest runs no test body after a skip or a
/// fatal failure in SetUp, also when they happen in a function it calls.)
inline void skip_unless_usable(Backend b) {
    if (b == Backend::io_uring && !probe_io_uring().usable) {
        if (backend_required(Backend::io_uring))
            FAIL() << "io_uring is required here but unavailable: " << probe_io_uring().reason;
        GTEST_SKIP() << "SKIP: io_uring unavailable on this kernel: " << probe_io_uring().reason;
    }
}

class BackendTest : public ::testing::TestWithParam<Backend> {
protected:
    void SetUp() override { skip_unless_usable(GetParam()); }
    SchedulerOptions options() const { return {.backend = GetParam()}; }
    /// A Runtime of `workers` workers, each a scheduler on this backend.
    RuntimeOptions rt_options(unsigned workers) const {
        RuntimeOptions o;
        o.workers = workers;
        o.scheduler = options();
        return o;
    }
    template <class T>
    T run(Task<T> t) {
        Scheduler s(options());
        EXPECT_EQ(s.backend(), GetParam());
        return s.block_on(std::move(t));
    }
    /// As run(), on the paused clock (SchedulerOptions::paused_clock): for a test whose timeout
    /// or sleep is what it checks, so that it takes no real time. Only where every peer the test
    /// waits for runs in the same scheduler: time jumps whenever the scheduler is idle.
    template <class T>
    T run_paused(Task<T> t) {
        SchedulerOptions o = options();
        o.paused_clock = true;
        Scheduler s(o);
        return s.block_on(std::move(t));
    }
};

inline std::string backend_param_name(const ::testing::TestParamInfo<Backend>& info) {
    return backend_name(info.param);
}

} // namespace galay::test

/// ASSERT_* cannot be used inside a coroutine (it expands to `return;`): this records the failure
/// and throws, which ends the coroutine and fails the test through block_on.
#define CO_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ADD_FAILURE() << "CO_ASSERT(" #cond ") failed";                                        \
            throw std::runtime_error("CO_ASSERT(" #cond ") failed");                               \
        }                                                                                          \
    } while (0)

/// Every backend this build contains (galay::built_backends(): a backend left out by its CMake
/// option, GALAY_WITH_URING=OFF, is not instantiated at all).
#define GALAY_INSTANTIATE_BACKENDS(Suite)                                                          \
    INSTANTIATE_TEST_SUITE_P(                                                                      \
        Backends, Suite,                                                                           \
        ::testing::ValuesIn(::galay::built_backends().begin(), ::galay::built_backends().end()),   \
        ::galay::test::backend_param_name)
