// galay::Runtime on every backend: start/stop, spawn from workers and foreign threads, JoinHandle
// (await across workers, join from a plain thread, abort mid-I/O), shutdown with work pending, and
// the cross-thread wake-up under stress.
#include "runtime/scheduler_access.hpp" // (the run loop's poll count)
#include "support/backends.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kStressScale = 4; // the instrumented builds are several times slower
#else
constexpr int kStressScale = 1;
#endif

class RuntimeTest : public test::BackendTest {};

/// Counts live instances (frames destroyed at shutdown must destroy their locals).
struct Counted {
    static inline std::atomic<int> alive{0};
    Counted() { ++alive; }
    Counted(const Counted&) { ++alive; }
    ~Counted() { --alive; }
};

Task<int> worker_index() {
    co_return this_worker();
}

Task<int> answer_after_yield(int v) {
    co_await yield_now();
    co_return v;
}

Task<int> thrower_after_yield() {
    co_await yield_now();
    throw std::runtime_error("boom from a worker");
}

/// Stops the test with a message when `done` is not set within a minute (a lost wake-up shows
/// as a hang; this turns it into a failure that says so).
class Watchdog {
public:
    explicit Watchdog(const std::atomic<int>& progress, int goal)
        : thread_([this, &progress, goal] {
            std::unique_lock lk(m_);
            if (!cv_.wait_for(lk, std::chrono::seconds(60), [this] { return done_; })) {
                std::fprintf(stderr, "lost wake-up: only %d of %d posts ran within 60 s\n",
                             progress.load(), goal);
                std::abort();
            }
        }) {}
    ~Watchdog() {
        {
            std::lock_guard lk(m_);
            done_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

/// A connected pair on loopback, made with plain blocking calls (no scheduler needed).
struct SocketPair {
    TcpStream a, b;
};
SocketPair socket_pair() {
    auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
    if (!l) throw Error(l.error(), "bind");
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const SocketAddr to = *l->local_addr();
    if (::connect(c, to.data(), to.size()) != 0) throw Error(errno_code(errno), "connect");
    int s = -1;
    while ((s = ::accept4(l->fd(), nullptr, nullptr, SOCK_CLOEXEC)) < 0 && errno == EAGAIN) {
        pollfd p{l->fd(), POLLIN, 0};
        ::poll(&p, 1, 5000);
    }
    if (s < 0) throw Error(errno_code(errno), "accept");
    return {TcpStream(c), TcpStream(s)};
}

} // namespace

TEST_P(RuntimeTest, StartsAndStopsWithOneWorker) {
    Runtime rt(rt_options(1));
    EXPECT_EQ(rt.size(), 1u);
    EXPECT_EQ(rt.backend(), GetParam());
    EXPECT_EQ(rt.block_on(answer_after_yield(7)), 7);
    EXPECT_EQ(rt.block_on(worker_index()), 0);
    EXPECT_EQ(this_worker(), -1);
    EXPECT_EQ(Runtime::current(), nullptr);
    rt.shutdown();
    rt.shutdown(); // idempotent; the destructor does it again
}

TEST_P(RuntimeTest, StartsAndStopsWithFourWorkersEachOnItsOwnThread) {
    Runtime rt(rt_options(4));
    ASSERT_EQ(rt.size(), 4u);
    std::set<std::thread::id> threads;
    for (unsigned i = 0; i < 4; ++i) {
        EXPECT_EQ(rt.spawn_on(i, worker_index()).join(), static_cast<int>(i));
        threads.insert(
            rt.spawn_on(i,
                        []() -> Task<std::thread::id> { co_return std::this_thread::get_id(); }())
                .join());
    }
    EXPECT_EQ(threads.size(), 4u);
    EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST_P(RuntimeTest, DefaultWorkerCountIsTheHardwareConcurrency) {
    RuntimeOptions o;
    o.scheduler = options();
    Runtime rt(o);
    EXPECT_EQ(rt.size(), std::max(1u, std::thread::hardware_concurrency()));
}

TEST_P(RuntimeTest, BlockOnRethrowsTheTasksException) {
    Runtime rt(rt_options(2));
    EXPECT_THROW(rt.block_on(thrower_after_yield()), std::runtime_error);
    EXPECT_EQ(rt.block_on(answer_after_yield(3)), 3); // still usable
}

TEST_P(RuntimeTest, SpawnOnFromAForeignThreadRunsOnThatWorker) {
    Runtime rt(rt_options(3));
    std::atomic<int> seen{-2};
    std::thread foreign([&] {
        auto h = rt.spawn_on(2, worker_index());
        seen = h.join();
    });
    foreign.join();
    EXPECT_EQ(seen.load(), 2);
}

TEST_P(RuntimeTest, RtSpawnFromForeignThreadsSpreadsLongLivedTasksEvenly) {
    Runtime rt(rt_options(2));
    std::array<std::atomic<int>, 2> per_worker{};
    std::vector<JoinHandle<void>> hs;
    auto long_lived = [](std::array<std::atomic<int>, 2>& count) -> Task<void> {
        ++count[static_cast<std::size_t>(this_worker())];
        (void)co_await sleep(1h); // until aborted
    };
    std::thread foreign([&] {
        for (int i = 0; i < 8; ++i)
            hs.push_back(rt.spawn(long_lived(per_worker)));
    });
    foreign.join();
    // Each placement goes to the worker with fewer unfinished tasks: 4 and 4.
    EXPECT_EQ(rt.scheduler(0).detached_count(), 4u);
    EXPECT_EQ(rt.scheduler(1).detached_count(), 4u);
    for (auto& h : hs)
        h.abort();
    for (auto& h : hs)
        h.join();
    EXPECT_EQ(per_worker[0].load(), 4);
    EXPECT_EQ(per_worker[1].load(), 4);
}

TEST_P(RuntimeTest, JoinHandleAwaitedOnAnotherWorkerCarriesValueAndException) {
    Runtime rt(rt_options(2));
    auto r = rt.spawn_on(0,
                         [](Runtime& rt) -> Task<int> {
                             auto v = co_await rt.spawn_on(1, answer_after_yield(41));
                             try {
                                 co_await rt.spawn_on(1, thrower_after_yield());
                             } catch (const std::runtime_error& e) {
                                 CO_ASSERT(std::string(e.what()) == "boom from a worker");
                                 co_return v + 1;
                             }
                             co_return -1;
                         }(rt))
                 .join();
    EXPECT_EQ(r, 42);
}

TEST_P(RuntimeTest, JoinHandleAwaitedOnItsOwnWorker) {
    Runtime rt(rt_options(1));
    EXPECT_EQ(rt.block_on([]() -> Task<int> {
        auto h = spawn(answer_after_yield(5));
        co_return co_await h;
    }()),
              5);
}

TEST_P(RuntimeTest, JoinFromAPlainThreadGivesValueOrException) {
    Runtime rt(rt_options(2));
    auto a = rt.spawn(answer_after_yield(9));
    auto b = rt.spawn(thrower_after_yield());
    EXPECT_EQ(a.join(), 9);
    EXPECT_THROW(b.join(), std::runtime_error);
    EXPECT_TRUE(a.finished());
    EXPECT_THROW(a.join(), std::logic_error); // the value was taken
}

TEST_P(RuntimeTest, JoinWaitsForATaskThatFinishesLater) {
    Runtime rt(rt_options(2));
    auto h = rt.spawn([]() -> Task<int> {
        (void)co_await sleep(20ms);
        co_return 11;
    }());
    EXPECT_EQ(h.join(), 11);
}

TEST_P(RuntimeTest, AbortCancelsThePendingRecvAndNoByteIsLost) {
    Runtime rt(rt_options(2));
    auto pair = socket_pair();
    auto* buffer = new std::array<char, 64>{};
    std::atomic<bool> receiving{false};
    // Worker 1 waits in recv on `b`, into a heap buffer.
    auto h = rt.spawn_on(1,
                         [](TcpStream& s, std::array<char, 64>& buf,
                            std::atomic<bool>& receiving) -> Task<std::error_code> {
                             receiving = true;
                             receiving.notify_all();
                             auto n = co_await s.recv(buf);
                             co_return n ? std::error_code{} : n.error();
                         }(pair.b, *buffer, receiving));
    receiving.wait(false);
    h.abort(); // from the main thread: carried out on worker 1
    EXPECT_EQ(h.join(), std::errc::operation_canceled);
    delete buffer; // ASan: nothing may write here any more
    // The cancelled recv consumed nothing: bytes sent now arrive at the next recv.
    ASSERT_EQ(::send(pair.a.fd(), "xyz", 3, 0), 3);
    auto got = rt.spawn_on(1,
                           [](TcpStream& s) -> Task<std::string> {
                               std::array<char, 8> b{};
                               auto n = co_await s.recv_exact(std::span(b.data(), 3)).timeout(10s);
                               co_return n ? std::string(b.data(), 3) : n.error().message();
                           }(pair.b))
                   .join();
    EXPECT_EQ(got, "xyz");
}

TEST_P(RuntimeTest, AbortReachesATaskUnderWithCancelAndLeavesItsSourceAlone) {
    // The spawned task waits under with_cancel: abort() (the task's own scope) must reach it
    // as the source would, and the source, not asked, still serves a task attached later.
    Runtime rt(rt_options(1));
    CancelSource src;
    std::atomic<bool> waiting{false};
    auto h = rt.spawn([](CancelSource& src, std::atomic<bool>& waiting) -> Task<std::error_code> {
        auto wait = [&]() -> Task<Result<void>> {
            waiting = true;
            waiting.notify_all();
            co_return co_await sleep(1h);
        };
        auto r = co_await with_cancel(src, wait());
        co_return r ? std::error_code{} : r.error();
    }(src, waiting));
    waiting.wait(false);
    h.abort(); // from the main thread: carried out on the worker
    EXPECT_EQ(h.join(), std::errc::operation_canceled);
    EXPECT_FALSE(src.cancelled());
    auto later = rt.spawn([](CancelSource& src) -> Task<std::error_code> {
        auto cancel_soon = [&]() -> Task<void> {
            co_await yield_now();
            src.cancel();
        };
        auto [r, _] = co_await when_all(with_cancel(src, sleep(1h)), cancel_soon());
        co_return r ? std::error_code{} : r.error();
    }(src));
    EXPECT_EQ(later.join(), std::errc::operation_canceled);
}

TEST_P(RuntimeTest, AbortFromAnotherWorkerAndAbortAfterTheEndAreHandled) {
    Runtime rt(rt_options(2));
    auto r = rt.spawn_on(0,
                         [](Runtime& rt) -> Task<bool> {
                             auto sleeper = rt.spawn_on(1, sleep(1h));
                             co_await yield_now();
                             sleeper.abort(); // from worker 0
                             auto res = co_await sleeper;
                             sleeper.abort(); // finished: nothing happens
                             co_return !res && res.error() == std::errc::operation_canceled;
                         }(rt))
                 .join();
    EXPECT_TRUE(r);
    auto done = rt.spawn(answer_after_yield(1));
    EXPECT_EQ(done.join(), 1);
    done.abort();
}

TEST_P(RuntimeTest, AbortBeforeTheTaskStartsMakesItsFirstOperationFail) {
    Runtime rt(rt_options(1));
    std::latch hold(1);
    // Keep the worker busy in a blocking call so that the next spawn cannot start yet.
    auto blocker = rt.spawn([](std::latch& hold) -> Task<void> {
        hold.wait();
        co_return;
    }(hold));
    auto h = rt.spawn(sleep(1h));
    h.abort();
    hold.count_down();
    auto r = h.join();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::operation_canceled);
    blocker.join();
}

TEST_P(RuntimeTest, ADroppedHandleDetachesTheTask) {
    Runtime rt(rt_options(2));
    std::atomic<bool> done{false};
    rt.spawn([](std::atomic<bool>& done) -> Task<void> {
        (void)co_await sleep(1ms);
        done = true;
        done.notify_all();
    }(done)); // handle dropped at once
    done.wait(false);
    EXPECT_TRUE(done.load());
}

TEST_P(RuntimeTest, ExceptionOfADetachedTaskIsReported) {
    static std::atomic<int> reported{0};
    reported = 0;
    auto prev = set_unhandled_exception_handler([](std::exception_ptr) noexcept {
        ++reported;
        reported.notify_all();
    });
    {
        Runtime rt(rt_options(2));
        rt.spawn(thrower_after_yield());
        reported.wait(0);
    }
    set_unhandled_exception_handler(prev);
    EXPECT_EQ(reported.load(), 1);
}

TEST_P(RuntimeTest, ShutdownCancelsPendingIoAndSleepsAndDestroysEverything) {
    Counted::alive = 0;
    std::vector<JoinHandle<void>> kept;
    std::latch started(5);
    {
        RuntimeOptions o = rt_options(2);
        o.shutdown_grace = 50ms;
        Runtime rt(o);
        auto pair = socket_pair();
        auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
        ASSERT_TRUE(listener);
        // A recv, an accept, a long sleep, a task awaiting another's handle, a recv that ignores
        // its cancellation and waits again: none finishes on its own.
        kept.push_back(rt.spawn_on(0, [](TcpStream s, std::latch& started) -> Task<void> {
            Counted c;
            std::array<char, 16> buf;
            started.count_down();
            (void)co_await s.recv(buf);
        }(std::move(pair.b), started)));
        kept.push_back(rt.spawn_on(1, [](TcpListener l, std::latch& started) -> Task<void> {
            Counted c;
            started.count_down();
            (void)co_await l.accept();
        }(std::move(*listener), started)));
        rt.spawn_on(1, [](std::latch& started) -> Task<void> { // detached
            Counted c;
            started.count_down();
            (void)co_await sleep(1h);
        }(started));
        kept.push_back(rt.spawn_on(0, [](Runtime& rt, std::latch& started) -> Task<void> {
            Counted c;
            auto other = rt.spawn_on(1, sleep(1h));
            started.count_down();
            (void)co_await other;
        }(rt, started)));
        rt.spawn_on(0, [](std::latch& started) -> Task<void> {
            Counted c;
            started.count_down();
            for (;;) // ignores cancellation: destroyed when the grace period ends
                co_await yield_now();
        }(started));
        started.wait();
        EXPECT_GE(Counted::alive.load(), 5);
    } // ~Runtime
    EXPECT_EQ(Counted::alive.load(), 0);
    // The recv, accept and sleep were cancelled and their tasks returned normally; the handles
    // outlive the runtime.
    for (auto& h : kept)
        EXPECT_TRUE(h.finished());
    EXPECT_NO_THROW(kept[0].join());
    EXPECT_NO_THROW(kept[1].join());
    try { // its own join wait or the awaited task was cancelled first: either is fine
        kept[2].join();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), std::errc::operation_canceled);
    }
}

