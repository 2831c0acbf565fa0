// pg_threads: what a program does today when it has no event loop for libpq: N threads, each
// with its own blocking connection (PQconnectdb) running `SELECT $1::int` with PQexecParams
// (PQexecPrepared with --prepared, after one PQprepare) in a loop, one query in flight each.
//
//   pg_threads --conninfo STR [--connections 16] [--duration 5] [--warmup 1] [--prepared] [--json]
//
// Every reply is checked against the parameter sent (bench/baselines/pg_client.hpp). Measured:
// queries completed, wall time and this process's CPU (getrusage, all threads) over --duration
// seconds after --warmup; then each thread finishes the query it is in (10 s at most) and
// disconnects. A connection lost ends its thread with one error; the run ends early when every
// one is lost. Exit 0 with no error, 1 with errors or when a connection cannot be made (one line
// with libpq's message), 2 on bad flags. The JSON has the fields of raw_pg's (mode "single",
// depth 1).
#include "pg_client.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr const char* kTool = "pg_threads";

using Options = foreign::pg::Options;

/// One thread's counts, each on its own cache line; written by that thread only.
struct alignas(64) Counter {
    std::atomic<std::uint64_t> done{0};
};

struct Shared {
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::condition_variable ended; ///< a thread finished (`finished` counts them)
    int finished = 0;
    std::uint64_t errors = 0;
    std::string first_error, connect_error;
    int lost = 0;

    void error(const std::string& what, bool connection_lost) {
        std::lock_guard lock(mu);
        if (errors++ == 0) first_error = what;
        lost += connection_lost;
    }
};

void run_queries(const Options& o, int index, Counter& counter, Shared& shared,
                 std::latch& connected) {
    PGconn* c = PQconnectdb(o.conninfo.c_str());
    foreign::pg::quiet_notices(c);
    std::string why;
    if (PQstatus(c) != CONNECTION_OK)
        why = foreign::pg::one_line(PQerrorMessage(c));
    else if (o.prepared)
        why = foreign::pg::prepare(c);
    if (!why.empty()) {
        std::lock_guard lock(shared.mu);
        if (shared.connect_error.empty()) shared.connect_error = why;
    }
    connected.arrive_and_wait();
    bool go;
    {
        std::lock_guard lock(shared.mu);
        go = shared.connect_error.empty();
    }
    // Values index, index + N, index + 2N ...: distinct across the threads.
    for (std::uint64_t n = static_cast<std::uint64_t>(index);
         go && !shared.stop.load(std::memory_order_relaxed);
         n += static_cast<std::uint64_t>(o.connections)) {
        const std::int32_t v = foreign::pg::value_of(n);
        PGresult* r = foreign::pg::exec(c, o.prepared, v);
        const std::string wrong = foreign::pg::check(r, v);
        PQclear(r);
        if (wrong.empty()) {
            counter.done.store(counter.done.load(std::memory_order_relaxed) + 1,
                               std::memory_order_relaxed);
        } else if (PQstatus(c) == CONNECTION_BAD) {
            shared.error("connection lost: " + foreign::pg::one_line(PQerrorMessage(c)), true);
            break;
        } else {
            shared.error(wrong, false);
        }
    }
    PQfinish(c);
}

void worker(const Options& o, int index, Counter& counter, Shared& shared, std::latch& connected) {
    run_queries(o, index, counter, shared, connected);
    std::lock_guard lock(shared.mu);
    ++shared.finished;
    shared.ended.notify_all();
}

std::uint64_t total(const std::vector<Counter>& counters) {
    std::uint64_t n = 0;
    for (const Counter& c : counters)
        n += c.done.load(std::memory_order_relaxed);
    return n;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    cli::App app{"pg_threads: N threads, each a blocking libpq connection running SELECT $1::int "
                 "in a loop (a control of the PostgreSQL comparison)"};
    foreign::pg::add_options(app, o);
    if (auto code = foreign::parse(app, argc, argv, kTool)) return *code;
    foreign::pg::apply_heap(o);

    std::vector<Counter> counters(static_cast<std::size_t>(o.connections));
    Shared shared;
    std::latch connected(o.connections);
    std::vector<std::thread> threads;
    for (int i = 0; i < o.connections; ++i)
        threads.emplace_back(worker, std::cref(o), i,
                             std::ref(counters[static_cast<std::size_t>(i)]), std::ref(shared),
                             std::ref(connected));
    connected.wait();
    if (!shared.connect_error.empty()) {
        for (std::thread& t : threads)
            t.join();
        std::fprintf(stderr, "%s: connect: %s\n", kTool, shared.connect_error.c_str());
        return 1;
    }
    // Sleeps until `seconds` have passed, or less when every thread has ended (connections lost).
    auto pause = [&](double seconds) {
        std::unique_lock lock(shared.mu);
        shared.ended.wait_for(lock, std::chrono::duration<double>(seconds),
                              [&] { return shared.finished == o.connections; });
    };
    pause(o.warmup);
    const foreign::Mark from = foreign::Mark::now(total(counters));
    pause(o.duration);
    const foreign::Mark to = foreign::Mark::now(total(counters));
    shared.stop = true;
    // A thread blocked in a query the server never answers cannot be interrupted: after 10 s
    // each such one is an error, and the process exits without waiting for them.
    foreign::pg::Outcome r; // mode single, depth 1
    r.inflight = o.connections;
    r.from = from;
    r.to = to;
    int stuck = 0;
    {
        std::unique_lock lock(shared.mu);
        shared.ended.wait_for(lock, std::chrono::seconds(10),
                              [&] { return shared.finished == o.connections; });
        stuck = o.connections - shared.finished;
        for (int i = 0; i < stuck; ++i)
            if (shared.errors++ == 0) shared.first_error = "no reply within 10 s after the run";
        r.errors = shared.errors;
        r.first_error = shared.first_error;
        r.lost = shared.lost;
    }
    if (stuck == 0)
        for (std::thread& t : threads)
            t.join();

    r.total = total(counters);
    const int code = foreign::pg::report(kTool, o, r);
    if (stuck > 0) std::_Exit(1); // the stuck threads are never joined
    return code;
}
