// Task dumps of a task awaiting when_all / when_any, on every backend: the join shows how many
// children it has and which are still pending, each by its own async backtrace, in the text and
// in the JSON; the children's own waits are the task's waits.
#include "support/backends.hpp"

#include <string>
#include <variant>

using namespace galay;

// The children: external linkage and never inlined, so that their frames are named.
[[gnu::noinline]] Task<int> join_test_first(Event& ev) {
    (void)co_await ev.wait();
    co_return 1;
}
[[gnu::noinline]] Task<int> join_test_second(Event& ev) {
    (void)co_await ev.wait();
    co_return 2;
}
[[gnu::noinline]] Task<int> join_test_inner(Event& ev) {
    (void)co_await ev.wait();
    co_return 3;
}
[[gnu::noinline]] Task<int> join_test_outer(Event& ev) {
    co_return co_await join_test_inner(ev);
}

namespace {

using TaskDumpJoinTest = test::BackendTest;

/// The named task's when all / when any wait in a dump, or null.
const TaskWait* join_of(const TaskDump& d, const std::string& name) {
    for (const TaskInfo& t : d.tasks)
        if (t.name == name)
            for (const TaskWait& w : t.waits)
                if (w.what == "when all" || w.what == "when any") return &w;
    return nullptr;
}

/// Dumps until the named task's join shows `pending` children pending (bounded).
TaskDump dump_until(Runtime& rt, const std::string& name, std::size_t pending) {
    TaskDump d;
    for (int tries = 0; tries < 1000; ++tries) {
        d = task_dump(rt);
        const TaskWait* w = join_of(d, name);
        if (w != nullptr && w->pending.size() == pending) break;
    }
    return d;
}

TEST_P(TaskDumpJoinTest, WhenAllShowsItsChildrenAndWhichArePending) {
    Runtime rt(rt_options(1));
    Event first, second;
    auto h = rt.spawn_on(0, [](Event& a, Event& b) -> Task<void> {
        co_await set_task_name("joining");
        (void)co_await when_all(join_test_first(a), join_test_outer(b),
                                []() -> Task<int> { co_return 0; }());
    }(first, second));
    TaskDump d = dump_until(rt, "joining", 2);
    const TaskWait* w = join_of(d, "joining");
    ASSERT_NE(w, nullptr) << d.text();
    EXPECT_EQ(w->what, "when all");
    EXPECT_EQ(w->children, 3u);
    ASSERT_EQ(w->pending.size(), 2u) << d.text(); // the third finished at once
    EXPECT_EQ(w->pending[0].index, 0u);
    ASSERT_EQ(w->pending[0].backtrace.size(), 1u);
    EXPECT_NE(w->pending[0].backtrace[0].function.find("join_test_first"), std::string::npos);
    EXPECT_EQ(w->pending[1].index, 1u);
    ASSERT_EQ(w->pending[1].backtrace.size(), 2u); // leaf first
    EXPECT_NE(w->pending[1].backtrace[0].function.find("join_test_inner"), std::string::npos);
    EXPECT_NE(w->pending[1].backtrace[1].function.find("join_test_outer"), std::string::npos);
    // The children's own waits are the task's too.
    std::size_t events = 0;
    for (const TaskInfo& t : d.tasks)
        if (t.name == "joining")
            for (const TaskWait& x : t.waits)
                events += x.what == "event";
    EXPECT_EQ(events, 2u) << d.text();
    const std::string text = d.text();
    EXPECT_NE(text.find("waits on when all: 3 children, 2 pending"), std::string::npos) << text;
    EXPECT_NE(text.find("    child 1: join_test_inner"), std::string::npos) << text;
    const std::string json = d.json();
    EXPECT_NE(json.find("\"what\":\"when all\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"children\":3,\"pending\":[{\"index\":0,"), std::string::npos) << json;

    // One child done: one pending.
    rt.block_on([](Event& ev) -> Task<void> {
        ev.set();
        co_return;
    }(first));
    d = dump_until(rt, "joining", 1);
    w = join_of(d, "joining");
    ASSERT_NE(w, nullptr) << d.text();
    ASSERT_EQ(w->pending.size(), 1u) << d.text();
    EXPECT_EQ(w->pending[0].index, 1u);
    rt.block_on([](Event& ev) -> Task<void> {
        ev.set();
        co_return;
    }(second));
    h.join();
    // Finished: the join is gone from the task's waits (and the task from the dump).
    d = task_dump(rt);
    EXPECT_EQ(join_of(d, "joining"), nullptr) << d.text();
}

TEST_P(TaskDumpJoinTest, WhenAnyShowsItsChildren) {
    Runtime rt(rt_options(1));
    Event first, second;
    auto h = rt.spawn_on(0, [](Event& a, Event& b) -> Task<void> {
        co_await set_task_name("racing");
        (void)co_await when_any(join_test_first(a), join_test_second(b));
    }(first, second));
    const TaskDump d = dump_until(rt, "racing", 2);
    const TaskWait* w = join_of(d, "racing");
    ASSERT_NE(w, nullptr) << d.text();
    EXPECT_EQ(w->what, "when any");
    EXPECT_EQ(w->children, 2u);
    ASSERT_EQ(w->pending.size(), 2u);
    EXPECT_NE(w->pending[1].backtrace.at(0).function.find("join_test_second"), std::string::npos);
    EXPECT_NE(d.text().find("waits on when any: 2 children, 2 pending"), std::string::npos)
        << d.text();
    rt.block_on([](Event& ev) -> Task<void> {
        ev.set();
        co_return;
    }(second));
    h.join(); // the winner finished; the loser was cancelled
}

GALAY_INSTANTIATE_BACKENDS(TaskDumpJoinTest);

} // namespace
