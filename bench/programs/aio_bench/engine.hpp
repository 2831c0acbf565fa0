// The engine interface.
//
// An engine owns one kernel submission context (a libaio io_context or an io_uring ring) and is
// used by exactly one thread. The benchmark loop (bench.cpp) is a template over the engine type, so
// the per-I/O calls (prep) are inlined and only one call per batch crosses into engine code:
//
//   std::expected<void, std::string> init(const EngineSetup&);   // once, in the worker thread
//   void prep(uint32_t slot, bool write, void* buf, uint32_t len, uint64_t offset);  // no syscall
//       (`buf` is the slot's buffer from EngineSetup)
//   int submit_and_reap(unsigned min, Completion* out, unsigned max);
//       submits everything prepped since the last call (one batch), then returns between `min`
//       and `max` completions (fewer than `min` only if fewer are in flight). A negative value is
//       a fatal engine error (-errno). An I/O that the kernel refuses at submission time comes back
//       as a completion with a negative res, exactly like one that fails later.
//   unsigned in_flight() const;   // submitted (or failed at submission) and not yet returned
//
// Polling (-P) changes only how submit_and_reap waits; see the engines.
#pragma once

#include "config.hpp"

#include <concepts>
#include <cstdint>
#include <expected>
#include <string>

namespace aiob {

struct Completion {
    uint32_t slot;
    int32_t res; // bytes transferred, or -errno
};

struct EngineSetup {
    int fd = -1;
    unsigned depth = 1;
    PollMode poll = PollMode::none;
    std::string path; // for messages
    // The I/O buffers: slot i uses [bufs + i * stride, + block size). Allocated before the engine
    // and freed after it, so an engine may register them (io_uring --fixedbufs).
    unsigned char* bufs = nullptr;
    size_t stride = 0;
    bool fixed_bufs = false;     // io_uring: registered buffers, READ_FIXED/WRITE_FIXED
    bool register_files = false; // io_uring: registered file, IOSQE_FIXED_FILE
};

template <class E>
concept Engine = requires(E e, const E ce, const EngineSetup& s, Completion* out, void* buf) {
    { e.init(s) } -> std::same_as<std::expected<void, std::string>>;
    e.prep(uint32_t{}, bool{}, buf, uint32_t{}, uint64_t{});
    { e.submit_and_reap(1u, out, 1u) } -> std::same_as<int>;
    { ce.in_flight() } -> std::same_as<unsigned>;
};

} // namespace aiob
