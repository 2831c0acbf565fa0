// The counters one Scheduler keeps about itself (SchedulerCore::counters_; what
// metrics::snapshot reads and galay/metrics.hpp's WorkerMetrics reports).
//
// Every counter has one writer, the scheduler's own thread, so an increment is a relaxed load and
// a relaxed store (no locked instruction), and any thread may read it at any time. Built with
// GALAY_METRICS=0 (the CMake option GALAY_METRICS=OFF) every update compiles to nothing.
#pragma once

#include "galay/detail/io_op.hpp"
#include "galay/metrics.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#ifndef GALAY_METRICS
#define GALAY_METRICS 1
#endif

namespace galay::detail {

/// How many OpCode values there are (the per-kind arrays' size).
inline constexpr std::size_t kOpKinds = op_kind_count;
/// Buckets of the completions-per-turn histogram (metrics::turn_buckets).
inline constexpr std::size_t kTurnBuckets = metrics::turn_buckets;
/// Buckets of the turn-length histogram (metrics::turn_length_buckets).
inline constexpr std::size_t kTurnLengthBuckets = metrics::turn_length_buckets;

/// A counter with one writing thread and any number of reading ones.
class Counter {
public:
    void add(std::uint64_t n = 1) noexcept {
        if constexpr (GALAY_METRICS)
            v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    void set(std::uint64_t n) noexcept {
        if constexpr (GALAY_METRICS) v_.store(n, std::memory_order_relaxed);
    }
    std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::uint64_t> v_{0};
};

/// The largest value noted since the last take(): one writing thread, any number of takers. A
/// value noted while a take() runs counts in the next period, never in none.
class Peak {
public:
    void note(std::uint64_t n) noexcept {
        if constexpr (GALAY_METRICS)
            if (n > v_.load(std::memory_order_relaxed)) v_.store(n, std::memory_order_relaxed);
    }
    std::uint64_t take() const noexcept { return v_.exchange(0, std::memory_order_relaxed); }

private:
    mutable std::atomic<std::uint64_t> v_{0};
};

/// The counters of one scheduler (see the top of this file).
struct WorkerCounters {
    Counter tasks_spawned;  // adopted by this scheduler
    Counter tasks_finished; // finished or destroyed at shutdown
    Counter loop_turns;     // polls of the driver (counted when they return)
    Counter busy_ns;        // in the run loop, outside a blocking wait in the kernel
    Counter parked_ns;      // in a blocking wait in the kernel
    Counter ready_depth;    // gauge: ready coroutines when the last turn began
    Counter timers_armed;   // gauge: armed timers when the last turn began
    Counter remote_wakeups; // times work posted from another thread was picked up
    Counter remote_items;   // coroutines and calls posted from other threads
    Counter pool_in_use;    // gauge: pooled receive buffers not free, at the last turn
    Counter enobufs;        // pooled receives that found no free buffer
    Counter stalls;         // turns or resumes over the stall threshold
    Counter spins_started;  // idle spins begun (what a test waits on to post during one)
    Counter spins_found;    // idle spins that ended with work to do (no sleep)
    Counter spins_slept;    // idle spins that found nothing and ended in a sleep
    Counter spin_ns;        // time spent in idle spins
    Counter conns_refused;  // connections galay::serve refused (ServeOptions::max_connections)
    std::array<Counter, kOpKinds> ops_started;
    std::array<Counter, kOpKinds> ops_completed;
    std::array<Counter, kOpKinds> ops_failed;           // completed with an error
    std::array<Counter, kOpKinds> bytes;                // transferred by the completed ops
    std::array<Counter, kTurnBuckets> turn_completions; // histogram, one count per turn
    Counter turn_completions_sum;
    std::uint64_t completions_this_turn = 0; // (the scheduler's thread only)
    // Loop turn lengths (from the clock the loop reads anyway at each poll of the driver)
    std::array<Counter, kTurnLengthBuckets> turn_lengths; // histogram
    Counter turn_length_sum_ns;
    Peak longest_turn_ns; // since the last metrics snapshot

    /// The scheduler's thread: `op` was handed to the driver.
    void op_started(const IoOp& op) noexcept { ops_started[index(op.code)].add(); }
    /// The scheduler's thread: `op` completed with `op.result`.
    void op_completed(const IoOp& op) noexcept {
        if constexpr (GALAY_METRICS) {
            const std::size_t k = index(op.code);
            ops_completed[k].add();
            if (op.result < 0)
                ops_failed[k].add();
            else if (transfers_bytes(op.code))
                bytes[k].add(static_cast<std::uint64_t>(op.result));
            ++completions_this_turn;
        }
    }
    /// The scheduler's thread: a turn ended; file its completions in the histogram.
    void turn_ended() noexcept {
        if constexpr (GALAY_METRICS) {
            std::size_t b = 0;
            for (std::uint64_t n = completions_this_turn; n != 0 && b + 1 < kTurnBuckets; n >>= 1)
                ++b;
            turn_completions[b].add();
            turn_completions_sum.add(completions_this_turn);
            completions_this_turn = 0;
            loop_turns.add();
        }
    }

    /// The scheduler's thread: a loop turn of `ns` ended (bucket b > 0: 2^(b-1) to 2^b - 1 us).
    void turn_took(std::int64_t ns) noexcept {
        if constexpr (GALAY_METRICS) {
            const auto n = static_cast<std::uint64_t>(ns > 0 ? ns : 0);
            const std::size_t b =
                std::min<std::size_t>(std::bit_width(n / 1000), kTurnLengthBuckets - 1);
            turn_lengths[b].add();
            turn_length_sum_ns.add(n);
            longest_turn_ns.note(n);
        }
    }

    static constexpr std::size_t index(OpCode c) noexcept { return static_cast<std::size_t>(c); }
    static constexpr bool transfers_bytes(OpCode c) noexcept {
        switch (c) {
        case OpCode::recv:
        case OpCode::recv_pooled:
        case OpCode::send:
        case OpCode::recvmsg:
        case OpCode::sendmsg:
        case OpCode::read_at:
        case OpCode::write_at:
        case OpCode::readv_at:
        case OpCode::writev_at:
            return true;
        default:
            return false;
        }
    }
};

} // namespace galay::detail
