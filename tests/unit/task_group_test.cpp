// galay::TaskGroup: await all, cancel all (on this thread and on others), exceptions, a wait with
// a deadline, tasks spawned into a cancelled group, frames destroyed at shutdown.
#include "support/backends.hpp"
#include "support/threads.hpp"

#include <stdexcept>

using namespace galay;
using namespace std::chrono_literals;

class TaskGroupTest : public test::BackendTest {};

namespace {
std::atomic<int> g_reported{0};
void count_report(std::exception_ptr) noexcept {
    ++g_reported;
}
} // namespace

TEST_P(TaskGroupTest, WaitResumesWhenEveryTaskHasFinished) {
    int finished = 0;
    run([&]() -> Task<void> {
        TaskGroup group;
        CO_ASSERT(co_await group.wait()); // empty: at once
        auto worker = [&](int yields) -> Task<void> {
            for (int i = 0; i < yields; ++i)
                co_await yield_now();
            ++finished;
        };
        for (int i = 0; i < 10; ++i)
            group.spawn(worker(i));
        EXPECT_EQ(group.size(), 10u);
        CO_ASSERT(co_await group.wait());
        EXPECT_EQ(group.size(), 0u);
        EXPECT_EQ(finished, 10);
    }());
}

TEST_P(TaskGroupTest, CancelStopsWhatEveryTaskWaitsOnAndLaterTasksStartCancelled) {
    int cancelled = 0;
    Event never;
    run([&]() -> Task<void> {
        TaskGroup group;
        auto sleeper = [&]() -> Task<void> {
            auto r = co_await sleep(1h);
            if (!r && r.error() == std::errc::operation_canceled) ++cancelled;
        };
        auto waiter = [&]() -> Task<void> {
            auto r = co_await never.wait();
            if (!r && r.error() == std::errc::operation_canceled) ++cancelled;
        };
        group.spawn(sleeper());
        group.spawn(waiter());
        co_await yield_now();                        // both are waiting now
        auto r = co_await group.wait().timeout(1ms); // the server's grace period
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        group.cancel();
        EXPECT_TRUE(group.cancelled());
        group.spawn(sleeper()); // starts cancelled
        CO_ASSERT(co_await group.wait());
    }());
    EXPECT_EQ(cancelled, 3);
    EXPECT_EQ(never.waiting(), 0u);
}

TEST_P(TaskGroupTest, TheFirstExceptionIsRethrownByWaitAndTheOthersAreReported) {
    g_reported = 0;
    auto prev = set_unhandled_exception_handler(&count_report);
    bool others_ran = false;
    EXPECT_THROW(run([&]() -> Task<void> {
                     TaskGroup group;
                     auto thrower = [](int id) -> Task<void> {
                         co_await yield_now();
                         throw std::runtime_error("task " + std::to_string(id));
                     };
                     auto fine = [&]() -> Task<void> {
                         co_await yield_now();
                         co_await yield_now();
                         others_ran = true;
                     };
                     group.spawn(thrower(1));
                     group.spawn(fine());
                     group.spawn(thrower(2));
                     (void)co_await group.wait();
                 }()),
                 std::runtime_error);
    set_unhandled_exception_handler(prev);
    EXPECT_TRUE(others_ran) << "an exception does not cancel the other tasks";
    EXPECT_EQ(g_reported.load(), 1);
}

TEST_P(TaskGroupTest, CancelFromAPlainThreadReachesTasksOnTwoSchedulers) {
    // Tasks spawned into one group from two threads run there; a plain thread cancels them all
    // (the request is carried to each task's own thread) and waits for the group from a
    // scheduler of its own.
    TaskGroup group;
    Event parked;
    std::atomic<int> started{0}, cancelled{0};
    auto member = [&]() -> Task<void> {
        ++started;
        auto r = co_await parked.wait();
        if (!r && r.error() == std::errc::operation_canceled) ++cancelled;
    };
    auto spawner = [&]() -> Task<void> {
        for (int i = 0; i < 3; ++i)
            group.spawn(member());
        CO_ASSERT(co_await group.wait().timeout(60s)); // stays up until the group is drained
    };
    std::thread canceller([&] {
        test::spin_until([&] { return parked.waiting() == 6; });
        group.cancel();
    });
    test::run_on_threads(options(), spawner(), spawner());
    canceller.join();
    EXPECT_EQ(started.load(), 6);
    EXPECT_EQ(cancelled.load(), 6);
    EXPECT_EQ(group.size(), 0u);
}

