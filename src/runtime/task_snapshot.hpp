// What a worker copies of its own tasks for a dump (task_dump.cpp), in flat arrays so that a
// snapshot of 100,000 tasks costs a few allocations, and what turns it into a galay::TaskDump on
// the dumping thread (task_format.cpp).
#pragma once

#include "galay/detail/wait_desc.hpp"
#include "galay/task_dump.hpp"

#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <vector>

namespace galay::detail {

class SchedulerCore;
struct SpawnBase;

struct RawTask {
    std::uint64_t id = 0;
    std::string name;
    std::source_location where;
    TaskState state = TaskState::ready;
    std::uint32_t wait_begin = 0, wait_count = 0;   // in RawDump::waits
    std::uint32_t frame_begin = 0, frame_count = 0; // in RawDump::frames, leaf first
};

/// A pending child of a when_all / when_any (WaitDesc::child_begin).
struct RawChild {
    std::uint32_t index = 0;
    std::uint32_t frame_begin = 0, frame_count = 0; // in RawDump::frames, leaf first
};

struct RawDump {
    int worker = -1;
    std::string backend;
    std::int64_t now_ns = 0; // the worker's clock at the snapshot
    std::vector<RawTask> tasks;
    std::vector<WaitDesc> waits;
    std::vector<const void*> frames; // resume addresses
    std::vector<RawChild> children;
};

/// On the worker's own thread: copy up to `max` of its tasks from `cursor` on (moved past them;
/// null at the end of the list), stopping early once the steady clock reaches `until_ns`.
void snapshot_tasks(SchedulerCore& s, RawDump& out, SpawnBase*& cursor, std::size_t max,
                    std::int64_t until_ns);
/// On the dumping thread: append `raw`'s tasks to `out`, naming frames when asked.
void convert_tasks(const RawDump& raw, bool backtraces, TaskDump& out);
/// Find the cycles of mutex waits in `d.tasks`.
void find_deadlocks(TaskDump& d);
/// Runs `f` on a short-lived thread at the lowest priority (SCHED_IDLE, else nice 19) when
/// `wanted`, the caller waiting; on the caller's thread when not wanted, when the caller is a
/// worker (which waits either way) or such a thread already, or when no thread can be started.
void at_low_priority(bool wanted, const std::function<void()>& f);
/// TaskDump::text() and json(), on the thread they chose (task_text.cpp).
std::string dump_text(const TaskDump& d);
std::string dump_json(const TaskDump& d);
/// An async backtrace of the task `task` (a SpawnBase), leaf first, for the stall report.
std::string backtrace_text(const void* task);

} // namespace galay::detail
