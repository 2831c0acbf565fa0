// galay/time/timeout.hpp: what `.timeout(...)` takes: a duration, an optional one, or none.
//
//     std::optional<std::chrono::seconds> idle = config.idle_timeout; // empty: wait forever
//     auto n = co_await conn.recv(buf).timeout(idle);                 // one co_await either way
//     auto m = co_await conn.recv(buf).timeout(galay::no_timeout);    // the same as no .timeout()
//     auto k = co_await conn.recv(buf).timeout(2s);                   // as always
//
// Every operation's `.timeout()` (I/O, the sync waits, JoinHandle, invoke_on, the buffered
// reads and writes, `galay::timeout(d, task)`) takes a `Timeout`, which converts from any
// `std::chrono::duration` that converts to nanoseconds without loss, from a `std::optional` of
// one, and from `std::nullopt` / `galay::no_timeout`. An empty one arms nothing: the operation
// runs exactly as if `.timeout()` had not been called (no timer, no cost), so a program whose
// timeout is a setting writes the `co_await` once.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>

namespace galay {

/// A relative time limit for one operation, or none (see the top of this header).
class Timeout {
public:
    /// A limit of `d` (a non-positive one expires at once, as `.timeout(0s)` always has).
    template <class Rep, class Period>
        requires std::convertible_to<std::chrono::duration<Rep, Period>, std::chrono::nanoseconds>
    constexpr Timeout(std::chrono::duration<Rep, Period> d) noexcept
        : ns_(std::chrono::nanoseconds(d).count()) {}
    /// The limit in `d`, or none when `d` is empty.
    template <class Rep, class Period>
        requires std::convertible_to<std::chrono::duration<Rep, Period>, std::chrono::nanoseconds>
    constexpr Timeout(const std::optional<std::chrono::duration<Rep, Period>>& d) noexcept
        : ns_(d ? std::chrono::nanoseconds(*d).count() : kNone) {}
    /// No limit.
    constexpr Timeout(std::nullopt_t) noexcept
        : ns_(kNone) {}

    /// True when there is a limit.
    constexpr bool has_value() const noexcept { return ns_ != kNone; }
    /// True when there is a limit.
    constexpr explicit operator bool() const noexcept { return has_value(); }
    /// The limit (only when has_value()).
    constexpr std::chrono::nanoseconds value() const noexcept {
        return std::chrono::nanoseconds(ns_);
    }

private:
    // (A limit of nanoseconds::min() cannot be meant: it would overflow any deadline.)
    static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
    std::int64_t ns_;
};

/// No time limit: `.timeout(galay::no_timeout)` is the operation without `.timeout()`.
inline constexpr Timeout no_timeout{std::nullopt};

} // namespace galay
