// A counting global operator new (malloc-backed): every heap allocation of the process bumps
// `galay::tools::g_allocations`. Replacing operator new affects the whole program, so include this
// from exactly one source file of a program (bench_sync, alloc_tests), and not under ASan or TSan,
// which own operator new.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <execinfo.h>
#include <new>
#include <string>

namespace galay::tools {
inline std::atomic<std::uint64_t> g_allocations{0};

// Where an unexpected allocation came from: a test that expects none arms the recording, and the
// next allocation (on any thread) keeps its call stack, which the test prints if it fails. A rare
// failure then says what allocated instead of only that something did.
inline std::atomic<bool> g_record_next{false};
inline void* g_recorded[48];
inline std::atomic<int> g_recorded_depth{0};

/// The allocation count now; the next allocation records its call stack.
inline std::uint64_t start_counting() {
    void* warm[2];
    (void)backtrace(warm, 2); // (its first call allocates: it loads the unwinder)
    g_recorded_depth.store(0);
    g_record_next.store(true);
    return g_allocations.load();
}
/// The allocation count now; recording stops.
inline std::uint64_t stop_counting() {
    const std::uint64_t n = g_allocations.load();
    g_record_next.store(false);
    return n;
}
/// The call stack of the first allocation after start_counting() (none: an empty string), one
/// frame a line as backtrace_symbols gives it (addr2line resolves the offsets).
inline std::string first_allocation_stack() {
    const int depth = g_recorded_depth.load();
    if (depth == 0) return {};
    std::string out = "first allocation:\n";
    if (char** names = backtrace_symbols(g_recorded, depth)) {
        for (int i = 0; i < depth; ++i)
            out.append("  ").append(names[i]).append("\n");
        std::free(names);
    }
    return out;
}
} // namespace galay::tools

// GCC sees std::free of what it takes for operator new's memory once both are inlined; here
// operator new is malloc.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
    galay::tools::g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (galay::tools::g_record_next.load(std::memory_order_relaxed) &&
        galay::tools::g_record_next.exchange(false))
        galay::tools::g_recorded_depth.store(backtrace(galay::tools::g_recorded, 48));
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
    return operator new(n);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
