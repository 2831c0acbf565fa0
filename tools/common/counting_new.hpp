// A counting global operator new (malloc-backed): every heap allocation of the process bumps
// `galay::tools::g_allocations`. Replacing operator new affects the whole program, so include this
// from exactly one source file of a program (bench_sync, alloc_tests), and not under ASan or TSan,
// which own operator new.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace galay::tools {
inline std::atomic<std::uint64_t> g_allocations{0};
} // namespace galay::tools

// GCC sees std::free of what it takes for operator new's memory once both are inlined; here
// operator new is malloc.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
    galay::tools::g_allocations.fetch_add(1, std::memory_order_relaxed);
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
