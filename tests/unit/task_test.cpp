#include "support/backends.hpp"

#include <atomic>
#include <stdexcept>
#include <thread>

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// Counts live instances, so tests can check that frames are destroyed exactly once.
struct Counted {
    static inline int alive = 0;
    static inline int destroyed = 0;
    Counted() { ++alive; }
    Counted(const Counted&) { ++alive; }
    ~Counted() {
        --alive;
        ++destroyed;
    }
};

Task<int> value(int v) {
    co_return v;
}

Task<int> counted_value(int v) {
    Counted c;
    co_return v;
}

Task<void> thrower() {
    throw std::runtime_error("boom");
    co_return;
}

Task<int> chain(int depth) {
    if (depth == 0) co_return 0;
    co_return 1 + co_await chain(depth - 1);
}

} // namespace

class TaskTest : public test::BackendTest {};

TEST_P(TaskTest, TaskDoesNotStartUntilAwaited) {
    bool started = false;
    auto make = [&]() -> Task<void> {
        started = true;
        co_return;
    };
    run([&]() -> Task<void> {
        Task<void> t = make();
        EXPECT_FALSE(started);
        co_await std::move(t);
        EXPECT_TRUE(started);
    }());
}

TEST_P(TaskTest, FramesAreDestroyedOnceWhetherAwaitedOrNot) {
    Counted::alive = 0;
    Counted::destroyed = 0;
    {
        Task<int> never_awaited = counted_value(1); // lazy: the body never runs
    }
    EXPECT_EQ(Counted::destroyed, 0);
    EXPECT_EQ(run(counted_value(5)), 5);
    EXPECT_EQ(Counted::alive, 0);
    EXPECT_EQ(Counted::destroyed, 1);
}

TEST_P(TaskTest, ExceptionReachesTheAwaiter) {
    EXPECT_THROW(run(thrower()), std::runtime_error);
    bool caught = run([]() -> Task<bool> {
        try {
            co_await thrower();
        } catch (const std::runtime_error& e) {
            co_return std::string(e.what()) == "boom";
        }
        co_return false;
    }());
    EXPECT_TRUE(caught);
}

TEST_P(TaskTest, HundredThousandDeepChainRunsInConstantStack) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "SKIP: GCC does not emit the symmetric-transfer tail call under ASan/TSan "
                    "instrumentation; this property is checked by the debug and release builds";
#endif
    // Each level awaits the next; symmetric transfer keeps the stack flat on both the way down
    // and the way back up. Without it this overflows the 8 MiB main stack.
    EXPECT_EQ(run(chain(100'000)), 100'000);
}

TEST_P(TaskTest, WhenAllReturnsEveryResultInOrder) {
    auto [a, b, c] = run(when_all(value(1), value(2), []() -> Task<void> { co_return; }()));
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 2);
    (void)c;
    std::vector<Task<int>> many;
    for (int i = 0; i < 100; ++i)
        many.push_back(value(i));
    auto all = run(when_all(std::move(many)));
    ASSERT_EQ(all.size(), 100u);
    for (int i = 0; i < 100; ++i)
        EXPECT_EQ(all[i], i);
}

TEST_P(TaskTest, WhenAllWaitsForEveryChildBeforeRethrowing) {
    bool slow_finished = false;
    auto slow = [&]() -> Task<void> {
        co_await sleep(1ms);
        slow_finished = true;
    };
    EXPECT_THROW(run(when_all(thrower(), slow())), std::runtime_error);
    EXPECT_TRUE(slow_finished);
}

TEST_P(TaskTest, WhenAnyReturnsTheFirstAndCancelsTheRest) {
    Result<void> loser_result;
    auto loser = [&]() -> Task<int> {
        loser_result = co_await sleep(10s);
        co_return -1;
    };
    auto r = run(when_any(value(7), loser()));
    ASSERT_EQ(r.index(), 0u);
    EXPECT_EQ(std::get<0>(r), 7);
    ASSERT_FALSE(loser_result);
    EXPECT_EQ(loser_result.error(), std::errc::operation_canceled);
}

TEST_P(TaskTest, WhenAnyOverAVectorReportsTheWinnersIndex) {
    auto delayed = [](int v, std::chrono::milliseconds d) -> Task<int> {
        co_await sleep(d);
        co_return v;
    };
    std::vector<Task<int>> ts;
    ts.push_back(delayed(0, 5s));
    ts.push_back(delayed(1, 1ms));
    ts.push_back(delayed(2, 5s));
    auto [idx, v] = run(when_any(std::move(ts)));
    EXPECT_EQ(idx, 1u);
    EXPECT_EQ(v, 1);
}

namespace {
std::atomic<int> g_reported{0};
void count_report(std::exception_ptr) noexcept {
    ++g_reported;
}
} // namespace

TEST_P(TaskTest, DetachedTaskExceptionIsReportedNotSwallowed) {
    g_reported = 0;
    auto prev = set_unhandled_exception_handler(&count_report);
    run([]() -> Task<void> {
        spawn(thrower());
        co_await yield_now();
        co_await yield_now();
    }());
    set_unhandled_exception_handler(prev);
    EXPECT_EQ(g_reported.load(), 1);
}