TEST_P(RuntimeTest, ATaskIgnoringCancellationIsDestroyedAfterTheGracePeriod) {
    Counted::alive = 0;
    JoinHandle<void> h;
    {
        RuntimeOptions o = rt_options(1);
        o.shutdown_grace = 20ms;
        Runtime rt(o);
        std::latch started(1);
        h = rt.spawn([](std::latch& started) -> Task<void> {
            Counted c;
            started.count_down();
            for (;;)
                co_await yield_now();
        }(started));
        started.wait();
    }
    EXPECT_EQ(Counted::alive.load(), 0);
    ASSERT_TRUE(h.finished());
    try {
        h.join();
        ADD_FAILURE() << "join() of a task destroyed at shutdown returned";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), std::errc::operation_canceled);
    }
}

TEST_P(RuntimeTest, SpawnAfterShutdownIsRefusedThroughTheHandle) {
    Runtime rt(rt_options(2));
    rt.shutdown();
    auto h = rt.spawn(answer_after_yield(1));
    EXPECT_TRUE(h.finished());
    EXPECT_THROW(h.join(), Error);
}

TEST_P(RuntimeTest, JoinTimeoutGivesUpWhileTheTaskGoesOn) {
    Runtime rt(rt_options(2));
    Event go;
    auto r = rt.spawn_on(0,
                         [](Runtime& rt, Event& go) -> Task<int> {
                             auto slow = rt.spawn_on(1, [](Event& go) -> Task<int> {
                                 auto w = co_await go.wait();
                                 co_return w ? 3 : -3;
                             }(go));
                             Result<int> early = co_await slow.timeout(1ms);
                             if (early || early.error() != std::errc::timed_out) co_return -1;
                             go.set(); // only now may the task finish
                             Result<int> late = co_await slow.timeout(10s);
                             co_return late ? *late : -2;
                         }(rt, go))
                 .join();
    EXPECT_EQ(r, 3);
}

