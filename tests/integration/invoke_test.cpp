// Runtime::invoke_on (galay/invoke.hpp): a call runs on the worker it names and its value or
// exception comes back; on the caller's own worker it runs in place; a waiter that gives up
// withdraws the call (skipped when not started, run to completion when a plain callable is
// running, cancelled when a coroutine is waiting); after shutdown a call is refused.
#include "support/backends.hpp"

#include <atomic>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>

using namespace galay;

namespace {

class InvokeTest : public test::BackendTest {};

int where_am_i() {
    return this_worker();
}

Task<std::string> named_on_worker(std::string prefix) {
    co_return prefix + std::to_string(this_worker());
}

Task<void> values_and_workers(Runtime& rt) {
    const int w = co_await rt.invoke_on(1, [] { return where_am_i(); });
    CO_ASSERT(w == 1);
    const int here = co_await rt.invoke_on(0, [] { return where_am_i(); });
    CO_ASSERT(here == 0);
    std::string s = co_await rt.invoke_on(1, [] { return named_on_worker("worker "); });
    CO_ASSERT(s == "worker 1");
    // void, a move-only capture, and the free function on the current Runtime.
    auto owned = std::make_unique<int>(7);
    int seen = 0;
    // (bound before the co_await: g++ 12 destroys a closure that owns something twice when it
    // is a temporary of the co_await expression)
    auto call = invoke_on(1, [p = std::move(owned), &seen] { seen = *p; });
    co_await std::move(call);
    CO_ASSERT(seen == 7);
    // A Result when asked for one.
    Result<int> r = co_await rt.invoke_on(1, [] { return 3; }).result();
    CO_ASSERT(r && *r == 3);
    Result<int> none = co_await rt.invoke_on(1, [] { return 4; }).timeout(no_timeout);
    CO_ASSERT(none && *none == 4);
}

TEST_P(InvokeTest, RunsOnTheNamedWorkerAndGivesTheValueBack) {
    Runtime rt(rt_options(2));
    rt.spawn_on(0, values_and_workers(rt)).join();
}

Task<void> exceptions(Runtime& rt) {
    bool thrown = false;
    try {
        (void)co_await rt.invoke_on(1, []() -> int { throw std::runtime_error("on worker 1"); });
    } catch (const std::runtime_error& e) {
        thrown = std::string(e.what()) == "on worker 1";
    }
    CO_ASSERT(thrown);
    // As a Result, fn's own exception is still thrown (only the wait's failures are errors).
    thrown = false;
    try {
        (void)co_await rt
            .invoke_on(1,
                       []() -> Task<int> {
                           throw std::logic_error("coroutine");
                           co_return 1;
                       })
            .result();
    } catch (const std::logic_error&) {
        thrown = true;
    }
    CO_ASSERT(thrown);
    // The same on the caller's own worker.
    thrown = false;
    try {
        co_await rt.invoke_on(0, [] { throw std::runtime_error("here"); });
    } catch (const std::runtime_error&) {
        thrown = true;
    }
    CO_ASSERT(thrown);
}

TEST_P(InvokeTest, AnExceptionComesBackToTheCaller) {
    Runtime rt(rt_options(2));
    rt.spawn_on(0, exceptions(rt)).join();
}

Task<void> in_place(Runtime& rt, std::thread::id* ran_on, bool* ran_before_resume) {
    bool ran = false;
    // A plain callable for this very worker runs inside the co_await: nothing else runs first.
    auto call = rt.invoke_on(0, [&] {
        ran = true;
        *ran_on = std::this_thread::get_id();
    });
    *ran_before_resume = !ran; // not run by invoke_on itself, only when awaited
    co_await std::move(call);
    CO_ASSERT(ran);
    // A coroutine for this worker is awaited in place.
    std::string s = co_await rt.invoke_on(0, [] { return named_on_worker("w"); });
    CO_ASSERT(s == "w0");
}

TEST_P(InvokeTest, OnTheCallersOwnWorkerItRunsInPlace) {
    Runtime rt(rt_options(2));
    std::thread::id ran_on;
    bool lazy = false;
    const std::thread::id worker0 =
        rt.invoke_on(0, [] { return std::this_thread::get_id(); }).join();
    rt.spawn_on(0, in_place(rt, &ran_on, &lazy)).join();
    EXPECT_EQ(ran_on, worker0);
    EXPECT_TRUE(lazy);
}

TEST_P(InvokeTest, APlainThreadJoinsTheCall) {
    Runtime rt(rt_options(2));
    EXPECT_EQ(rt.invoke_on(1, [] { return where_am_i(); }).join(), 1);
    EXPECT_EQ(rt.invoke_on(0, [] { return named_on_worker("x"); }).join(), "x0");
    EXPECT_THROW(rt.invoke_on(1, [] { throw std::runtime_error("x"); }).join(), std::runtime_error);
    EXPECT_THROW((void)rt.invoke_on(2, [] { return 0; }), std::out_of_range);
}

TEST_P(InvokeTest, ACallAfterShutdownIsRefused) {
    Runtime rt(rt_options(2));
    rt.shutdown();
    bool ran = false;
    try {
        rt.invoke_on(1, [&] { ran = true; }).join();
        ADD_FAILURE() << "no exception";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), std::errc::operation_canceled);
    }
    EXPECT_FALSE(ran);
}

