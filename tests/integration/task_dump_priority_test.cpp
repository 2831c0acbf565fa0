// Where a task dump does its own work, on every backend: naming frames and formatting run on a
// short-lived thread at the lowest priority when asked from outside the workers (so that a worker
// that wakes preempts it at once), on the worker when asked there; the /tasks endpoints' dump and
// text run off the worker (task_dump_report_async).
#include "support/backends.hpp"

#include "runtime/task_snapshot.hpp"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <string>
#include <thread>

using namespace galay;

namespace {

using TaskDumpPriorityTest = test::BackendTest;

/// Where a function ran: its thread, and whether that thread was at the lowest priority.
struct RanOn {
    std::thread::id thread;
    bool lowest = false;
};

RanOn here() {
    const int policy = ::sched_getscheduler(0);
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    return {std::this_thread::get_id(), policy == SCHED_IDLE || (errno == 0 && nice == 19)};
}

TEST_P(TaskDumpPriorityTest, TheDumpsOwnWorkRunsOnALowPriorityThreadOffTheWorkers) {
    Runtime rt(rt_options(1));
    RanOn low, normal;
    detail::at_low_priority(true, [&] { low = here(); });
    detail::at_low_priority(false, [&] { normal = here(); });
    EXPECT_NE(low.thread, std::this_thread::get_id());
    EXPECT_TRUE(low.lowest);
    EXPECT_EQ(normal.thread, std::this_thread::get_id());
    EXPECT_FALSE(here().lowest); // the caller's own priority is left alone
    // On a worker it runs there (the worker would wait either way).
    const RanOn on_worker = rt.block_on([]() -> Task<RanOn> {
        RanOn r;
        detail::at_low_priority(true, [&] { r = here(); });
        EXPECT_EQ(r.thread, std::this_thread::get_id());
        co_return r;
    }());
    EXPECT_FALSE(on_worker.lowest);
    // An exception crosses back to the caller.
    EXPECT_THROW(detail::at_low_priority(true, [] { throw std::runtime_error("x"); }),
                 std::runtime_error);
}

TEST_P(TaskDumpPriorityTest, TheReportOfATaskIsTakenAndFormattedOffItsWorker) {
    Runtime rt(rt_options(2));
    const auto [text, json] =
        rt.block_on([](Runtime& rt) -> Task<std::pair<std::string, std::string>> {
            co_await set_task_name("reporting");
            std::string t = co_await task_dump_report_async(rt, TaskDumpFormat::text);
            std::string j = co_await task_dump_report_async(rt, TaskDumpFormat::json);
            co_return std::pair{std::move(t), std::move(j)};
        }(rt));
    EXPECT_NE(text.find("\"reporting\""), std::string::npos) << text;
    EXPECT_NE(text.find("remote wait"), std::string::npos) << text; // (on the blocking pool)
    // Both workers answered, its own too: the worker was not held by the dump.
    std::size_t answered = 0;
    for (auto at = json.find("\"answered\":true"); at != std::string::npos;
         at = json.find("\"answered\":true", at + 1))
        ++answered;
    EXPECT_EQ(answered, 2u) << json;
    EXPECT_NE(json.find("\"name\":\"reporting\""), std::string::npos) << json;
}

TEST_P(TaskDumpPriorityTest, ADumpAtNormalPriorityGivesTheSameTasks) {
    Runtime rt(rt_options(2));
    std::array<Event, 2> events; // (one per worker: an Event belongs to one)
    for (unsigned w = 0; w < 2; ++w)
        rt.spawn_on(w, [](Event& ev) -> Task<void> { (void)co_await ev.wait(); }(events[w]));
    auto both_waiting = [](const TaskDump& d) {
        std::size_t n = 0;
        for (const TaskInfo& t : d.tasks)
            n += t.state == TaskState::waiting && !t.waits.empty();
        return n == 2;
    };
    TaskDump low;
    for (int tries = 0; tries < 1000 && !both_waiting(low); ++tries)
        low = task_dump(rt);
    const TaskDump normal = task_dump(rt, {.low_priority = false});
    EXPECT_TRUE(low.low_priority);
    EXPECT_FALSE(normal.low_priority);
    ASSERT_TRUE(both_waiting(low)) << low.text();
    ASSERT_TRUE(both_waiting(normal)) << normal.text();
    for (std::size_t i = 0; i < 2; ++i)
        EXPECT_EQ(low.tasks[i].id, normal.tasks[i].id);
    EXPECT_NE(normal.text().find("waits on event"), std::string::npos) << normal.text();
    EXPECT_NE(low.json().find("\"event\""), std::string::npos) << low.json();
}

/// How many times thread `tid` of this process gave up its CPU to wait (the kernel's
/// voluntary_ctxt_switches), or -1 where /proc does not say.
long voluntary_switches(pid_t tid) {
    std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
    const std::string key = "voluntary_ctxt_switches:";
    for (std::string line; std::getline(status, line);)
        if (line.starts_with(key)) return std::stol(line.substr(key.size()));
    return -1;
}

TEST_P(TaskDumpPriorityTest, AWorkerWaitsInTheKernelBetweenTwoChunksOfItsSnapshot) {
    // A worker that copied its chunks back to back would run for as long as its whole snapshot
    // without blocking, long enough for the kernel to end its time slice and hand its CPU to
    // another thread for a slice of theirs. Between two chunks an idle worker waits in the
    // kernel instead: each gap is a voluntary switch of its thread.
    Event ev; // (outlives the runtime: its waiting tasks are destroyed first)
    Runtime rt(rt_options(1));
    const pid_t tid = rt.block_on([]() -> Task<pid_t> { co_return ::gettid(); }());
    if (voluntary_switches(tid) < 0) GTEST_SKIP() << "no /proc/self/task/<tid>/status here";
    constexpr std::size_t kTasks = 8 * 1024; // at least 8 chunks
    for (std::size_t i = 0; i < kTasks; ++i)
        rt.spawn_on(0, [](Event& ev) -> Task<void> { (void)co_await ev.wait(); }(ev));
    TaskDump d;
    for (int tries = 0; tries < 500 && d.tasks.size() != kTasks; ++tries)
        d = task_dump(rt);
    ASSERT_EQ(d.tasks.size(), kTasks);
    const long before = voluntary_switches(tid);
    d = task_dump(rt);
    const long after = voluntary_switches(tid);
    ASSERT_TRUE(d.workers[0].answered);
    ASSERT_GE(d.workers[0].chunks, 8u);
    // (chunks - 1 gaps; a worker that never blocked would have switched once or twice: for the
    // request's wake-up and the answer's lock)
    EXPECT_GE(after - before, static_cast<long>(d.workers[0].chunks) - 1)
        << d.workers[0].chunks << " chunks";
}

GALAY_INSTANTIATE_BACKENDS(TaskDumpPriorityTest);

} // namespace
