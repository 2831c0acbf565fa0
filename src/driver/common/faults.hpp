// The drivers' side of fault injection (the plan and its knobs: fault_plan.hpp).
//
// Every injection point starts with `if (faults::on()) [[unlikely]]`: one relaxed load and a
// branch that is never taken when no plan is installed. Built only with the CMake option
// GALAY_FAULT_INJECTION (the test presets); without it on() is constant false, so the injection
// points compile away and no environment variable can change what the library does.
#pragma once

#include "driver/common/fault_plan.hpp"
#include "galay/detail/io_op.hpp"

#ifndef GALAY_FAULT_INJECTION
#define GALAY_FAULT_INJECTION 0
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace galay::detail::faults {

extern std::atomic<bool> g_on;

/// Whether a plan is installed.
inline bool on() noexcept {
#if GALAY_FAULT_INJECTION
    return g_on.load(std::memory_order_relaxed);
#else
    return false;
#endif
}

enum class Kind : std::uint8_t {
    interrupted,
    would_block,
    short_transfer,
    fail,
    canceled,
    late,
    end_multishot,
    starve_ring,
};

/// One draw for an attempt of an op with `code`: true (and counted) when the plan injects a
/// fault of `kind` there. Thread-safe.
bool hit(Kind kind, OpCode code) noexcept;

/// The errno of the first of interrupted (EINTR), would_block (EAGAIN) and fail (the plan's
/// error) that hits this attempt, or 0.
int refusal(OpCode code) noexcept;

/// The plan's error (the errno of `fail`).
int refusal_error() noexcept;

/// How much of `len` (> 1) a short transfer moves: in [1, len).
std::uint32_t shorter(std::uint32_t len) noexcept;

/// The io_uring buffer ring was found empty (ENOBUFS): counted while a plan is installed.
void ring_empty() noexcept;

/// Reads GALAY_FAULTS once per process (the first scheduler calls it); nothing in a build without
/// GALAY_FAULT_INJECTION.
void install_from_environment() noexcept;

} // namespace galay::detail::faults
