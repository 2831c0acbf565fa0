// galay/task_dump.hpp: which tasks exist right now, and what each one is waiting for.
//
//     galay::TaskDump d = galay::task_dump(rt);          // any thread (not a worker's: see below)
//     std::fputs(d.text().c_str(), stderr);               // or d.json()
//     galay::TaskDump e = co_await galay::task_dump_async(rt); // from a task
//     co_await galay::set_task_name("conn " + peer);      // a task names itself
//
// For every spawned task alive: its id, its name, its worker, its state (ready to run, or
// waiting), how long it has waited, what it waits on (a kernel operation with its fd, length and
// deadline; a sleep; a Mutex and the task that holds it; a Channel; an Event; a JoinHandle and the
// task it waits for; a when_all or when_any and its children not finished, each with its own
// async backtrace), and its async backtrace: the chain of coroutine frames from the one that
// waits up to the spawned task, named by their functions. Tasks waiting on Mutexes held by each
// other are named as a deadlock.
//
// The bookkeeping is always on and costs no lock and no atomic read-modify-write: a task's leaf
// operations are already linked into its cancel scope (that is how cancellation reaches them), an
// awaited galay task is linked from its awaiter's promise, and a leaf notes when it began to wait
// from the clock its worker reads once per loop turn. Everything else is done at dump time:
// `task_dump` posts a request to each worker (its existing wake-up); each worker copies its own
// tasks at its next loop turn, never another thread; the caller formats. A worker that does not
// answer within `TaskDumpOptions::answer_within` (stuck in user code) is reported as stuck, with
// how long it has gone without a loop turn and the stall detector's count, and the dump returns.
//
// Function names come from each module's ELF symbol table (read once, at the first dump; a
// coroutine's resume function is a local symbol, which dladdr alone cannot name), demangled; a
// frame of a stripped module shows its module and offset instead, for `addr2line -f -C -e`. No
// file:line: that would take a DWARF reader (addr2line gives it from the module and offset, see
// TaskFrame::where). A synchronous dump called on a worker thread
// would wait for its own worker, so there it takes its own worker's tasks at once and waits for
// the others; inside a task use `task_dump_async`, which waits on the blocking pool instead.
#pragma once

#include "galay/task.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace galay {

class Runtime;
class Scheduler;

/// Where a task is in its life, as a dump sees it.
enum class TaskState : std::uint8_t {
    ready,   ///< queued to run at the worker's next turn (or never started yet)
    waiting, ///< suspended on something (its `waits`; none listed: an awaitable galay cannot name)
};

/// One coroutine frame of an async backtrace. Its names are kept for the process's life (one
/// copy per function, however many dumps and tasks show it).
struct TaskFrame {
    const void* address = nullptr; ///< the frame's resume function
    std::string_view function;     ///< demangled, or "module+0xoffset" when it has no symbol
    std::string_view where;        ///< "module+0xoffset" (for addr2line: file and line)
};

/// A child of a when_all / when_any not finished at the dump.
struct TaskChild {
    std::size_t index = 0;            ///< its position among the tasks passed in
    std::vector<TaskFrame> backtrace; ///< leaf first, the task passed in (its function) last
};

/// One thing a waiting task waits on.
struct TaskWait {
    /// "recv", "send", "accept", ... (kernel ops), "sleep", "mutex", "event", "channel recv",
    /// "channel send", "join", "when all", "when any" (then `children` and `pending`; the
    /// children's own waits follow as waits of the task), "remote wait", "wait" (another
    /// WaitList), or "other" (a static string).
    std::string_view what;
    int fd = -1;             ///< kernel ops: the fd (-1: none)
    std::uint64_t bytes = 0; ///< kernel ops: the length asked for
    /// Time left to the deadline at the dump (negative: overdue); empty: no deadline.
    std::optional<std::chrono::nanoseconds> deadline_in;
    std::chrono::nanoseconds waited{0}; ///< since the wait began (to the worker's last turn)
    const void* object = nullptr;       ///< the Mutex, Channel or Event waited on
    std::string object_name;            ///< its name (Mutex("name")), if it has one
    std::uint64_t holder = 0;           ///< mutex: the task that holds it (0: unknown or none)
    std::uint64_t target = 0;           ///< join: the task waited for
    int target_worker = -1;             ///< join: that task's worker (-1: not in a Runtime)
    std::size_t children = 0;           ///< when all / when any: how many tasks it joins
    std::vector<TaskChild> pending;     ///< when all / when any: those not finished yet
};

/// One live task.
struct TaskInfo {
    std::uint64_t id = 0;                 ///< unique in the process (format_task_id prints it)
    std::string name;                     ///< set_task_name(), or empty
    int worker = -1;                      ///< its worker in a Runtime (-1: a lone Scheduler)
    TaskState state = TaskState::ready;   ///< ready to run, or waiting
    std::chrono::nanoseconds in_state{0}; ///< waiting: since its oldest wait began; ready: 0
    std::string_view spawned_at;          ///< "file:line (function)" (kept for the process's life)
    std::vector<TaskWait> waits;          ///< what it waits on (empty when ready)
    std::vector<TaskFrame> backtrace;     ///< leaf first, the spawned task's own function last
};

