// spawn_blocking on every backend, under a plain Scheduler and in a Runtime: results,
// exceptions, cancellation before and while the function runs, shutdown while it runs.
#include "support/backends.hpp"

#include <atomic>
#include <latch>
#include <stdexcept>
#include <thread>

using namespace galay;
using namespace std::chrono_literals;

namespace {

class BlockingTest : public test::BackendTest {};

/// Occupies every thread of a one-thread pool until released, so the next job stays queued.
struct PoolBlocker {
    std::atomic<bool> running{false};
    std::atomic<bool> release{false};
};

Task<void> hold_pool(PoolBlocker& b) {
    auto r = co_await spawn_blocking([&b] {
        b.running = true;
        b.running.notify_all();
        b.release.wait(false);
    });
    CO_ASSERT(r.has_value());
}

} // namespace

TEST_P(BlockingTest, ReturnsTheValueOnAPlainScheduler) {
    const auto caller = std::this_thread::get_id();
    auto r = run([&]() -> Task<Result<std::thread::id>> {
        co_return co_await spawn_blocking([] { return std::this_thread::get_id(); });
    }());
    ASSERT_TRUE(r);
    EXPECT_NE(*r, caller); // it ran on a pool thread
}

TEST_P(BlockingTest, VoidAndResultReturningFunctions) {
    run([]() -> Task<void> {
        int side = 0;
        Result<void> v = co_await spawn_blocking([&side] { side = 4; });
        CO_ASSERT(v.has_value());
        CO_ASSERT(side == 4);
        // A function returning Result<U> gives Result<U>, not Result<Result<U>>.
        Result<int> e = co_await spawn_blocking([]() -> Result<int> { return fail(ENOENT); });
        CO_ASSERT(!e && e.error() == std::errc::no_such_file_or_directory);
        Result<int> ok = co_await spawn_blocking([]() -> Result<int> { return 12; });
        CO_ASSERT(ok && *ok == 12);
    }());
}

TEST_P(BlockingTest, AnExceptionIsRethrownInTheTask) {
    EXPECT_THROW(run([]() -> Task<void> {
                     (void)co_await spawn_blocking(
                         []() -> int { throw std::runtime_error("from the pool"); });
                 }()),
                 std::runtime_error);
}

TEST_P(BlockingTest, ResultsComeBackToTheAwaitingWorker) {
    RuntimeOptions o;
    o.workers = 3;
    o.scheduler = options();
    Runtime rt(o);
    for (unsigned w = 0; w < 3; ++w) {
        auto same = rt.spawn_on(w,
                                []() -> Task<bool> {
                                    const int before = this_worker();
                                    auto r = co_await spawn_blocking([] { return 1; });
                                    co_return r&& this_worker() == before;
                                }())
                        .join();
        EXPECT_TRUE(same) << w;
    }
}

TEST_P(BlockingTest, ManyConcurrentCallsAllComplete) {
    RuntimeOptions o;
    o.workers = 2;
    o.scheduler = options();
    Runtime rt(o);
    std::vector<JoinHandle<long>> hs;
    for (int t = 0; t < 8; ++t)
        hs.push_back(rt.spawn([]() -> Task<long> {
            long sum = 0;
            for (int i = 0; i < 50; ++i) {
                auto r = co_await spawn_blocking([i] { return i; });
                if (r) sum += *r;
            }
            co_return sum;
        }()));
    for (auto& h : hs)
        EXPECT_EQ(h.join(), 49 * 50 / 2);
}

TEST_P(BlockingTest, AQueuedFunctionTimedOutOrCancelledNeverRuns) {
    set_blocking_threads(1);
    run([]() -> Task<void> {
        PoolBlocker b;
        auto holder = spawn(hold_pool(b));
        while (!b.running)
            co_await yield_now(); // the only pool thread is now busy
        std::atomic<int> ran{0};
        auto timed = co_await spawn_blocking([&ran] { ++ran; }).timeout(2ms);
        CO_ASSERT(!timed && timed.error() == std::errc::timed_out);
        auto raced =
            co_await when_any(as_task(spawn_blocking([&ran] { ++ran; })), as_task(yield_now()));
        CO_ASSERT(raced.index() == 1);
        b.release = true;
        b.release.notify_all();
        co_await holder;
        // Another call now runs at once; the dropped ones never did.
        CO_ASSERT(co_await spawn_blocking([] {}));
        CO_ASSERT(ran.load() == 0);
    }());
    set_blocking_threads(64);
}

TEST_P(BlockingTest, ACancellationWhileTheFunctionRunsWaitsForItsResult) {
    run([]() -> Task<void> {
        std::atomic<bool> started{false};
        std::atomic<bool> release{false};
        std::atomic<bool> done{false};
        auto job = [&]() -> Task<Result<int>> {
            co_return co_await spawn_blocking([&] {
                started = true;
                release.wait(false);
                done = true;
                return 5;
            });
        };
        auto canceller = [&]() -> Task<void> {
            while (!started)
                co_await yield_now();
            release = true; // (it finishes after the cancellation has been asked for)
            release.notify_all();
        };
        auto r = co_await when_any(job(), canceller());
        // The canceller won, but a running function cannot be interrupted: the cancelled wait
        // lasted until the function had returned (when_any waits for its loser).
        CO_ASSERT(r.index() == 1);
        CO_ASSERT(done.load());
    }());
}

TEST_P(BlockingTest, ShutdownWhileAFunctionRunsWaitsForIt) {
    std::atomic<bool> started{false};
    std::atomic<bool> release{false};
    std::atomic<bool> finished{false};
    {
        RuntimeOptions o;
        o.workers = 1;
        o.scheduler = options();
        o.shutdown_grace = 1ms;
        Runtime rt(o);
        rt.spawn([](std::atomic<bool>& started, std::atomic<bool>& release,
                    std::atomic<bool>& finished) -> Task<void> {
            int local = 0; // the function writes into the task's frame
            (void)co_await spawn_blocking([&] {
                started = true;
                started.notify_all();
                release.wait(false);
                local = 1;
                finished = true;
            });
            (void)local;
        }(started, release, finished));
        started.wait(false);
        std::thread releaser([&] {
            release = true;
            release.notify_all();
        });
        rt.shutdown(); // the frame may not go before the function has returned
        releaser.join();
    }
    EXPECT_TRUE(finished.load());
}

TEST_P(BlockingTest, ResolveRunsOnThePool) {
    auto r = run([]() -> Task<Result<std::vector<SocketAddr>>> {
        co_return co_await resolve("localhost", 80);
    }());
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_FALSE(r->empty());
    EXPECT_EQ(r->front().port(), 80);
}

GALAY_INSTANTIATE_BACKENDS(BlockingTest);
