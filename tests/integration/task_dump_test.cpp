// Task dumps (galay/task_dump.hpp) on every backend: what a waiting task waits on (a kernel op, a
// Mutex and its holder, a JoinHandle across workers), async backtraces, deadlock cycles, a dump
// from another thread while the workers run flat out, and a worker stuck in user code.
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"

#include <array>
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

// The three functions of the backtrace test: external linkage and never inlined, so that their
// coroutine frames keep resume functions of their own with names in the dynamic symbol table.
[[gnu::noinline]] Task<void> dump_test_leaf(Event& ev) {
    (void)co_await ev.wait();
}
[[gnu::noinline]] Task<void> dump_test_middle(Event& ev) {
    co_await dump_test_leaf(ev);
}
[[gnu::noinline]] Task<void> dump_test_root(Event& ev) {
    co_await dump_test_middle(ev);
}

/// Blocks its thread (the stall under test, not a synchronisation), then waits two calls deep.
[[gnu::noinline]] Task<void> stall_test_inner() {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    (void)co_await sleep(std::chrono::milliseconds(1));
}
[[gnu::noinline]] Task<void> stall_test_outer() {
    co_await stall_test_inner();
}

namespace {

using TaskDumpTest = test::BackendTest;

const TaskInfo* by_name(const TaskDump& d, const std::string& name) {
    for (const TaskInfo& t : d.tasks)
        if (t.name == name) return &t;
    return nullptr;
}

/// Let the tasks spawned so far run up to where they wait.
Task<void> settle() {
    for (int i = 0; i < 4; ++i)
        co_await yield_now();
}

TEST_P(TaskDumpTest, ARecvWithATimeoutShowsTheOpTheFdAndTheDeadline) {
    run([]() -> Task<void> {
        auto [client, server] = co_await test::loopback_pair();
        const int fd = server.fd();
        auto h = spawn([](TcpStream& s) -> Task<void> {
            co_await set_task_name("conn under test");
            std::array<char, 512> buf;
            (void)co_await s.recv(buf).timeout(30s);
        }(server));
        co_await settle();
        const TaskDump d = task_dump(current_scheduler());
        const TaskInfo* t = by_name(d, "conn under test");
        CO_ASSERT(t != nullptr);
        EXPECT_EQ(t->state, TaskState::waiting);
        CO_ASSERT(t->waits.size() == 1u);
        const TaskWait& w = t->waits[0];
        EXPECT_EQ(w.what, "recv");
        EXPECT_EQ(w.fd, fd);
        EXPECT_EQ(w.bytes, 512u);
        CO_ASSERT(w.deadline_in.has_value());
        EXPECT_GT(*w.deadline_in, 20s);
        EXPECT_LE(*w.deadline_in, 30s);
        EXPECT_NE(t->spawned_at.find("task_dump_test.cpp"), std::string::npos);
        const std::string text = d.text();
        EXPECT_NE(text.find("\"conn under test\""), std::string::npos) << text;
        EXPECT_NE(text.find("waits on recv fd " + std::to_string(fd) + ", 512 bytes"),
                  std::string::npos)
            << text;
        EXPECT_NE(d.json().find("\"what\":\"recv\",\"fd\":" + std::to_string(fd)),
                  std::string::npos);
        h.abort();
        co_await h;
    }());
}

TEST_P(TaskDumpTest, TasksWithTheSameStackShareOneStackInTheText) {
    run([]() -> Task<void> {
        Event ev;
        std::vector<JoinHandle<void>> same;
        for (int i = 0; i < 3; ++i) // one spawn site, one function: one stack
            same.push_back(spawn(dump_test_leaf(ev)));
        auto alone = spawn(dump_test_root(ev));
        co_await settle();
        const TaskDump d = task_dump(current_scheduler());
        const std::string text = d.text();
        // The shared stack once, before the tasks, with its spawn site and its frame.
        const auto stack = text.find("\nstack 1: 3 tasks\n  spawned at ");
        CO_ASSERT(stack != std::string::npos);
        EXPECT_EQ(text.find("stack 2:"), std::string::npos) << text;
        const auto frames = text.find("  #0 ", stack);
        CO_ASSERT(frames != std::string::npos);
        EXPECT_NE(text.substr(frames, text.find('\n', frames) - frames).find("dump_test_leaf"),
                  std::string::npos)
            << text;
        std::vector<std::uint64_t> ids;
        std::uint64_t alone_id = 0;
        for (const TaskInfo& t : d.tasks) {
            if (t.backtrace.size() == 1) ids.push_back(t.id);
            if (t.backtrace.size() == 3) alone_id = t.id;
        }
        CO_ASSERT(ids.size() == 3u && alone_id != 0);
        // Each of the three names it on its own line, and still shows its own wait.
        for (const std::uint64_t id : ids) {
            const std::string line = "task " + format_task_id(id) + " scheduler: waiting ";
            const auto at = text.find(line);
            CO_ASSERT(at != std::string::npos);
            const auto end = text.find('\n', at);
            EXPECT_NE(text.substr(at, end - at).find(", stack 1"), std::string::npos) << text;
            EXPECT_EQ(text.compare(end + 1, 16, "  waits on event"), 0) << text;
        }
        // The task with a stack of its own shows it under itself, the three frames in order.
        const auto own = text.find("task " + format_task_id(alone_id) + " scheduler: waiting ");
        CO_ASSERT(own != std::string::npos);
        const auto leaf = text.find("  #0 dump_test_leaf", own);
        const auto middle = text.find("  #1 dump_test_middle", own);
        const auto root = text.find("  #2 dump_test_root", own);
        EXPECT_TRUE(leaf != std::string::npos && leaf < middle && middle < root) << text;
        ev.set();
        for (JoinHandle<void>& h : same)
            co_await h;
        co_await alone;
    }());
}

TEST_P(TaskDumpTest, ATaskBlockedOnAMutexShowsTheHolder) {
    run([]() -> Task<void> {
        Mutex m("accounts");
        Event release;
        auto holder = spawn([](Mutex& m, Event& release) -> Task<void> {
            co_await set_task_name("holder");
            auto g = co_await m.lock();
            (void)co_await release.wait();
        }(m, release));
        auto waiter = spawn([](Mutex& m) -> Task<void> {
            co_await set_task_name("waiter");
            auto g = co_await m.lock();
        }(m));
        co_await settle();
        const TaskDump d = task_dump(current_scheduler());
        const TaskInfo* h = by_name(d, "holder");
        const TaskInfo* w = by_name(d, "waiter");
        CO_ASSERT(h != nullptr && w != nullptr);
        CO_ASSERT(w->waits.size() == 1u);
        EXPECT_EQ(w->waits[0].what, "mutex");
        EXPECT_EQ(w->waits[0].object, &m);
        EXPECT_EQ(w->waits[0].object_name, "accounts");
        EXPECT_EQ(w->waits[0].holder, h->id);
        CO_ASSERT(h->waits.size() == 1u);
        EXPECT_EQ(h->waits[0].what, "event");
        EXPECT_TRUE(d.deadlocks.empty());
        EXPECT_NE(d.text().find("held by task " + format_task_id(h->id)), std::string::npos);
        release.set();
        co_await holder;
        co_await waiter;
    }());
}

TEST_P(TaskDumpTest, ANamedChannelAndEventShowTheirNames) {
    run([]() -> Task<void> {
        Channel<int> jobs(1);
        jobs.set_name("jobs");
        Channel<int> anonymous(1);
        Event shutdown;
        shutdown.set_name("shutdown");
        EXPECT_STREQ(jobs.name(), "jobs");
        EXPECT_EQ(anonymous.name(), nullptr);
        auto r = spawn([](Channel<int>& ch) -> Task<void> {
            co_await set_task_name("receiver");
            (void)co_await ch.recv();
        }(jobs));
        auto a = spawn([](Channel<int>& ch) -> Task<void> {
            co_await set_task_name("unnamed receiver");
            (void)co_await ch.recv();
        }(anonymous));
        auto e = spawn([](Event& ev) -> Task<void> {
            co_await set_task_name("event waiter");
            (void)co_await ev.wait();
        }(shutdown));
        co_await settle();
        const TaskDump d = task_dump(current_scheduler());
        const TaskInfo* named = by_name(d, "receiver");
        const TaskInfo* unnamed = by_name(d, "unnamed receiver");
        const TaskInfo* waiter = by_name(d, "event waiter");
        CO_ASSERT(named != nullptr && unnamed != nullptr && waiter != nullptr);
        CO_ASSERT(named->waits.size() == 1u && unnamed->waits.size() == 1u &&
                  waiter->waits.size() == 1u);
        EXPECT_EQ(named->waits[0].what, "channel recv");
        EXPECT_EQ(named->waits[0].object, &jobs);
        EXPECT_EQ(named->waits[0].object_name, "jobs");
        EXPECT_EQ(unnamed->waits[0].object_name, "");
        EXPECT_EQ(waiter->waits[0].what, "event");
        EXPECT_EQ(waiter->waits[0].object_name, "shutdown");
        const std::string text = d.text();
        EXPECT_NE(text.find("\"jobs\", waiting "), std::string::npos) << text;
        EXPECT_NE(text.find("\"shutdown\", waiting "), std::string::npos) << text;
        EXPECT_NE(d.json().find("\"object_name\":\"jobs\""), std::string::npos);
        const auto sent = co_await jobs.send(1);
        EXPECT_TRUE(sent.has_value());
        const auto sent2 = co_await anonymous.send(1);
        EXPECT_TRUE(sent2.has_value());
        shutdown.set();
        co_await r;
        co_await a;
        co_await e;
    }());
}

TEST_P(TaskDumpTest, TwoTasksWaitingOnEachOthersMutexAreACycle) {
    run([]() -> Task<void> {
        Mutex a("a");
        Mutex b("b");
        Event a_locked, b_locked;
        // Each locks one mutex, waits until the other has locked its own, then asks for it.
        constexpr auto lock_both = [](Mutex& mine, Mutex& theirs, Event& locked,
                                      Event& other_locked) -> Task<void> {
            auto g = co_await mine.lock();
            locked.set();
            (void)co_await other_locked.wait();
            auto g2 = co_await theirs.lock(); // held by the other task
        };
        auto first = spawn(lock_both(a, b, a_locked, b_locked));
        auto second = spawn(lock_both(b, a, b_locked, a_locked));
        co_await settle();
        const TaskDump d = task_dump(current_scheduler());
        CO_ASSERT(d.deadlocks.size() == 1u);
        const std::set<std::uint64_t> cycle(d.deadlocks[0].begin(), d.deadlocks[0].end());
        EXPECT_EQ(cycle.size(), 2u);
        for (const std::uint64_t id : cycle) {
            const TaskInfo* t = d.find(id);
            CO_ASSERT(t != nullptr);
            CO_ASSERT(t->waits.size() == 1u);
            EXPECT_EQ(t->waits[0].what, "mutex");
            EXPECT_TRUE(cycle.contains(t->waits[0].holder));
        }
        EXPECT_NE(d.text().find("DEADLOCK: "), std::string::npos);
        first.abort(); // its lock wait ends cancelled, it lets go of `a`, `second` goes on
        co_await first;
        co_await second;
    }());
}

TEST_P(TaskDumpTest, TheAsyncBacktraceOfAThreeDeepChainNamesTheFunctionsLeafFirst) {
    run([]() -> Task<void> {
        Event ev;
        auto h = spawn(dump_test_root(ev));
        co_await settle();
        const TaskDump d = task_dump(current_scheduler());
        const TaskInfo* t = nullptr;
        for (const TaskInfo& x : d.tasks)
            if (!x.waits.empty() && x.waits[0].what == "event") t = &x;
        CO_ASSERT(t != nullptr);
        CO_ASSERT(t->backtrace.size() == 3u);
        EXPECT_NE(t->backtrace[0].function.find("dump_test_leaf"), std::string::npos)
            << t->backtrace[0].function;
        EXPECT_NE(t->backtrace[1].function.find("dump_test_middle"), std::string::npos)
            << t->backtrace[1].function;
        EXPECT_NE(t->backtrace[2].function.find("dump_test_root"), std::string::npos)
            << t->backtrace[2].function;
        ev.set();
        co_await h;
    }());
}

/// Take dumps from this thread until `done` says so (or 500 tries, each waiting for answers).
template <class F>
TaskDump dump_until(Runtime& rt, F done) {
    TaskDump d;
    for (int i = 0; i < 500; ++i) {
        d = task_dump(rt);
        if (done(d)) break;
        std::this_thread::yield();
    }
    return d;
}

TEST_P(TaskDumpTest, AJoinOnATaskOfAnotherWorkerShowsBothTasks) {
    Runtime rt(rt_options(2));
    Event release;
    auto target = rt.spawn_on(1, [](Event& ev) -> Task<int> {
        co_await set_task_name("target");
        (void)co_await ev.wait();
        co_return 7;
    }(release));
    auto joiner = rt.spawn_on(0, [](JoinHandle<int> h) -> Task<int> {
        co_await set_task_name("joiner");
        co_return co_await h;
    }(std::move(target)));
    const TaskDump d = dump_until(rt, [](const TaskDump& d) {
        const TaskInfo* j = by_name(d, "joiner");
        const TaskInfo* t = by_name(d, "target");
        return j != nullptr && t != nullptr && !j->waits.empty() && !t->waits.empty();
    });
    const TaskInfo* j = by_name(d, "joiner");
    const TaskInfo* t = by_name(d, "target");
    ASSERT_NE(j, nullptr);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(j->worker, 0);
    EXPECT_EQ(t->worker, 1);
    ASSERT_EQ(j->waits.size(), 1u);
    EXPECT_EQ(j->waits[0].what, "join");
    EXPECT_EQ(j->waits[0].target, t->id);
    EXPECT_EQ(j->waits[0].target_worker, 1);
    EXPECT_NE(d.text().find("join of task " + format_task_id(t->id) + " (worker 1)"),
              std::string::npos)
        << d.text();
    release.set();
    EXPECT_EQ(joiner.join(), 7);
}

TEST_P(TaskDumpTest, ADumpFromAnotherThreadWhileWorkersRunFlatOutIsConsistent) {
    Runtime rt(rt_options(2));
    std::atomic<bool> stop{false};
    std::vector<JoinHandle<void>> busy;
    for (unsigned w = 0; w < 2; ++w)
        busy.push_back(rt.spawn_on(w, [](std::atomic<bool>& stop) -> Task<void> {
            Channel<int> ch(4);
            while (!stop.load(std::memory_order_relaxed)) {
                // Tasks come and go, and wait on each other, all the time.
                auto h =
                    spawn([](Channel<int>& ch) -> Task<void> { (void)co_await ch.send(1); }(ch));
                (void)co_await ch.recv();
                co_await h;
                co_await yield_now();
            }
        }(stop)));
    for (int i = 0; i < 30; ++i) {
        // Most at the caller's priority: with every CPU taken by a worker, a low-priority
        // dump runs only in the gaps (a few of those too, for the hand-over across threads).
        const TaskDump d = task_dump(rt, {.low_priority = i % 10 == 0});
        ASSERT_EQ(d.workers.size(), 2u);
        std::set<std::uint64_t> ids;
        for (const WorkerDumpInfo& w : d.workers)
            EXPECT_TRUE(w.answered);
        for (const TaskInfo& t : d.tasks) {
            EXPECT_TRUE(ids.insert(t.id).second) << "task listed twice";
            EXPECT_TRUE(t.worker == 0 || t.worker == 1);
        }
        EXPECT_GE(d.tasks.size(), 2u) << d.text();
        EXPECT_FALSE(d.json().empty());
    }
    stop = true;
    for (auto& h : busy)
        h.join();
}

TEST_P(TaskDumpTest, ManyTasksAreTakenAChunkPerTurnWhileTheyFinish) {
    Runtime rt(rt_options(1));
    Event ev;
    constexpr std::size_t kTasks = 5000; // several chunks
    std::vector<JoinHandle<void>> hs;
    for (std::size_t i = 0; i < kTasks; ++i)
        hs.push_back(rt.spawn_on(0, [](Event& ev) -> Task<void> { (void)co_await ev.wait(); }(ev)));
    const TaskDump d = dump_until(rt, [](const TaskDump& d) {
        std::size_t waiting = 0;
        for (const TaskInfo& t : d.tasks)
            waiting += !t.waits.empty();
        return waiting == kTasks;
    });
    ASSERT_EQ(d.tasks.size(), kTasks);
    std::set<std::uint64_t> ids;
    for (const TaskInfo& t : d.tasks)
        ids.insert(t.id);
    EXPECT_EQ(ids.size(), kTasks);
    // One chunk holds at most 1,024 tasks; each chunk's wall and CPU time are reported (the
    // longest one's CPU within all chunks' CPU), in the text and the JSON too.
    const WorkerDumpInfo& w = d.workers[0];
    EXPECT_GE(w.chunks, (kTasks + 1023) / 1024);
    EXPECT_GT(w.snapshot_cpu.count(), 0);
    EXPECT_LE(w.pause_cpu, w.snapshot_cpu);
    EXPECT_NE(d.text().find("snapshot held its loop "), std::string::npos);
    EXPECT_NE(d.text().find(" (CPU "), std::string::npos);
    const std::string json = d.json();
    for (const char* key : {"\"pause_cpu_ns\":", "\"snapshot_cpu_ns\":", "\"chunks\":"})
        EXPECT_NE(json.find(key), std::string::npos) << key;
    // Dumps from another thread while every task finishes: a task that goes while a dump is
    // between two chunks is skipped, never read after it is gone, never listed twice.
    std::thread dumper([&rt] {
        for (int i = 0; i < 20; ++i) {
            const TaskDump x = task_dump(rt);
            std::set<std::uint64_t> seen;
            for (const TaskInfo& t : x.tasks)
                EXPECT_TRUE(seen.insert(t.id).second);
            EXPECT_TRUE(x.workers[0].answered);
        }
    });
    ev.set();
    for (auto& h : hs)
        h.join();
    dumper.join();
}

TEST_P(TaskDumpTest, AWorkerStuckInUserCodeIsNamedAndTheDumpReturns) {
    Runtime rt(rt_options(2));
    std::atomic<bool> started{false};
    std::atomic<bool> release{false};
    auto stuck =
        rt.spawn_on(1, [](std::atomic<bool>& started, std::atomic<bool>& release) -> Task<void> {
            started = true;
            while (!release.load()) // user code that never yields: what the dump must not wait for
                std::this_thread::yield();
            co_return;
        }(started, release));
    while (!started.load())
        std::this_thread::yield();
    const TaskDump d = task_dump(rt, {.answer_within = 100ms});
    ASSERT_EQ(d.workers.size(), 2u);
    EXPECT_TRUE(d.workers[0].answered);
    EXPECT_FALSE(d.workers[1].answered);
    EXPECT_EQ(d.workers[1].worker, 1);
    EXPECT_GE(d.workers[1].since_turn, 100ms);
    EXPECT_NE(d.text().find("worker 1 (" + d.workers[1].backend + "): STUCK"), std::string::npos)
        << d.text();
    release = true;
    stuck.join();
    // Once free, the worker answers again.
    const TaskDump again = task_dump(rt);
    EXPECT_TRUE(again.workers[1].answered);
}

TEST_P(TaskDumpTest, TaskDumpAsyncFromATaskIncludesItsOwnWorker) {
    Runtime rt(rt_options(1));
    const TaskDump d = rt.block_on([](Runtime& rt) -> Task<TaskDump> {
        co_await set_task_name("asking");
        co_return co_await task_dump_async(rt);
    }(rt));
    ASSERT_EQ(d.workers.size(), 1u);
    EXPECT_TRUE(d.workers[0].answered);
    const TaskInfo* t = by_name(d, "asking");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->waits.size(), 1u);
    EXPECT_EQ(t->waits[0].what, "remote wait"); // (on the blocking pool)
}

TEST_P(TaskDumpTest, TheStallReportCarriesTheStalledTasksAsyncBacktrace) {
    std::vector<metrics::StallReport> reports;
    SchedulerOptions o = options();
    o.stall_threshold = 10ms;
    o.on_stall = [&](const metrics::StallReport& r) { reports.push_back(r); };
    Scheduler s(o);
    s.block_on([]() -> Task<void> { co_await spawn(stall_test_outer()); }());
    ASSERT_GE(reports.size(), 1u);
    const std::string& bt = reports[0].backtrace;
    const auto inner = bt.find("stall_test_inner");
    const auto outer = bt.find("stall_test_outer");
    EXPECT_NE(inner, std::string::npos) << bt;
    EXPECT_NE(outer, std::string::npos) << bt;
    EXPECT_LT(inner, outer) << bt; // leaf first
}

GALAY_INSTANTIATE_BACKENDS(TaskDumpTest);

} // namespace
