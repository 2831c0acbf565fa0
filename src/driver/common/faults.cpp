#include "driver/common/faults.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

namespace galay::detail::faults {

std::atomic<bool> g_on{false};

namespace {

Plan g_plan; // written by install() only while no operation is in flight (see the header)
std::atomic<std::uint64_t> g_draws{0};
std::atomic<std::uint64_t> g_counts[9];

std::uint64_t mix(std::uint64_t x) noexcept { // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/// The next number of the plan's sequence (every thread draws from the same one).
std::uint64_t draw() noexcept {
    const std::uint64_t n = g_draws.fetch_add(1, std::memory_order_relaxed);
    return mix(g_plan.seed * 0x9E3779B97F4A7C15ull + n);
}

double probability(Kind k) noexcept {
    switch (k) {
    case Kind::interrupted:
        return g_plan.interrupted;
    case Kind::would_block:
        return g_plan.would_block;
    case Kind::short_transfer:
        return g_plan.short_transfer;
    case Kind::fail:
        return g_plan.fail;
    case Kind::canceled:
        return g_plan.canceled;
    case Kind::late:
        return g_plan.late;
    case Kind::end_multishot:
        return g_plan.end_multishot;
    case Kind::starve_ring:
        return g_plan.starve_ring;
    }
    return 0;
}

int errno_named(std::string_view name) noexcept {
    struct Named {
        const char* name;
        int value;
    };
    static constexpr Named names[] = {
        {"ECONNRESET", ECONNRESET}, {"ENOBUFS", ENOBUFS}, {"ENOMEM", ENOMEM},
        {"EPIPE", EPIPE},           {"EIO", EIO},         {"ECONNABORTED", ECONNABORTED},
        {"ETIMEDOUT", ETIMEDOUT},   {"ENOSPC", ENOSPC},   {"EHOSTUNREACH", EHOSTUNREACH},
    };
    for (const Named& n : names)
        if (name == n.name) return n.value;
    return std::atoi(std::string(name).c_str());
}

} // namespace

void install(const Plan& plan) noexcept {
    if constexpr (!GALAY_FAULT_INJECTION) {
        // A test that asks for faults must not pass because none were injected.
        std::fputs("galay: faults::install in a build without fault injection (configure with "
                   "-DGALAY_FAULT_INJECTION=ON)\n",
                   stderr);
        std::abort();
    }
    g_on.store(false, std::memory_order_relaxed);
    g_plan = plan;
    g_draws.store(0, std::memory_order_relaxed);
    for (auto& c : g_counts)
        c.store(0, std::memory_order_relaxed);
    g_on.store(true, std::memory_order_release);
}

void remove() noexcept {
    g_on.store(false, std::memory_order_release);
}

Counts counts() noexcept {
    auto at = [](Kind k) { return g_counts[static_cast<int>(k)].load(std::memory_order_relaxed); };
    return {.interrupted = at(Kind::interrupted),
            .would_block = at(Kind::would_block),
            .short_transfer = at(Kind::short_transfer),
            .fail = at(Kind::fail),
            .canceled = at(Kind::canceled),
            .late = at(Kind::late),
            .end_multishot = at(Kind::end_multishot),
            .starve_ring = at(Kind::starve_ring),
            .ring_empty = g_counts[8].load(std::memory_order_relaxed)};
}

bool hit(Kind kind, OpCode code) noexcept {
    if (!g_on.load(std::memory_order_acquire)) return false;
    if ((g_plan.ops & (1u << static_cast<unsigned>(code))) == 0) return false;
    const double p = probability(kind);
    if (p <= 0) return false;
    if (static_cast<double>(draw() >> 11) * 0x1.0p-53 >= p) return false;
    g_counts[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
    return true;
}

int refusal(OpCode code) noexcept {
    if (hit(Kind::interrupted, code)) return EINTR;
    if (hit(Kind::would_block, code)) return EAGAIN;
    if (hit(Kind::fail, code)) return g_plan.error;
    return 0;
}

int refusal_error() noexcept {
    return g_plan.error;
}

std::uint32_t shorter(std::uint32_t len) noexcept {
    return len <= 1 ? len : 1 + static_cast<std::uint32_t>(draw() % (len - 1));
}

void ring_empty() noexcept {
    if (on()) g_counts[8].fetch_add(1, std::memory_order_relaxed);
}

void install_from_environment() noexcept {
    if constexpr (!GALAY_FAULT_INJECTION) return;
    static std::once_flag once;
    std::call_once(once, [] {
        const char* env = std::getenv("GALAY_FAULTS");
        if (env == nullptr || *env == '\0') return;
        Plan p;
        std::string_view rest(env);
        while (!rest.empty()) {
            std::string_view item = rest.substr(0, rest.find(','));
            rest.remove_prefix(std::min(rest.size(), item.size() + 1));
            const auto eq = item.find('=');
            if (eq == std::string_view::npos) continue;
            const std::string_view key = item.substr(0, eq);
            const std::string value(item.substr(eq + 1));
            const double v = std::atof(value.c_str());
            if (key == "seed")
                p.seed = std::strtoull(value.c_str(), nullptr, 0);
            else if (key == "interrupted")
                p.interrupted = v;
            else if (key == "would_block")
                p.would_block = v;
            else if (key == "short")
                p.short_transfer = v;
            else if (key == "fail")
                p.fail = v;
            else if (key == "error")
                p.error = errno_named(value);
            else if (key == "canceled")
                p.canceled = v;
            else if (key == "late")
                p.late = v;
            else if (key == "end_multishot")
                p.end_multishot = v;
            else if (key == "starve_ring")
                p.starve_ring = v;
            else
                std::fprintf(stderr, "galay: GALAY_FAULTS: unknown knob '%.*s' ignored\n",
                             static_cast<int>(key.size()), key.data());
        }
        std::fprintf(stderr, "galay: fault injection on (GALAY_FAULTS=%s)\n", env);
        install(p);
    });
}

} // namespace galay::detail::faults