TEST_P(TaskGroupTest, MembersOnTwoRuntimeWorkersAreCancelledFromAPlainThread) {
    // The group on the multi-threaded Runtime: tasks on worker 0 and worker 1 spawn members into
    // one group (each runs on its spawner's worker), a task on each worker waits for the group,
    // a plain thread cancels it, and both waits see the group drained.
    TaskGroup group;
    Event parked;
    std::atomic<int> started{0}, cancelled{0};
    std::atomic<unsigned> workers_seen{0};
    auto member = [&]() -> Task<void> {
        workers_seen.fetch_or(1u << this_worker());
        ++started;
        auto r = co_await parked.wait();
        if (!r && r.error() == std::errc::operation_canceled) ++cancelled;
    };
    auto spawner = [&]() -> Task<void> {
        for (int i = 0; i < 3; ++i)
            group.spawn(member());
        co_return;
    };
    auto waiter = [&]() -> Task<bool> {
        co_return (co_await group.wait().timeout(60s)).has_value();
    };
    Runtime rt(RuntimeOptions{.workers = 2, .scheduler = options()});
    rt.spawn_on(0, spawner()).join();
    rt.spawn_on(1, spawner()).join();
    auto w0 = rt.spawn_on(0, waiter());
    auto w1 = rt.spawn_on(1, waiter());
    std::thread canceller([&] {
        test::spin_until([&] { return parked.waiting() == 6; });
        group.cancel();
    });
    canceller.join();
    EXPECT_TRUE(w0.join());
    EXPECT_TRUE(w1.join());
    EXPECT_EQ(workers_seen.load(), 3u) << "members ran on both workers";
    EXPECT_EQ(started.load(), 6);
    EXPECT_EQ(cancelled.load(), 6);
    EXPECT_EQ(group.size(), 0u);
    EXPECT_TRUE(group.cancelled());
}

TEST_P(TaskGroupTest, CancelRacingTasksThatFinishOnAnotherThreadIsSafe) {
    // The cancellation is carried to the tasks' thread while some of them finish on their own.
    for (int round = 0; round < 200; ++round) {
        TaskGroup group;
        std::atomic<bool> spawned{false};
        auto member = [&](int yields) -> Task<void> {
            for (int i = 0; i < yields; ++i)
                if (!co_await sleep(std::chrono::microseconds(i))) co_return;
        };
        std::thread canceller([&] {
            test::spin_until([&] { return spawned.load(); });
            group.cancel();
        });
        test::run_on_threads(options(), [&]() -> Task<void> {
            for (int i = 0; i < 4; ++i)
                group.spawn(member(i + round % 3));
            spawned = true;
            CO_ASSERT(co_await group.wait().timeout(60s));
        }());
        canceller.join();
        EXPECT_EQ(group.size(), 0u);
    }
}

TEST_P(TaskGroupTest, AMemberDestroyedWithItsSchedulerLeavesTheGroup) {
    TaskGroup group;
    {
        Scheduler s(options());
        auto forever = []() -> Task<void> { (void)co_await sleep(1h); };
        s.block_on([&]() -> Task<void> {
            group.spawn(forever());
            co_await yield_now();
        }());
        EXPECT_EQ(group.size(), 1u);
    }
    EXPECT_EQ(group.size(), 0u);
}

GALAY_INSTANTIATE_BACKENDS(TaskGroupTest);
