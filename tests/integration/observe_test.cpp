// The stall detector and the task hooks (SchedulerOptions::stall_threshold, on_stall, hooks) on
// every backend.
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"

#include <string>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

using ObserveTest = test::BackendTest;

/// Blocks its thread: the stall under test (not a synchronisation).
void block_the_loop() {
    std::this_thread::sleep_for(50ms);
}

TEST_P(ObserveTest, ATaskThatBlocksFiftyMillisecondsIsReportedWithWhereItWasSpawned) {
    std::vector<metrics::StallReport> reports;
    SchedulerOptions o = options();
    o.stall_threshold = 10ms;
    o.on_stall = [&](const metrics::StallReport& r) { reports.push_back(r); };
    Scheduler s(o);
    unsigned spawn_line = 0;
    s.block_on([](unsigned& line) -> Task<void> {
        // Blocks on its first run, and again between two sleeps.
        line = std::source_location::current().line() + 1;
        auto h = spawn([]() -> Task<void> {
            block_the_loop();
            (void)co_await sleep(1ms);
            block_the_loop();
            (void)co_await sleep(1ms);
        }());
        (void)co_await h;
    }(spawn_line));
    ASSERT_EQ(reports.size(), 2u);
    for (const metrics::StallReport& r : reports) {
        EXPECT_GE(r.duration, 50ms);
        EXPECT_FALSE(r.whole_turn);
        ASSERT_TRUE(r.located);
        EXPECT_EQ(r.spawned_at.line(), spawn_line);
        EXPECT_NE(std::string(r.spawned_at.file_name()).find("observe_test.cpp"),
                  std::string::npos);
    }
    EXPECT_EQ(metrics::snapshot(s).stalls, 2u);
}

TEST_P(ObserveTest, TheDefaultReportIsOneLineOnStderr) {
    SchedulerOptions o = options();
    o.stall_threshold = 10ms;
    Scheduler s(o);
    testing::internal::CaptureStderr();
    s.block_on([]() -> Task<void> {
        auto h = spawn([]() -> Task<void> {
            block_the_loop();
            co_return;
        }());
        (void)co_await h;
    }());
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("galay: worker -1: a task spawned at "), std::string::npos) << err;
    EXPECT_NE(err.find("observe_test.cpp"), std::string::npos) << err;
    EXPECT_NE(err.find("without yielding"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST_P(ObserveTest, NoThresholdNoReport) {
    Scheduler s(options());
    s.block_on([]() -> Task<void> {
        auto h = spawn([]() -> Task<void> {
            block_the_loop();
            co_return;
        }());
        (void)co_await h;
    }());
    EXPECT_EQ(metrics::snapshot(s).stalls, 0u);
}

struct Trace {
    std::vector<std::string> events;
    const void* task = nullptr;
    void add(const char* what, const metrics::TaskEvent& e) {
        if (task == nullptr) task = e.task;
        events.push_back(e.task == task ? what : std::string("other:") + what);
    }
};

TEST_P(ObserveTest, HooksSeeSpawnFirstResumeSuspendResumeAndExitInOrder) {
    Trace trace;
    metrics::TaskHooks hooks;
    hooks.context = &trace;
    hooks.on_spawn = [](void* c, const metrics::TaskEvent& e) {
        static_cast<Trace*>(c)->add("spawn", e);
    };
    hooks.on_first_resume = [](void* c, const metrics::TaskEvent& e) {
        static_cast<Trace*>(c)->add("first_resume", e);
    };
    hooks.on_suspend = [](void* c, const metrics::TaskEvent& e) {
        static_cast<Trace*>(c)->add("suspend", e);
    };
    hooks.on_resume = [](void* c, const metrics::TaskEvent& e) {
        static_cast<Trace*>(c)->add("resume", e);
    };
    hooks.on_exit = [](void* c, const metrics::TaskEvent& e) {
        static_cast<Trace*>(c)->add("exit", e);
    };
    SchedulerOptions o = options();
    o.hooks = &hooks;
    o.paused_clock = true; // (the sleeps order the events; virtual time makes them instant)
    Scheduler s(o);
    s.block_on([]() -> Task<void> {
        auto [a, b] = co_await test::loopback_pair();
        // One task: a sleep, then a receive that waits for the peer.
        auto h = spawn([](TcpStream& s) -> Task<void> {
            (void)co_await sleep(1ms);
            std::array<char, 8> buf;
            (void)co_await s.recv(buf);
        }(b));
        (void)co_await sleep(5ms);
        (void)co_await a.send_all(std::string_view("x"));
        (void)co_await h;
    }());
    EXPECT_EQ(trace.events, (std::vector<std::string>{"spawn", "first_resume", "suspend", "resume",
                                                      "suspend", "resume", "exit"}));
}

GALAY_INSTANTIATE_BACKENDS(ObserveTest);

} // namespace
