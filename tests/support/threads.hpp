// Tests across threads: each task runs to completion on a thread of its own, with a scheduler of
// its own (the fixture's backend), as two workers of a multi-threaded runtime would.
#pragma once

#include <galay/galay.hpp>

#include <chrono>
#include <exception>
#include <thread>
#include <vector>

namespace galay::test {

/// Run every task on its own thread and scheduler; returns when all have finished. Rethrows the
/// first exception.
inline void run_on_threads(SchedulerOptions options, std::vector<Task<void>> tasks) {
    std::vector<std::exception_ptr> errors(tasks.size());
    std::vector<std::thread> threads;
    threads.reserve(tasks.size());
    for (std::size_t i = 0; i < tasks.size(); ++i)
        threads.emplace_back([&, i] {
            try {
                Scheduler s(options);
                s.block_on(std::move(tasks[i]));
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    for (auto& t : threads)
        t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

template <class... Ts>
void run_on_threads(SchedulerOptions options, Task<void> first, Ts... rest) {
    std::vector<Task<void>> tasks;
    tasks.push_back(std::move(first));
    (tasks.push_back(std::move(rest)), ...);
    run_on_threads(options, std::move(tasks));
}

/// Deadlines for tests where a wake-up races the deadline, varied by attempt: 0 (due at once),
/// then 10 to 50 us, about the cost of a cross-thread wake-up.
inline std::chrono::microseconds racing_timeout(unsigned& attempt) {
    return std::chrono::microseconds(attempt++ % 6 * 10);
}

/// Spin (yielding the CPU) until `cond()` holds: a handshake on observable state, not a sleep.
template <class F>
void spin_until(F&& cond) {
    while (!cond())
        std::this_thread::yield();
}

/// The same from a task: yields to its scheduler until `cond()` holds.
template <class F>
Task<void> yield_until(F cond) {
    while (!cond())
        co_await yield_now();
}

} // namespace galay::test
