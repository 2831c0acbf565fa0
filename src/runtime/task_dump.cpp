// task_dump(): each worker copies its own tasks at its next loop turn, answering a request
// posted to it (its existing wake-up); the caller waits a bounded time and reports a worker that
// did not answer as stuck. Also the task ids and names a dump shows (galay/task_dump.hpp).
#include "runtime/task_snapshot.hpp"

#include "galay/blocking.hpp"
#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <time.h>
#include <unordered_set>

namespace galay::detail {

std::uint64_t next_task_id() noexcept {
    static std::atomic<std::uint64_t> threads{0};
    thread_local std::uint64_t base = 0;
    thread_local std::uint64_t count = 0;
    if (base == 0) base = (threads.fetch_add(1, std::memory_order_relaxed) + 1) << 40;
    return base | (++count & ((std::uint64_t{1} << 40) - 1));
}

std::uint64_t task_id_of(const CancelScope* scope) noexcept {
    const void* t = scope != nullptr ? scope->task() : nullptr;
    return t != nullptr ? static_cast<const SpawnBase*>(t)->id : 0;
}

void describe_join(const SpawnBase* awaited, WaitDesc& d) noexcept {
    d.what = "join";
    if (awaited == nullptr) return;
    d.target = awaited->id;
    if (awaited->sched != nullptr) d.target_worker = SchedulerAccess::core(*awaited->sched).worker_;
}

void JoinState::describe(WaitDesc& d) const noexcept {
    d.what = losers != nullptr ? "when any" : "when all";
    d.children = static_cast<std::uint32_t>(count);
    for (std::size_t i = 0; i < count; ++i)
        d.pending += !children[i].h.done();
}

void join_began(JoinState& j, CancelScope* scope) noexcept {
    if (scope == nullptr) return;
    if (Scheduler* s = Scheduler::current())
        j.set_since(SchedulerAccess::core(*s).coarse_ns_.load(std::memory_order_relaxed));
    scope->link(j);
}

void TaskNamer::name_task(CancelScope* scope, const std::string& name) noexcept {
    auto* t = static_cast<SpawnBase*>(scope != nullptr ? scope->task() : nullptr);
    if (t == nullptr) return;
    t->name.reset(new (std::nothrow) char[name.size() + 1]);
    if (t->name) std::memcpy(t->name.get(), name.c_str(), name.size() + 1);
}

namespace {

constexpr int kMaxFrames = 64; // deeper chains are cut (a recursion would be all the same name)
// A loop turn copies one chunk: at most kChunk tasks and, read every kClockEvery tasks, at most
// kChunkNs of the clock, so that the turn a dump lengthens stays well under a millisecond
// however many tasks the worker has and however slow their copy (the rest follow at the next
// turns).
constexpr std::size_t kChunk = 1024;
constexpr std::size_t kClockEvery = 64;
constexpr std::int64_t kChunkNs = 150'000;
// Between two chunks the worker waits in the kernel this long (when it has nothing else to
// do). A worker that copied its chunks back to back would run for milliseconds without
// blocking: the kernel then ends its time slice and may give the CPU to the other worker (two
// workers woken by one request often land on one CPU) or to the dump's low-priority thread for
// a whole slice of theirs (1.5 ms on two CPUs). A worker that blocks after each chunk is woken
// with a fresh slice, onto an idle CPU, and preempts a low-priority thread at once.
constexpr std::int64_t kChunkGapNs = 50'000;

/// The chain of galay frames from `f` down through the frame each awaits (each galay task links
/// the one it awaits), appended leaf first as their resume functions; returns the leaf (null
/// when `f` is).
std::coroutine_handle<> append_chain(std::coroutine_handle<> f, std::vector<const void*>& frames) {
    const std::size_t begin = frames.size();
    std::coroutine_handle<> leaf;
    for (int depth = 0; f && depth < kMaxFrames; ++depth) {
        frames.push_back(*static_cast<void* const*>(f.address())); // its resume function
        leaf = f;
        f = promise_base_of(f).child;
    }
    std::reverse(frames.begin() + static_cast<std::ptrdiff_t>(begin), frames.end());
    return leaf;
}

void collect_waits(const CancelScope& scope, RawDump& out) {
    scope.for_each_linked([&](const Cancellable& c) {
        if (const CancelScope* child = c.as_scope()) {
            collect_waits(*child, out);
            return;
        }
        WaitDesc d;
        d.since_ns = c.since();
        c.describe(d);
        if (d.children != 0) { // a join (only JoinState says so): its children not finished
            const auto& j = static_cast<const JoinState&>(c);
            d.child_begin = static_cast<std::uint32_t>(out.children.size());
            for (std::size_t i = 0; i < j.count; ++i) {
                const auto h = j.children[i].h;
                if (h.done()) continue;
                RawChild rc;
                rc.index = static_cast<std::uint32_t>(i);
                rc.frame_begin = static_cast<std::uint32_t>(out.frames.size());
                // (the child's own frame is galay's, not shown: the chain below it)
                append_chain(promise_base_of(h).child, out.frames);
                rc.frame_count = static_cast<std::uint32_t>(out.frames.size()) - rc.frame_begin;
                out.children.push_back(rc);
            }
        }
        out.waits.push_back(d);
    });
}

/// The calling thread's CPU time (a system call: read only around a dump's chunks, to tell a
/// chunk that worked long from one that lost its CPU).
std::int64_t thread_cpu_ns() noexcept {
    timespec ts{};
    if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

/// One scheduler's share of a request.
struct DumpRequest;
struct DumpPart {
    RemoteCall call;
    DumpRequest* req = nullptr;
    SchedulerCore* core = nullptr;
    RawDump raw;
    bool done = false; // guarded by req->m; once true, `raw` is never written again
    bool started = false;
    SpawnBase* cursor = nullptr;   // the next task to copy (registered with the scheduler)
    TimerNode timer;               // the next chunk's turn
    std::int64_t pause_ns = 0;     // the longest chunk (wall)
    std::int64_t pause_cpu_ns = 0; // that chunk's thread CPU time
    std::int64_t cpu_ns = 0;       // all chunks' thread CPU time
    std::size_t chunks = 0;
    std::uint64_t polled = 0; // the loop's poll count at the last chunk
};

/// Shared by the caller and the workers it asked: the last one to let go deletes it (a worker
/// that answers after the caller gave up on it still has its part to write into).
struct DumpRequest {
    std::mutex m;
    std::condition_variable cv;
    std::atomic<int> refs{1};
    std::size_t pending = 0; // guarded by m
    std::vector<std::unique_ptr<DumpPart>> parts;

    void release() noexcept {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }
};

void stop_cursor(DumpPart& p) noexcept {
    auto& cursors = p.core->dump_cursors_;
    std::erase(cursors, &p.cursor);
    p.cursor = nullptr;
}

/// Copy the next chunk of the worker's tasks; true when more are left.
bool take_chunk(DumpPart& p) noexcept {
    const std::int64_t c0 = thread_cpu_ns();
    const std::int64_t t0 = Scheduler::real_now_ns();
    bool more = false;
    try {
        if (!p.started) {
            p.started = true;
            p.cursor = p.core->tasks_.front();
            p.core->dump_cursors_.push_back(&p.cursor);
            // Room for every chunk at once: a vector that grows copies what it holds, all
            // within one chunk's turn.
            p.raw.tasks.reserve(p.core->linked_);
            p.raw.waits.reserve(p.core->linked_ + 16);
            p.raw.frames.reserve(2 * p.core->linked_ + 16);
        }
        snapshot_tasks(*p.core, p.raw, p.cursor, kChunk, t0 + kChunkNs);
        more = p.cursor != nullptr;
    } catch (...) {
        p.raw.tasks.clear(); // out of memory: report the worker without its tasks
    }
    if (!more) stop_cursor(p);
    const std::int64_t wall = Scheduler::real_now_ns() - t0;
    const std::int64_t cpu = thread_cpu_ns() - c0;
    if (wall > p.pause_ns) {
        p.pause_ns = wall;
        p.pause_cpu_ns = cpu;
    }
    p.cpu_ns += cpu;
    ++p.chunks;
    return more;
}

void take_snapshot(DumpPart& p) noexcept {
    while (take_chunk(p)) {
    }
}

void finish_part(DumpPart& p, bool taken) noexcept {
    DumpRequest* req = p.req;
    {
        std::lock_guard lk(req->m);
        p.done = taken;
        --req->pending;
    }
    req->cv.notify_all();
    req->release();
}

void next_chunk(TimerNode* n);

void arm_next(DumpPart& p) noexcept {
    // (a paused clock would jump by the gap: the timer is due at once there, no time passing)
    p.timer.deadline_ns = Scheduler::now_ns() + (p.core->paused_ ? 0 : kChunkGapNs);
    p.timer.on_fire = &next_chunk;
    p.timer.context = &p;
    SchedulerAccess::arm_timer(*p.core, p.timer);
}

/// On the worker: one chunk, then the next one from a timer due after kChunkGapNs (a timer
/// fires after the turn's resumes, and one armed while firing waits for the next pass; a post
/// would be drained in the same turn), or the answer.
void step(DumpPart& p) noexcept {
    p.polled = p.core->polls_;
    if (!take_chunk(p)) {
        finish_part(p, true);
        return;
    }
    arm_next(p);
}

void next_chunk(TimerNode* n) {
    auto& p = *static_cast<DumpPart*>(n->context);
    // The loop fires timers twice between two polls of the driver: one chunk a turn.
    if (p.core->polls_ == p.polled) {
        arm_next(p);
        return;
    }
    step(p);
}

void answer(void* owner, bool run) noexcept {
    auto* p = static_cast<DumpPart*>(owner);
    if (run) {
        step(*p);
        return;
    }
    if (p->started) stop_cursor(*p);
    finish_part(*p, false);
}

TaskDump dump_of(const std::vector<Scheduler*>& scheds, const TaskDumpOptions& o) {
    const std::int64_t start = Scheduler::real_now_ns();
    auto* req = new DumpRequest;
    Scheduler* here = Scheduler::current();
    for (Scheduler* s : scheds) {
        auto part = std::make_unique<DumpPart>();
        part->req = req;
        part->core = &SchedulerAccess::core(*s);
        part->call = RemoteCall{&answer, part.get()};
        req->parts.push_back(std::move(part));
    }
    for (std::size_t i = 0; i < scheds.size(); ++i) {
        DumpPart& p = *req->parts[i];
        if (scheds[i] == here) { // our own worker: nobody else would take its snapshot
            take_snapshot(p);
            p.done = true;
            continue;
        }
        {
            std::lock_guard lk(req->m);
            ++req->pending;
        }
        req->refs.fetch_add(1, std::memory_order_relaxed);
        SchedulerAccess::post(*scheds[i], p.call);
    }
    TaskDump d;
    // The requests were posted from this thread, so that the workers see them after whatever it
    // posted before (a task it spawned); the rest is this dump's own work. The wait for the
    // answers is too: the last worker to answer wakes the waiting thread, and a waking thread of
    // the caller's priority would take that worker's CPU in the middle of its loop turn.
    at_low_priority(o.low_priority, [&] {
        std::vector<char> done(scheds.size());
        {
            std::unique_lock lk(req->m);
            req->cv.wait_for(lk, o.answer_within, [&] { return req->pending == 0; });
            for (std::size_t i = 0; i < scheds.size(); ++i)
                done[i] = req->parts[i]->done;
        }
        const std::int64_t answered_ns = Scheduler::real_now_ns();
        for (std::size_t i = 0; i < scheds.size(); ++i) {
            DumpPart& p = *req->parts[i];
            WorkerDumpInfo w;
            w.worker = p.core->worker_;
            w.backend = p.core->driver_->name();
            w.stalls = p.core->counters_.stalls.get();
            w.answered = done[i] != 0;
            if (w.answered) {
                w.tasks = p.raw.tasks.size();
                w.pause = std::chrono::nanoseconds(p.pause_ns);
                w.pause_cpu = std::chrono::nanoseconds(p.pause_cpu_ns);
                w.snapshot_cpu = std::chrono::nanoseconds(p.cpu_ns);
                w.chunks = p.chunks;
                convert_tasks(p.raw, o.backtraces, d);
            } else {
                w.since_turn = std::chrono::nanoseconds(
                    answered_ns - p.core->coarse_ns_.load(std::memory_order_relaxed));
            }
            d.workers.push_back(std::move(w));
        }
        find_deadlocks(d);
    });
    d.took = std::chrono::nanoseconds(Scheduler::real_now_ns() - start);
    d.low_priority = o.low_priority;
    req->release();
    return d;
}

} // namespace

void SchedulerCore::dump_cursor_leaving(SpawnBase& t) noexcept {
    for (SpawnBase** c : dump_cursors_)
        if (*c == &t) *c = tasks_.next(t);
}

void snapshot_tasks(SchedulerCore& s, RawDump& out, SpawnBase*& cursor, std::size_t max,
                    std::int64_t until_ns) {
    out.worker = s.worker_;
    out.now_ns = Scheduler::real_now_ns();
    std::unordered_set<void*> ready; // (a worker answers a dump between batches: often empty)
    for (std::coroutine_handle<> h : s.ready_)
        ready.insert(h.address());
    const bool any_ready = !ready.empty();
    std::size_t n = 0;
    for (; cursor != nullptr && n < max; cursor = s.tasks_.next(*cursor), ++n) {
        if (n != 0 && n % kClockEvery == 0 && Scheduler::real_now_ns() >= until_ns) break;
        SpawnBase* t = cursor;
        RawTask r;
        r.id = t->id;
        if (t->name) r.name = t->name.get();
        r.where = t->where;
        r.wait_begin = static_cast<std::uint32_t>(out.waits.size());
        collect_waits(t->scope, out);
        r.wait_count = static_cast<std::uint32_t>(out.waits.size()) - r.wait_begin;
        // The frame chain from the root, leaf first: a backtrace reads from the leaf.
        r.frame_begin = static_cast<std::uint32_t>(out.frames.size());
        const std::coroutine_handle<> last = append_chain(t->root, out.frames);
        const std::coroutine_handle<> leaf = last ? last : t->self;
        r.frame_count = static_cast<std::uint32_t>(out.frames.size()) - r.frame_begin;
        const bool queued =
            any_ready && (ready.contains(leaf.address()) || ready.contains(t->self.address()));
        r.state = queued ? TaskState::ready : TaskState::waiting;
        out.tasks.push_back(std::move(r));
    }
}

} // namespace galay::detail

namespace galay {

TaskDump task_dump(const Runtime& rt, TaskDumpOptions options) {
    std::vector<Scheduler*> scheds;
    for (unsigned i = 0; i < rt.size(); ++i)
        scheds.push_back(&rt.scheduler(i));
    return detail::dump_of(scheds, options);
}

TaskDump task_dump(Scheduler& s, TaskDumpOptions options) {
    return detail::dump_of({&s}, options);
}

Task<TaskDump> task_dump_async(const Runtime& rt, TaskDumpOptions options) {
    auto r = co_await spawn_blocking([&rt, options] { return task_dump(rt, options); });
    if (!r) throw Error(r.error(), "galay: task_dump_async");
    co_return std::move(*r);
}

Task<std::string> task_dump_report_async(const Runtime& rt, TaskDumpFormat format,
                                         TaskDumpOptions options) {
    auto r = co_await spawn_blocking([&rt, format, options] {
        const TaskDump d = task_dump(rt, options);
        return format == TaskDumpFormat::json ? d.json() : d.text();
    });
    if (!r) throw Error(r.error(), "galay: task_dump_report_async");
    co_return std::move(*r);
}

const TaskInfo* TaskDump::find(std::uint64_t id) const noexcept {
    for (const TaskInfo& t : tasks)
        if (t.id == id) return &t;
    return nullptr;
}

} // namespace galay
