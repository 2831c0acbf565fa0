// What a task dump records about one leaf a task waits on (galay/task_dump.hpp): filled by the
// leaf's `describe()` on the task's own thread, plain values only, so the dumping thread formats
// it later without touching the leaf again.
#pragma once

#include <cstdint>

namespace galay::detail {

struct WaitDesc {
    const char* what = "wait";         // "recv", "sleep", "mutex", "channel recv", "join" ...
    int fd = -1;                       // kernel ops: the fd (-1: none)
    std::uint64_t bytes = 0;           // kernel ops: the buffer length asked for
    std::int64_t deadline_ns = 0;      // steady clock; 0: no deadline
    std::int64_t since_ns = 0;         // when the wait began (the scheduler's coarse clock)
    const void* object = nullptr;      // the primitive waited on (Mutex, Channel, Event ...)
    const char* object_name = nullptr; // its name, when it was given one
    std::uint64_t holder = 0;          // Mutex: the task that holds it (0: unknown / none)
    std::uint64_t target = 0;          // JoinHandle: the awaited task
    int target_worker = -1;            // JoinHandle: its worker (-1: not in a Runtime)
    std::uint32_t children = 0;        // when_all / when_any: how many tasks it joins
    std::uint32_t pending = 0;         // ... of which not finished
    std::uint32_t child_begin = 0;     // (the dump's) its pending children in RawDump::children
};

} // namespace galay::detail
