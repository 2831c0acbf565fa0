// galay::Sharded<T> (galay/sharded.hpp): each shard is made, used and destroyed on its own worker;
// calls reach a shard on its worker; a stop, a Runtime shutdown and a constructor that throws
// tear the shards down on their workers.
#include "support/backends.hpp"

#include <array>
#include <atomic>
#include <stdexcept>
#include <thread>

using namespace galay;

namespace {

class ShardedTest : public test::BackendTest {};

/// Where each shard was made, stopped and destroyed (worker index; -2: not yet).
struct Journal {
    std::array<std::atomic<int>, 4> made{-2, -2, -2, -2};
    std::array<std::atomic<int>, 4> stopped{-2, -2, -2, -2};
    std::array<std::atomic<int>, 4> destroyed{-2, -2, -2, -2};
};

struct Shard {
    Shard(Journal* j, int base)
        : journal(j)
        , worker(this_worker())
        , n(base) {
        journal->made[static_cast<std::size_t>(worker)] = this_worker();
    }
    ~Shard() { journal->destroyed[static_cast<std::size_t>(worker)] = this_worker(); }
    Shard(const Shard&) = delete;

    int add(int k) {
        if (this_worker() != worker) throw std::logic_error("called off its worker");
        return n += k;
    }
    Task<int> add_later(int k) { co_return add(k); }
    void stop() { journal->stopped[static_cast<std::size_t>(worker)] = this_worker(); }

    Journal* journal;
    int worker;
    int n;
};

Task<void> use_shards(Sharded<Shard>* s) {
    CO_ASSERT(s->local().worker == this_worker());
    s->local().n += 1;                                        // worker 0: 11
    const int one = co_await s->invoke_on(1, &Shard::add, 5); // worker 1: 25
    CO_ASSERT(one == 25);
    const int later = co_await s->invoke_on(1, &Shard::add_later, 1); // a coroutine method: 26
    CO_ASSERT(later == 26);
    const int w = co_await s->invoke_on(1, [](Shard& sh) { return sh.worker; });
    CO_ASSERT(w == 1);
    co_await s->invoke_on_all([](Shard& sh) { sh.add(100); }); // 111, 126
    const long total = co_await s->map_reduce([](Shard& sh) { return static_cast<long>(sh.n); }, 0L,
                                              [](long a, long b) { return a + b; });
    CO_ASSERT(total == 237);
}

TEST_P(ShardedTest, EachShardLivesOnItsWorker) {
    Journal j;
    {
        Runtime rt(rt_options(2));
        Sharded<Shard> s(rt, &j, 10); // every shard is Shard(&j, 10), made on its worker
        for (int i = 0; i < 2; ++i)
            EXPECT_EQ(j.made[static_cast<std::size_t>(i)].load(), i);
        // (both start at 10; worker 1's gets 10 more here, through a call on its worker)
        EXPECT_EQ(s.invoke_on(1, &Shard::add, 10).join(), 20);
        rt.spawn_on(0, use_shards(&s)).join();
        EXPECT_THROW((void)s.local(), std::logic_error); // this thread is not a worker
        rt.block_on(s.stop());
        for (int i = 0; i < 2; ++i) {
            EXPECT_EQ(j.stopped[static_cast<std::size_t>(i)].load(), i);
            EXPECT_EQ(j.destroyed[static_cast<std::size_t>(i)].load(), i);
        }
        rt.block_on(s.stop()); // idempotent
        EXPECT_THROW(s.invoke_on(0, &Shard::add, 1).join(), std::logic_error);
    }
}

TEST_P(ShardedTest, AShutdownStopsTheShardsOnTheirWorkersFirst) {
    Journal j;
    Runtime rt(rt_options(2));
    Sharded<Shard> s(rt, &j, 0);
    rt.shutdown(); // the shards are torn down before the workers stop
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(j.stopped[static_cast<std::size_t>(i)].load(), i);
        EXPECT_EQ(j.destroyed[static_cast<std::size_t>(i)].load(), i);
    }
}

Task<int> made_in_a_task(Runtime* rt, Journal* j) {
    Sharded<Shard> s = co_await Sharded<Shard>::create(*rt, j, 3);
    const int v = co_await s.invoke_on(0, &Shard::add, 1);
    co_await s.stop();
    co_return v;
}

TEST_P(ShardedTest, CreateMakesTheShardsFromATask) {
    Journal j;
    Runtime rt(rt_options(2));
    EXPECT_EQ(rt.spawn_on(1, made_in_a_task(&rt, &j)).join(), 4);
    for (int i = 0; i < 2; ++i)
        EXPECT_EQ(j.destroyed[static_cast<std::size_t>(i)].load(), i);
}