// --- a waiter that gives up ---

/// Worker 1 is held by a plain call blocked in `hold` until the test releases it.
struct Held {
    std::latch entered{1};
    std::latch release{1};
};

Task<Result<void>> wait_for(Runtime& rt, std::atomic<int>* runs) {
    co_return co_await rt.invoke_on(1, [runs] { runs->fetch_add(1); }).result();
}

TEST_P(InvokeTest, ACancelledWaitSkipsACallNotStarted) {
    Held held;
    Runtime rt(rt_options(2));
    auto blocker = rt.invoke_on(1, [&held] {
        held.entered.count_down();
        held.release.wait();
    });
    std::thread t([&] { std::move(blocker).join(); });
    held.entered.wait(); // worker 1 runs nothing else until released
    std::atomic<int> runs{0};
    JoinHandle<Result<void>> waiter = rt.spawn_on(0, wait_for(rt, &runs));
    // The waiter is suspended once the call is queued: abort it, then let worker 1 go on.
    waiter.abort();
    Result<void> r = waiter.join(); // (the call was queued, or not made: aborted first)
    EXPECT_EQ(r.error(), std::errc::operation_canceled);
    held.release.count_down();
    t.join();
    // Worker 1 drains its queue: a call made after it runs, the withdrawn one does not.
    rt.invoke_on(1, [] {}).join();
    EXPECT_EQ(runs.load(), 0);
}

Task<Result<int>> wait_for_running(Runtime& rt, Held* held, std::atomic<bool>* finished) {
    co_return co_await rt
        .invoke_on(1,
                   [held, finished] {
                       held->entered.count_down();
                       held->release.wait();
                       finished->store(true);
                       return 5;
                   })
        .result();
}

TEST_P(InvokeTest, ACancelledWaitLetsARunningPlainCallFinish) {
    Held held;
    std::atomic<bool> finished{false};
    Runtime rt(rt_options(2));
    JoinHandle<Result<int>> waiter = rt.spawn_on(0, wait_for_running(rt, &held, &finished));
    held.entered.wait(); // the call is running on worker 1
    waiter.abort();
    Result<int> r = waiter.join(); // the waiter resumes while the call still runs
    EXPECT_EQ(r.error(), std::errc::operation_canceled);
    EXPECT_FALSE(finished.load());
    held.release.count_down();
    rt.invoke_on(1, [] {}).join(); // (after the running call)
    EXPECT_TRUE(finished.load());
}

/// A coroutine call parked on an Event; what its wait gave, once it has ended.
struct Parked {
    Event gate; // never set
    std::atomic<bool> started{false};
    Result<void> woke;
    std::latch ended{1};
};

Task<void> parked(Parked* p) {
    p->started.store(true);
    p->woke = co_await p->gate.wait();
    p->ended.count_down();
}

Task<Result<void>> wait_for_coroutine(Runtime& rt, Parked* p) {
    auto call = rt.invoke_on(1, [p] { return parked(p); }).result();
    co_return co_await std::move(call);
}

TEST_P(InvokeTest, ACancelledWaitCancelsARunningCoroutine) {
    Parked p; // (outlives the Runtime)
    Runtime rt(rt_options(2));
    JoinHandle<Result<void>> waiter = rt.spawn_on(0, wait_for_coroutine(rt, &p));
    std::atomic<bool>& started = p.started;
    // Once the coroutine has started on worker 1 (the call below queues behind its first turn).
    while (!started.load())
        rt.invoke_on(1, [] {}).join();
    waiter.abort();
    EXPECT_EQ(waiter.join().error(), std::errc::operation_canceled);
    p.ended.wait(); // the call's coroutine saw the cancellation and ended
    EXPECT_FALSE(p.woke.has_value());
    EXPECT_EQ(p.woke.error(), std::errc::operation_canceled);
}

Task<Result<int>> slow_answer(Runtime& rt, Event* gate) {
    co_return co_await rt
        .invoke_on(1,
                   [gate]() -> Task<int> {
                       (void)co_await gate->wait();
                       co_return 1;
                   })
        .timeout(std::chrono::milliseconds(1));
}

TEST_P(InvokeTest, ATimeoutGivesUpWaiting) {
    Event gate; // never set: only the deadline ends the wait (outlives the Runtime)
    Runtime rt(rt_options(2));
    Result<int> r = rt.spawn_on(0, slow_answer(rt, &gate)).join();
    EXPECT_EQ(r.error(), std::errc::timed_out);
}

Task<long> many_calls(Runtime& rt, int n) {
    long sum = 0;
    for (int i = 0; i < n; ++i)
        sum += co_await rt.invoke_on(1 - this_worker(), [i] { return i; });
    co_return sum;
}

TEST_P(InvokeTest, BothWorkersCallEachOtherAtOnce) {
    // Both directions at the same time: each worker's frames come back to its own cache.
    Runtime rt(rt_options(2));
    constexpr int kN = 5000;
    auto a = rt.spawn_on(0, many_calls(rt, kN));
    auto b = rt.spawn_on(1, many_calls(rt, kN));
    const long want = static_cast<long>(kN) * (kN - 1) / 2;
    EXPECT_EQ(a.join(), want);
    EXPECT_EQ(b.join(), want);
}

} // namespace

GALAY_INSTANTIATE_BACKENDS(InvokeTest);