TEST_P(RuntimeTest, JoinDeadlineAndResultGiveTheValueAsAResult) {
    Runtime rt(rt_options(2));
    auto r = rt.spawn_on(0,
                         [](Runtime& rt) -> Task<int> {
                             auto a = rt.spawn_on(1, answer_after_yield(4));
                             Result<int> va =
                                 co_await a.deadline(std::chrono::steady_clock::now() + 10s);
                             auto b = rt.spawn_on(1, answer_after_yield(5));
                             Result<int> vb = co_await b.result();
                             auto c = rt.spawn_on(1, []() -> Task<void> { co_return; }());
                             Result<void> vc = co_await c.timeout(10s);
                             co_return (va ? *va : 0) + (vb ? *vb : 0) + (vc ? 100 : 0);
                         }(rt))
                 .join();
    EXPECT_EQ(r, 109);
}

TEST_P(RuntimeTest, JoinTimeoutStillRethrowsTheTasksOwnException) {
    Runtime rt(rt_options(2));
    auto r = rt.spawn_on(0,
                         [](Runtime& rt) -> Task<int> {
                             auto bad = rt.spawn_on(1, []() -> Task<int> {
                                 co_await yield_now();
                                 throw std::runtime_error("boom");
                             }());
                             try {
                                 Result<int> v = co_await bad.timeout(10s);
                                 co_return v ? -1 : -2;
                             } catch (const std::runtime_error& e) {
                                 co_return std::string_view(e.what()) == "boom" ? 1 : -3;
                             }
                         }(rt))
                 .join();
    EXPECT_EQ(r, 1);
}

