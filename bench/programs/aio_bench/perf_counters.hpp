// -M: CPU counters for the calling thread through perf_event_open(pid = 0, cpu = -1).
//
// Each worker thread opens its own counters (no inherit), so they count exactly the benchmark
// threads, user and kernel mode (kernel mode is dropped, and said so, if perf_event_paranoid
// forbids it). io_uring's kernel helper threads (io-wq workers, the SQPOLL thread) are not
// benchmark threads; the process-wide CPU time from getrusage(RUSAGE_SELF), reported next to the
// counters, includes them. Every counter is opened separately, so one that cannot be opened (no
// PMU in a VM: ENOENT/EOPNOTSUPP) is reported as unavailable with its errno while the others count.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace aiob {

enum Counter : unsigned {
    kInstructions,
    kCycles,
    kBranches,
    kBranchMisses,
    kTaskClock,       // ns on CPU
    kContextSwitches, // voluntary + involuntary
    kNumCounters
};

std::string_view counter_name(unsigned c);

struct CounterValues {
    std::array<std::optional<uint64_t>, kNumCounters> value{};
    std::array<std::string, kNumCounters> error{}; // why a counter is not available
    bool kernel_counted = true;                    // false if exclude_kernel had to be set

    void merge(const CounterValues& o); // sum; a counter missing in either is missing
};

class ThreadCounters {
public:
    ThreadCounters() = default;
    ThreadCounters(const ThreadCounters&) = delete;
    ThreadCounters& operator=(const ThreadCounters&) = delete;
    ~ThreadCounters();

    void open();   // for the calling thread, disabled
    void enable(); // start counting
    void disable();
    CounterValues read() const; // scaled by time_enabled/time_running if multiplexed

private:
    std::array<int, kNumCounters> fd_{-1, -1, -1, -1, -1, -1};
    std::array<std::string, kNumCounters> error_{};
    bool kernel_ = true;
};

} // namespace aiob