struct FailsOnWorker1 {
    explicit FailsOnWorker1(Journal* j)
        : journal(j) {
        if (this_worker() == 1) throw std::runtime_error("no shard on worker 1");
        journal->made[0] = this_worker();
    }
    ~FailsOnWorker1() { journal->destroyed[0] = this_worker(); }
    Journal* journal;
};

TEST_P(ShardedTest, AConstructorThatThrowsUndoesTheOthers) {
    Journal j;
    Runtime rt(rt_options(2));
    EXPECT_THROW((void)Sharded<FailsOnWorker1>(rt, &j), std::runtime_error);
    EXPECT_EQ(j.made[0].load(), 0);
    EXPECT_EQ(j.destroyed[0].load(), 0); // destroyed on its own worker
}

// --- Latch and Barrier, across workers ---

Task<Result<void>> wait_latch(Latch* l) {
    co_return co_await l->wait();
}

TEST_P(ShardedTest, ALatchReleasesWaitersOnEveryWorker) {
    Runtime rt(rt_options(2));
    Latch l(3);
    auto a = rt.spawn_on(0, wait_latch(&l));
    auto b = rt.spawn_on(1, wait_latch(&l));
    l.count_down(); // a plain thread
    rt.invoke_on(0, [&l] { l.count_down(); }).join();
    EXPECT_FALSE(l.try_wait());
    EXPECT_EQ(l.count(), 1u);
    rt.invoke_on(1, [&l] { l.count_down(5); }).join(); // (never below zero)
    EXPECT_TRUE(a.join().has_value());
    EXPECT_TRUE(b.join().has_value());
    EXPECT_TRUE(l.try_wait());
    EXPECT_TRUE(rt.spawn_on(1, wait_latch(&l)).join().has_value()); // open: passes at once
}

Task<Result<void>> wait_latch_briefly(Latch* l) {
    co_return co_await l->wait().timeout(std::chrono::milliseconds(1));
}

Task<Result<void>> wait_latch_no_limit(Latch* l) {
    co_return co_await l->wait().timeout(no_timeout);
}

TEST_P(ShardedTest, ALatchWaitTimesOutOrIsCancelled) {
    Runtime rt(rt_options(2));
    Latch l(1);
    EXPECT_EQ(rt.spawn_on(1, wait_latch_briefly(&l)).join().error(), std::errc::timed_out);
    auto h = rt.spawn_on(1, wait_latch_no_limit(&l));
    h.abort();
    EXPECT_EQ(h.join().error(), std::errc::operation_canceled);
    auto open = rt.spawn_on(0, wait_latch_no_limit(&l));
    l.count_down();
    EXPECT_TRUE(open.join().has_value());
}

Task<std::uint64_t> meet(Barrier* b, std::atomic<int>* arrived, int phases) {
    std::uint64_t seen = 0;
    for (int p = 0; p < phases; ++p) {
        arrived->fetch_add(1);
        auto r = co_await b->arrive_and_wait();
        CO_ASSERT(r.has_value());
        // Every task of this phase arrived before any left it.
        CO_ASSERT(arrived->load() >= 2 * (p + 1));
        seen = b->phase();
    }
    co_return seen;
}

TEST_P(ShardedTest, ABarrierMeetsAcrossWorkersPhaseAfterPhase) {
    Runtime rt(rt_options(2));
    Barrier b(2);
    std::atomic<int> arrived{0};
    auto x = rt.spawn_on(0, meet(&b, &arrived, 50));
    auto y = rt.spawn_on(1, meet(&b, &arrived, 50));
    EXPECT_EQ(x.join(), 50u);
    EXPECT_EQ(y.join(), 50u);
    EXPECT_EQ(b.phase(), 50u);
    // A task that drops out: the next phases need one arrival fewer.
    b.arrive_and_drop(); // one of this phase's two arrivals; the phases after need one
    auto z = rt.spawn_on(
        1, [](Barrier* b) -> Task<Result<void>> { co_return co_await b->arrive_and_wait(); }(&b));
    EXPECT_TRUE(z.join().has_value());
    EXPECT_EQ(b.phase(), 51u);
    EXPECT_TRUE(rt.spawn_on(0,
                            [](Barrier* b) -> Task<Result<void>> {
                                co_return co_await b->arrive_and_wait();
                            }(&b))
                    .join()
                    .has_value()); // alone now
    EXPECT_EQ(b.phase(), 52u);
}

} // namespace

GALAY_INSTANTIATE_BACKENDS(ShardedTest);