TEST_P(RuntimeTest, ACancelledJoinWaitIsAResultNotAnException) {
    Runtime rt(rt_options(2));
    Event go;
    auto r =
        rt.spawn_on(0,
                    [](Runtime& rt, Event& go) -> Task<int> {
                        auto slow = rt.spawn_on(1, [](Event& go) -> Task<int> {
                            (void)co_await go.wait();
                            co_return 7;
                        }(go));
                        auto waiter = spawn([](JoinHandle<int>& h) -> Task<int> {
                            Result<int> v = co_await h.result();
                            co_return !v && v.error() == std::errc::operation_canceled ? 1 : -1;
                        }(slow));
                        co_await yield_now(); // (the waiter is queued on this worker)
                        waiter.abort();
                        const int how = co_await waiter;
                        go.set();
                        co_return how * 10 + co_await slow;
                    }(rt, go))
            .join();
    EXPECT_EQ(r, 17);
}

TEST_P(RuntimeTest, WhenAnyCancelsAJoinWaitWithoutTouchingTheTask) {
    Runtime rt(rt_options(2));
    auto r =
        rt.spawn_on(0,
                    [](Runtime& rt) -> Task<int> {
                        auto slow = rt.spawn_on(1, []() -> Task<int> {
                            (void)co_await sleep(30ms);
                            co_return 8;
                        }());
                        auto first = co_await when_any(
                            [](JoinHandle<int>& h) -> Task<int> { co_return co_await h; }(slow),
                            sleep(1ms));
                        if (first.index() != 1) co_return -1;
                        co_return co_await slow;
                    }(rt))
            .join();
    EXPECT_EQ(r, 8);
}