/// One worker as the dump found it.
struct WorkerDumpInfo {
    int worker = -1;                        ///< its index in the Runtime (-1: a lone Scheduler)
    std::string backend;                    ///< "io_uring", "epoll" or "kqueue"
    bool answered = false;                  ///< false: it did not take its snapshot in time (stuck)
    std::size_t tasks = 0;                  ///< tasks it reported (answered only)
    std::uint64_t stalls = 0;               ///< the stall detector's count so far
    std::chrono::nanoseconds since_turn{0}; ///< since its last loop turn (stuck workers)
    std::chrono::nanoseconds pause{0};      ///< how long its snapshot held its loop (wall)
    /// The CPU time its thread spent in that longest chunk: far below `pause` when the
    /// chunk lost its CPU to another thread rather than took that long.
    std::chrono::nanoseconds pause_cpu{0};
    std::chrono::nanoseconds snapshot_cpu{0}; ///< CPU time of all its chunks together
    std::size_t chunks = 0;                   ///< loop turns its snapshot took
};

/// What task_dump returns.
struct TaskDump {
    std::vector<WorkerDumpInfo> workers; ///< every worker asked, answered or stuck
    std::vector<TaskInfo> tasks;         ///< by worker, then in spawn order
    /// Cycles of tasks each waiting on a Mutex the next one holds (ids, in wait order).
    std::vector<std::vector<std::uint64_t>> deadlocks;
    std::chrono::nanoseconds took{0}; ///< from the request to the last worker's answer
    /// text() and json() run on a low-priority thread (TaskDumpOptions::low_priority).
    bool low_priority = true;

    /// The task with `id`, or null.
    const TaskInfo* find(std::uint64_t id) const noexcept;
    /// A report for people: a line per task (and one per wait); a spawn site and async backtrace
    /// shared by several tasks is printed once, as a numbered stack the tasks name.
    std::string text() const;
    /// The same as one JSON object (what GET /tasks?format=json serves).
    std::string json() const;
};

/// How a dump is taken.
struct TaskDumpOptions {
    /// How long to wait for each worker's snapshot before reporting it as stuck.
    std::chrono::milliseconds answer_within{250};
    /// Name the frames of each task's async backtrace (dladdr + demangling, cached per function).
    bool backtraces = true;
    /// Do the dump's own work (naming frames; text() and json() of the result) on a short-lived
    /// thread at the lowest priority (SCHED_IDLE, else nice 19), the caller waiting, so that a
    /// worker that wakes takes its CPU back at once rather than after a time slice. On a machine
    /// whose workers leave no CPU idle, that thread runs only in the gaps: a large dump then
    /// takes longer (false: at the caller's priority). Called on a worker, it runs there.
    bool low_priority = true;
};

/// What task_dump_report_async returns.
enum class TaskDumpFormat : std::uint8_t {
    text, ///< TaskDump::text()
    json, ///< TaskDump::json()
};

/// The tasks of every worker of `rt`. Any thread.
TaskDump task_dump(const Runtime& rt, TaskDumpOptions options = {});
/// The tasks of one scheduler. Any thread (a scheduler that is not running its loop does not
/// answer: from another thread, only while it runs block_on or is a Runtime worker).
TaskDump task_dump(Scheduler& s, TaskDumpOptions options = {});
/// task_dump(rt) from inside a task: waits on the blocking pool, so its own worker answers too.
[[nodiscard]] Task<TaskDump> task_dump_async(const Runtime& rt, TaskDumpOptions options = {});

/// task_dump(rt) and its text or JSON from inside a task: the dump, and the formatting, run off
/// the worker (on the blocking pool, at low priority as `options` says), which only waits. What
/// the /tasks endpoints serve.
[[nodiscard]] Task<std::string> task_dump_report_async(const Runtime& rt, TaskDumpFormat format,
                                                       TaskDumpOptions options = {});

/// "3.17": the spawning thread's number and its count of spawns (a TaskInfo::id).
std::string format_task_id(std::uint64_t id);

namespace detail {
/// The awaitable of set_task_name.
struct [[nodiscard]] TaskNamer {
    // (not an aggregate: see the g++ 12 note in the README)
    explicit TaskNamer(std::string n) noexcept
        : name(std::move(n)) {}
    std::string name;
    bool await_ready() const noexcept { return false; }
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        name_task(scope_of(h), name);
        return false; // never suspends
    }
    void await_resume() const noexcept {}
    static void name_task(CancelScope* scope, const std::string& name) noexcept;
};
} // namespace detail

/// `co_await set_task_name("conn 10.0.0.7:51234")`: the spawned task this runs in is shown by
/// that name in dumps (and in /tasks, galay-top). Never suspends; outside a spawned task it does
/// nothing.
inline detail::TaskNamer set_task_name(std::string name) {
    return detail::TaskNamer(std::move(name));
}

} // namespace galay
