#include "support/backends.hpp"

#include <vector>

using namespace galay;
using namespace std::chrono_literals;

class TimerTest : public test::BackendTest {};

TEST_P(TimerTest, SleepersWakeInDeadlineOrder) {
    std::vector<int> order;
    auto sleeper = [&](int id, std::chrono::milliseconds d) -> Task<void> {
        co_await sleep(d);
        order.push_back(id);
    };
    run(when_all(sleeper(3, 30ms), sleeper(1, 10ms), sleeper(2, 20ms), sleeper(0, 0ms)));
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST_P(TimerTest, SleepUntilAPastDeadlineReturnsSuccess) {
    auto r = run(sleep_until(std::chrono::steady_clock::now() - 1s));
    EXPECT_TRUE(r);
}

TEST_P(TimerTest, CancelledSleepLeavesNoTimerBehind) {
    // The loser's timer must be removed from the heap, or the scheduler would fire into a
    // destroyed frame (ASan catches that).
    for (int i = 0; i < 100; ++i) {
        auto r = run(when_any(sleep(1h), sleep(0ms)));
        EXPECT_EQ(r.index(), 1u);
    }
}

TEST_P(TimerTest, TimeoutHelperReportsTimedOutAndCancelsTheTask) {
    bool cancelled = false;
    auto slow = [&]() -> Task<int> {
        auto r = co_await sleep(1h);
        cancelled = !r && r.error() == std::errc::operation_canceled;
        co_return 1;
    };
    Result<int> r = run(timeout(5ms, slow()));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_TRUE(cancelled);

    Result<int> fast = run(timeout(1h, []() -> Task<int> { co_return 9; }()));
    ASSERT_TRUE(fast);
    EXPECT_EQ(*fast, 9);
}

TEST_P(TimerTest, TimeoutOfAResultTaskIsNotNested) {
    auto inner = []() -> Task<Result<int>> { co_return fail(EIO); };
    Result<int> r = run(timeout(1h, inner()));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::io_error);
}

GALAY_INSTANTIATE_BACKENDS(TimerTest);