TEST_P(RuntimeTest, NoLostWakeUpsUnderPostsFromManyThreadsToASleepingWorker) {
    // Foreign threads post in bursts and wait for their burst to run, so the worker keeps going
    // back to sleep in the kernel between bursts. A lost wake-up hangs the burst (and the test
    // fails on the timeout below rather than passing).
    Runtime rt(rt_options(1));
    constexpr int kThreads = 4;
    const int per_thread = 25'000 / kStressScale;
    std::atomic<int> ran{0};
    auto bump = [](std::atomic<int>& ran) -> Task<void> {
        ran.fetch_add(1, std::memory_order_relaxed);
        co_return;
    };
    std::vector<std::thread> posters;
    Watchdog watchdog(ran, kThreads * per_thread);
    for (int t = 0; t < kThreads; ++t) {
        posters.emplace_back([&, t] {
            int sent = 0;
            unsigned burst = 1 + static_cast<unsigned>(t);
            while (sent < per_thread) {
                std::vector<JoinHandle<void>> hs;
                for (unsigned i = 0; i < burst && sent < per_thread; ++i, ++sent)
                    hs.push_back(rt.spawn_on(0, bump(ran)));
                for (auto& h : hs)
                    h.join();
                burst = burst % 7 + 1;
            }
        });
    }
    for (auto& p : posters)
        p.join();
    EXPECT_EQ(ran.load(), kThreads * per_thread);
}

TEST_P(RuntimeTest, NoLostWakeUpsBetweenWorkers) {
    // Two workers hand a token back and forth through JoinHandles (worker-to-worker posts: on
    // io_uring these are MSG_RING wake-ups), each going to sleep while the other works.
    Runtime rt(rt_options(2));
    const int rounds = 20'000 / kStressScale;
    auto r = rt.spawn_on(0,
                         [](Runtime& rt, int rounds) -> Task<int> {
                             int total = 0;
                             for (int i = 0; i < rounds; ++i)
                                 total += co_await rt.spawn_on(1, answer_after_yield(1));
                             co_return total;
                         }(rt, rounds))
                 .join();
    EXPECT_EQ(r, rounds);
}