TEST_P(TaskTest, SpawnedTasksRunAndUnfinishedOnesAreDestroyedAtShutdown) {
    Counted::alive = 0;
    int finished = 0;
    {
        Scheduler s(options());
        // A capturing lambda must outlive the coroutines it creates: keep it named.
        auto worker = [&]() -> Task<void> {
            co_await yield_now();
            ++finished;
        };
        s.block_on([&]() -> Task<void> {
            for (int i = 0; i < 10; ++i)
                spawn(worker());
            spawn([]() -> Task<void> { // never finishes before shutdown
                Counted c;
                co_await sleep(1h);
            }());
            while (finished < 10)
                co_await yield_now();
        }());
        EXPECT_EQ(s.detached_count(), 1u);
        EXPECT_EQ(Counted::alive, 1);
    }
    EXPECT_EQ(Counted::alive, 0); // the sleeping task's frame was destroyed with the scheduler
}

TEST_P(TaskTest, CancelSourceCancelsThePendingOperation) {
    auto r = run([]() -> Task<Result<void>> {
        CancelSource src;
        auto sleeper = with_cancel(src, sleep(1h));
        auto canceller = [&]() -> Task<void> {
            src.cancel();
            co_return;
        };
        auto [res, _] = co_await when_all(std::move(sleeper), canceller());
        co_return res;
    }());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::operation_canceled);
}

TEST_P(TaskTest, WithCancelStillHearsTheCallersCancellation) {
    // A task under with_cancel answers its source and, like any task, the scope it is awaited
    // in: here it is a when_any loser. (Before, with_cancel cut it off from the caller's
    // cancellation: the loser slept its 30 s out and the when_any waited for it.)
    CancelSource src;
    Result<void> slept;
    auto loser = [&]() -> Task<int> {
        slept = co_await with_cancel(src, sleep(30s));
        co_return -1;
    };
    auto r = run(when_any(value(7), loser()));
    ASSERT_EQ(r.index(), 0u);
    ASSERT_FALSE(slept);
    EXPECT_EQ(slept.error(), std::errc::operation_canceled);
    EXPECT_FALSE(src.cancelled()); // the source itself was not asked
}

TEST_P(TaskTest, TimeoutReachesATaskUnderWithCancel) {
    // galay::timeout around a with_cancel task: the timeout wins, and the task's wait is
    // cancelled (not slept out) before the timeout returns.
    Result<void> slept;
    auto r = run([&]() -> Task<std::error_code> {
        CancelSource src;
        auto inner = [&]() -> Task<void> { slept = co_await sleep(30s); };
        auto t = co_await timeout(1ms, with_cancel(src, inner()));
        co_return t ? std::error_code{} : t.error();
    }());
    EXPECT_EQ(r, std::errc::timed_out);
    ASSERT_FALSE(slept);
    EXPECT_EQ(slept.error(), std::errc::operation_canceled);
}

TEST_P(TaskTest, OneSourceCancelsEveryTaskItIsAttachedTo) {
    // Two tasks under one source at once, then both cancelled by one cancel(); a task attached
    // after that fails at once.
    auto r = run([]() -> Task<int> {
        CancelSource src;
        int cancelled = 0;
        auto sleeper = [&]() -> Task<void> {
            auto s = co_await with_cancel(src, sleep(30s));
            if (!s && s.error() == std::errc::operation_canceled) ++cancelled;
        };
        auto canceller = [&]() -> Task<void> {
            co_await yield_now(); // both sleepers are waiting now
            src.cancel();
        };
        co_await when_all(sleeper(), sleeper(), canceller());
        auto late = co_await with_cancel(src, sleep(30s));
        if (!late && late.error() == std::errc::operation_canceled) ++cancelled;
        co_return cancelled;
    }());
    EXPECT_EQ(r, 3);
}

TEST_P(TaskTest, WithCancelInsideALoserDoesNotCancelTheSourcesOtherTasks) {
    // The caller's cancellation reaches only the task it awaits, not the source: another task
    // under the same source (outside the when_any) keeps waiting until the source is asked.
    auto r = run([]() -> Task<bool> {
        CancelSource src;
        bool other_cancelled_early = false;
        bool other_done = false;
        auto other = [&]() -> Task<void> {
            auto s = co_await with_cancel(src, sleep(30s));
            other_done = true;
            CO_ASSERT(!s && s.error() == std::errc::operation_canceled);
        };
        auto racer = [&]() -> Task<void> {
            auto loser = [&]() -> Task<int> {
                (void)co_await with_cancel(src, sleep(30s));
                co_return -1;
            };
            (void)co_await when_any(value(1), loser());
            other_cancelled_early = other_done; // the loser is gone; `other` must still wait
            src.cancel();
        };
        co_await when_all(other(), racer());
        co_return !other_cancelled_early && other_done;
    }());
    EXPECT_TRUE(r);
}

TEST_P(TaskTest, PostFromAnotherThreadResumesOnTheSchedulerThread) {
    struct PostAwaiter {
        explicit PostAwaiter(std::thread::id* r)
            : resumed_on(r) {} // not an aggregate: GCC 12
        std::thread::id* resumed_on;
        std::thread worker;
        bool await_ready() { return false; }
        void await_suspend(std::coroutine_handle<> h) {
            Scheduler* s = Scheduler::current();
            worker = std::thread([s, h] { s->post(h); });
        }
        void await_resume() {
            *resumed_on = std::this_thread::get_id();
            worker.join();
        }
    };
    std::thread::id resumed_on;
    run([&]() -> Task<void> {
        for (int i = 0; i < 100; ++i)
            co_await PostAwaiter(&resumed_on);
    }());
    EXPECT_EQ(resumed_on, std::this_thread::get_id());
}

GALAY_INSTANTIATE_BACKENDS(TaskTest);
