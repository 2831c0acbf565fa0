// How every tool prints numbers, byte counts, rates and durations: one place, so that a figure
// reads the same in every report. Header-only and free of galay and CLI11: aio_bench and the
// hand-written baselines (bench/baselines) include it too.
//
// Two byte formatters on purpose: `human_bytes` ("1.5 KiB", "100 bytes") is what the tools' error
// messages say; aio_bench's report header prints sizes as fio does, `human_bytes_compact`
// ("1.5 KiB", "256 MiB", "100 B"). Each tool keeps the one it printed before.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace galay::tools {

/// 1234567 -> "1,234,567".
inline std::string with_commas(std::uint64_t v) {
    // (Built forward: GCC 12 warns, wrongly, about the std::string::insert this was written with.)
    const std::string digits = std::to_string(v);
    std::string s;
    s.reserve(digits.size() + digits.size() / 3);
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
        s.push_back(digits[i]);
    }
    return s;
}

/// 34977.264 -> "34,977.26": with_commas and two decimals (v >= 0).
inline std::string with_commas_2dp(double v) {
    const auto whole = static_cast<std::uint64_t>(v);
    const auto cents = static_cast<unsigned>(std::llround((v - double(whole)) * 100.0));
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%02u", cents == 100 ? 0u : cents);
    return with_commas(cents == 100 ? whole + 1 : whole) + frac;
}

/// printf's "%.*f": fixed(3.14159, 2) -> "3.14".
inline std::string fixed(double v, int decimals) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
    return b;
}

/// printf's "%g": 0.1 -> "0.1", 86400 -> "86400", 1e-10 -> "1e-10".
inline std::string general(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

/// 1536 -> "1.5 KiB", 3 << 30 -> "3.0 GiB", 100 -> "100 bytes" (one decimal, up to EiB).
inline std::string human_bytes(std::uint64_t bytes) {
    static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = double(bytes);
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        ++u;
    }
    char buf[48];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
    else
        std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

/// 1536 -> "1.5 KiB", 256 << 20 -> "256 MiB", 100 -> "100 B" (four significant digits, up to
/// TiB): aio_bench's sizes.
inline std::string human_bytes_compact(std::uint64_t bytes) {
    const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 4)
        v /= 1024, ++u;
    char b[32];
    std::snprintf(b, sizeof b, u ? "%.4g %s" : "%.0f %s", v, unit[u]);
    return b;
}

/// Bytes in MiB (2^20 bytes; the tools' "MB" is this too).
inline double mib(double bytes) {
    return bytes / (1024.0 * 1024.0);
}

/// `count` per second over `seconds`; 0 when no time passed.
inline double per_second(double count, double seconds) {
    return seconds > 0 ? count / seconds : 0.0;
}

/// A steady-clock (or any) duration in seconds.
template <class Rep, class Period>
double seconds_of(std::chrono::duration<Rep, Period> d) {
    return std::chrono::duration<double>(d).count();
}

/// 1140900 -> "1.1409 ms": five significant digits in the largest unit (ns, µs, ms, s) below
/// the value.
inline std::string human_time_ns(double ns) {
    const char* unit = "ns";
    double v = ns;
    if (ns >= 1e9) {
        v = ns / 1e9, unit = "s";
    } else if (ns >= 1e6) {
        v = ns / 1e6, unit = "ms";
    } else if (ns >= 1e3) {
        v = ns / 1e3, unit = "µs";
    }
    const int decimals = v > 0 ? std::max(0, 4 - static_cast<int>(std::floor(std::log10(v)))) : 0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, unit);
    return buf;
}

/// `s` padded with spaces to `width` characters (UTF-8: "µ" is two bytes but one character).
inline std::string pad_right(std::string s, std::size_t width) {
    std::size_t chars = 0;
    for (unsigned char c : s)
        chars += (c & 0xC0) != 0x80;
    if (chars < width) s.append(width - chars, ' ');
    return s;
}

} // namespace galay::tools