// ---------------------------------------------------------------------------------------------
// The run loop's polls of the driver (a system call each): when nothing is ready, after
// yield_now, and every kPollEvery resumes while tasks of the scheduler keep waking each other.
// ---------------------------------------------------------------------------------------------

TEST_P(RuntimeTest, TasksWakingTasksPollTheDriverOncePerManyResumes) {
    Scheduler sched(options());
    constexpr std::uint64_t kTrips = 10'000;
    Channel<std::uint64_t> ping(1), pong(1);
    const std::uint64_t before = detail::SchedulerAccess::polls(sched);
    sched.block_on([&]() -> Task<void> {
        auto a = [&]() -> Task<void> {
            for (std::uint64_t i = 0; i < kTrips; ++i) {
                CO_ASSERT(co_await ping.send(i));
                auto v = co_await pong.recv();
                CO_ASSERT(v && *v == i);
            }
        };
        auto b = [&]() -> Task<void> {
            for (std::uint64_t i = 0; i < kTrips; ++i) {
                auto v = co_await ping.recv();
                CO_ASSERT(v && *v == i);
                CO_ASSERT(co_await pong.send(i));
            }
        };
        co_await when_all(a(), b());
    }());
    // Two resumes a round trip and a poll every kPollEvery (64) resumes: ~kTrips / 32 polls, where
    // a poll after every batch made one a resume (2 * kTrips).
    static_assert(detail::SchedulerAccess::poll_every() == 64, "update the bounds below");
    const std::uint64_t polls = detail::SchedulerAccess::polls(sched) - before;
    EXPECT_LE(polls, kTrips / 16) << "the driver was polled after (nearly) every wake-up";
    EXPECT_GE(polls, kTrips / 64) << "the driver was not polled every kPollEvery resumes";
}

TEST_P(RuntimeTest, YieldNowLetsTheDriverPollBeforeTheTaskGoesOn) {
    Scheduler sched(options());
    const std::uint64_t before = detail::SchedulerAccess::polls(sched);
    sched.block_on([]() -> Task<void> {
        for (int i = 0; i < 100; ++i)
            co_await yield_now();
    }());
    EXPECT_GE(detail::SchedulerAccess::polls(sched) - before, 100u);
}

TEST_P(RuntimeTest, IoCompletesWhileTasksKeepWakingEachOther) {
    // Two tasks ping-pong without end while a third waits for bytes that the test sends after
    // 100 round trips: the receive completes within a bounded number of round trips after that.
    Scheduler sched(options());
    auto [a, b] = socket_pair();
    constexpr std::uint64_t kSendAt = 100, kGiveUpAfter = 1'000'000;
    bool received = false;
    std::uint64_t trips = 0, received_at = 0;
    sched.block_on([&]() -> Task<void> {
        Channel<int> ping(1), pong(1);
        auto reader = [&]() -> Task<void> {
            std::array<std::byte, 8> buf{};
            auto n = co_await b.recv(buf);
            CO_ASSERT(n && *n == 1);
            received = true;
            received_at = trips;
        };
        auto pinger = [&]() -> Task<void> {
            for (; !received && trips < kGiveUpAfter; ++trips) {
                if (trips == kSendAt) CO_ASSERT(::send(a.fd(), "x", 1, MSG_NOSIGNAL) == 1);
                CO_ASSERT(co_await ping.send(0));
                CO_ASSERT(co_await pong.recv());
            }
            ping.close();
        };
        auto ponger = [&]() -> Task<void> {
            while (auto v = co_await ping.recv())
                CO_ASSERT(co_await pong.send(*v));
        };
        co_await when_all(reader(), pinger(), ponger());
    }());
    ASSERT_TRUE(received);
    ASSERT_LT(received_at, kGiveUpAfter)
        << "the receive completed only once the tasks stopped keeping each other busy";
    // A poll every kPollEvery (64) resumes, two a round trip: within ~32 round trips.
    EXPECT_LE(received_at - kSendAt, 64u)
        << "round trips between the bytes' arrival and the receive's completion";
}

GALAY_INSTANTIATE_BACKENDS(RuntimeTest);
