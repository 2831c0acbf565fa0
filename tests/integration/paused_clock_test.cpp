// The paused clock (SchedulerOptions::paused_clock) on every backend: deadlines fire at their
// virtual time as soon as the scheduler is otherwise idle, and I/O that is ready is never
// skipped by a jump.
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"

#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

class PausedClockTest : public test::BackendTest {
protected:
    SchedulerOptions paused() const {
        SchedulerOptions o = options();
        o.paused_clock = true;
        return o;
    }
};

std::int64_t since(std::int64_t start) {
    return Scheduler::now_ns() - start;
}

TEST_P(PausedClockTest, AThirtySecondIdleTimeoutFiresAtItsVirtualTime) {
    Scheduler s(paused());
    s.block_on([]() -> Task<void> {
        auto [client, server] = co_await test::loopback_pair();
        const std::int64_t start = Scheduler::now_ns();
        std::array<char, 16> buf;
        auto r = co_await server.recv(buf).timeout(30s); // the client says nothing
        CO_ASSERT(!r);
        CO_ASSERT(r.error() == std::errc::timed_out);
        CO_ASSERT(since(start) == std::chrono::nanoseconds(30s).count());
    }());
}

TEST_P(PausedClockTest, DataThatArrivesBeforeTheDeadlineIsReceived) {
    Scheduler s(paused());
    s.block_on([]() -> Task<void> {
        auto [client, server] = co_await test::loopback_pair();
        const std::int64_t start = Scheduler::now_ns();
        auto talker = [](TcpStream& c) -> Task<void> {
            (void)co_await sleep(10s);
            auto w = co_await c.send_all(std::string_view("hello"));
            CO_ASSERT(w);
        };
        auto listener = [](TcpStream& sv, std::int64_t start) -> Task<void> {
            std::array<char, 16> buf;
            auto r = co_await sv.recv(buf).timeout(30s);
            CO_ASSERT(r && *r == 5);
            // Received when the talker woke, not at the deadline.
            CO_ASSERT(since(start) == std::chrono::nanoseconds(10s).count());
        };
        co_await when_all(talker(client), listener(server, start));
    }());
}

TEST_P(PausedClockTest, SleepsWakeInDeadlineOrderAtTheirVirtualTimes) {
    Scheduler s(paused());
    s.block_on([]() -> Task<void> {
        const std::int64_t start = Scheduler::now_ns();
        std::vector<int> order;
        std::vector<std::int64_t> at;
        auto sleeper = [&](int id, std::chrono::seconds d) -> Task<void> {
            (void)co_await sleep(d);
            order.push_back(id);
            at.push_back(since(start));
        };
        co_await when_all(sleeper(3, 3600s), sleeper(1, 60s), sleeper(2, 600s));
        CO_ASSERT((order == std::vector<int>{1, 2, 3}));
        CO_ASSERT(
            (at == std::vector<std::int64_t>{60'000'000'000, 600'000'000'000, 3'600'000'000'000}));
        // galay::timeout over a task too.
        auto r = co_await timeout(5s, [&]() -> Task<void> { (void)co_await sleep(1h); }());
        CO_ASSERT(!r);
        CO_ASSERT(since(start) == std::chrono::nanoseconds(3605s).count());
    }());
}

TEST_P(PausedClockTest, ABlockingJobHoldsTheClockUntilItIsDone) {
    Scheduler s(paused());
    s.block_on([]() -> Task<void> {
        const std::int64_t start = Scheduler::now_ns();
        // The job takes real time; its 1 ms virtual deadline must not pass while it runs, or
        // every spawn_blocking under a paused clock would time out at once.
        auto r = co_await timeout(1ms, [&]() -> Task<int> {
            auto v = co_await spawn_blocking([] {
                std::this_thread::sleep_for(20ms); // the job's work, not a synchronisation
                return 7;
            });
            co_return v ? *v : -1;
        }());
        CO_ASSERT(r && *r == 7);
        CO_ASSERT(since(start) == 0);
    }());
}

TEST_P(PausedClockTest, AFileOperationInTheKernelHoldsTheClock) {
    char path[] = "/tmp/galay-paused-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    const std::string data(1 << 20, 'f');
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ::close(fd);
    Scheduler s(paused());
    s.block_on([](const char* path, const std::string& data) -> Task<void> {
        auto f = fs::File::open(path, {.read = true, .write = true});
        CO_ASSERT(f);
        const std::int64_t start = Scheduler::now_ns();
        // Each op has a 1 ns virtual deadline and nothing else runs: were time to jump while the
        // op is in the kernel (or on the pool), every one of them would time out.
        std::string back(data.size(), '\0');
        for (int i = 0; i < 8; ++i) {
            auto w = co_await f->write_at(std::span(data.data(), data.size()), 0).timeout(1ns);
            CO_ASSERT(w && *w == data.size());
            auto r = co_await f->read_at(std::span(back.data(), back.size()), 0).timeout(1ns);
            CO_ASSERT(r && *r == data.size());
            auto sync = co_await f->fsync().timeout(1ns);
            CO_ASSERT(sync);
        }
        CO_ASSERT(back == data);
        CO_ASSERT(since(start) == 0);
        // With nothing in flight the same deadline passes at once.
        const std::int64_t before_sleep = Scheduler::now_ns();
        (void)co_await sleep(1s);
        CO_ASSERT(since(before_sleep) == std::chrono::nanoseconds(1s).count());
    }(path, data));
    ::unlink(path);
}

TEST_P(PausedClockTest, ARuntimeWorkerRunsOnItsOwnVirtualClock) {
    RuntimeOptions o;
    o.workers = 1;
    o.scheduler = paused();
    Runtime rt(o);
    const std::int64_t elapsed = rt.block_on([]() -> Task<std::int64_t> {
        const std::int64_t start = Scheduler::now_ns();
        (void)co_await sleep(24h);
        co_return since(start);
    }());
    EXPECT_EQ(elapsed, std::chrono::nanoseconds(24h).count());
}

GALAY_INSTANTIATE_BACKENDS(PausedClockTest);

} // namespace
