// galay_pg: libpq driven by galay's loop through the PostgreSQL pool of examples/pg (AsyncFd),
// `SELECT $1::int` with the command line and JSON of raw_pg (bench/baselines/pg_epoll.cpp), the
// hand-written epoll loop it is compared with, plus the backend:
//
//   galay_pg --conninfo STR [--backend io_uring|epoll] [--connections 16] [--duration 5]
//            [--warmup 1] [--mode single|pipeline] [--depth 16] [--inflight 1000]
//            [--per-query] [--malloc-trim BYTES] [--json]
//
// The work per query is a user's: a task awaits its queries and checks each reply
// (pg_client.hpp's check, as raw_pg does) before it sends the next. `single`: one task per
// connection awaiting `pool.query(sql, value)`, so one query in flight on each. `pipeline`: the
// pool in pipeline mode, --inflight/--depth tasks each awaiting a pg::Batch of --depth queries
// (`pool.run(batch)`: one sync group), at most --inflight/--connections queries in flight per
// connection (rounded up to whole batches); with --per-query, --inflight tasks each awaiting
// `pool.query` instead (the queries sent in one turn of the loop share a sync, at most --depth).
// --prepared is refused: the pool sends unnamed statements only. --malloc-trim (every libpq
// client here takes it, 64 MiB unless told): with glibc's default a service that holds ~1,000
// results until their tasks run gives the heap's top back and faults it in again every turn.
//
// Measured: queries completed, wall time and this process's CPU (getrusage) over --duration
// seconds after --warmup; then no new query is sent and the ones in flight are waited for (10 s).
// A lost connection is made again by the pool; its queries in flight count as errors. Exit 0 with
// no error, 1 with errors, when the pool cannot connect (one line with libpq's message) or the
// backend cannot run here (one line: "galay_pg: backend io_uring unavailable: ..."), 2 on bad
// flags.
#include "pg_client.hpp"
#include "pg_pool.hpp"

#include <optional>
#include <string>
#include <vector>

namespace {

constexpr const char* kTool = "galay_pg";

struct Options : foreign::pg::Options, foreign::pg::ModeOptions {
    std::string backend = "io_uring";
    bool per_query = false, hold = false;
    bool batches() const { return pipeline() && !per_query; }
};

struct Run {
    Run(const Options& opts, pg::Pool* p)
        : o(opts)
        , pool(p) {}
    const Options& o;
    pg::Pool* pool;
    bool issuing = true;
    std::uint64_t next = 0, done = 0, errors = 0;
    std::string first_error;
    void error(const std::string& what) {
        if (errors++ == 0) first_error = what;
    }
};

galay::Task<void> worker(Run& run) {
    while (run.issuing) {
        const std::int32_t v = foreign::pg::value_of(run.next++);
        pg::QueryResult r = co_await run.pool->query(foreign::pg::kSql, v);
        if (!r) {
            run.error(std::string(pg::kind_name(r.error().kind)) + ": " + r.error().message);
            continue;
        }
        const std::string wrong = foreign::pg::check(r->raw(), v);
        if (wrong.empty())
            ++run.done;
        else
            run.error(wrong);
    }
}

/// A batch of --depth queries at a time: one wake-up per batch, not per query. The batch lives
/// in this frame and is built again in the same memory each time (nothing allocated per query
/// by the pool).
galay::Task<void> batch_worker(Run& run) {
    std::vector<std::int32_t> values;
    pg::Batch b;
    b.reserve(static_cast<std::size_t>(run.o.depth), 1,
              static_cast<std::size_t>(run.o.depth) * 16 + 32);
    while (run.issuing) {
        b.clear();
        values.clear();
        for (int i = 0; i < run.o.depth; ++i) {
            values.push_back(foreign::pg::value_of(run.next++));
            b.add(foreign::pg::kSql, values.back());
        }
        auto count = [&run, &values](std::size_t i, const pg::QueryResult& r) {
            const std::string wrong =
                r ? foreign::pg::check(r->raw(), values[i])
                  : std::string(pg::kind_name(r.error().kind)) + ": " + r.error().message;
            if (wrong.empty())
                ++run.done;
            else
                run.error(wrong);
        };
        if (run.o.hold) {
            std::vector<pg::QueryResult> all = co_await run.pool->run(b);
            for (std::size_t i = 0; i < all.size(); ++i)
                count(i, all[i]);
        } else {
            co_await run.pool->run_each(b, count);
        }
    }
}

galay::Task<int> bench(const Options& o) {
    pg::Options po;
    po.conninfo = o.conninfo;
    po.connections = o.connections;
    po.pipeline = o.pipeline();
    po.max_inflight = (o.inflight + o.connections - 1) / o.connections;
    if (o.batches()) po.max_inflight = (po.max_inflight + o.depth - 1) / o.depth * o.depth;
    po.sync_every = o.depth;
    po.connect_timeout = std::chrono::seconds(30);
    auto pool = co_await pg::Pool::open(std::move(po));
    if (!pool) {
        std::fprintf(stderr, "%s: connect: %s\n", kTool, pool.error().message.c_str());
        co_return 1;
    }
    Run run(o, &*pool);
    std::vector<galay::JoinHandle<void>> workers;
    const int tasks = o.batches()    ? (o.inflight + o.depth - 1) / o.depth
                      : o.pipeline() ? o.inflight
                                     : o.connections;
    for (int i = 0; i < tasks; ++i)
        workers.push_back(galay::spawn(o.batches() ? batch_worker(run) : worker(run)));
    const auto secs = [](double s) {
        return std::chrono::nanoseconds(static_cast<std::int64_t>(s * 1e9));
    };
    co_await galay::sleep(secs(o.warmup));
    const foreign::Mark from = foreign::Mark::now(run.done);
    co_await galay::sleep(secs(o.duration));
    const foreign::Mark to = foreign::Mark::now(run.done);
    run.issuing = false;
    const auto drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (auto& w : workers) {
        auto r = co_await w.deadline(drain_until);
        if (!r) {
            run.error("no reply within 10 s after the run");
            pool->close(); // ends what is left
            (void)co_await w;
        }
    }
    const pg::Stats st = pool->stats();
    const std::string label = std::string(kTool) + "/" + o.backend;
    co_return foreign::pg::report(
        label.c_str(), o,
        {o.mode, o.pipeline() ? o.depth : 1, o.pipeline() ? o.inflight : o.connections, from, to,
         run.done, run.errors, static_cast<int>(st.connections_lost), run.first_error});
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    cli::App app{"galay_pg: N libpq connections driven by galay's loop (the examples/pg pool), "
                 "SELECT $1::int, with raw_pg's command line and report"};
    foreign::pg::add_options(app, o);
    app.add_option("--backend", o.backend, "galay's backend")
        ->capture_default_str()
        ->check(cli::IsMember({"io_uring", "epoll"}));
    foreign::pg::add_mode_options(app, o);
    app.add_flag("--hold", o.hold,
                 "pipeline: take each batch's results together (pool.run) rather than each as "
                 "it is read (pool.run_each)");
    app.add_flag("--per-query", o.per_query,
                 "pipeline: one task per query (pool.query) rather than batches of --depth "
                 "(pool.run)");
    if (auto code = foreign::parse(app, argc, argv, kTool)) return *code;
    foreign::pg::apply_heap(o);
    if (o.prepared)
        return foreign::usage_error(kTool, "--prepared: the pool sends unnamed statements only");
    if (auto problem = foreign::pg::mode_problem(o, o); !problem.empty())
        return foreign::usage_error(kTool, problem);
    std::optional<galay::Scheduler> sched;
    try {
        sched.emplace(galay::SchedulerOptions{.backend = *galay::parse_backend(o.backend)});
    } catch (const std::exception& e) { // io_uring refused by the kernel, or not built in
        std::fprintf(stderr, "%s: backend %s unavailable: %s\n", kTool, o.backend.c_str(),
                     e.what());
        return 1;
    }
    return sched->block_on(bench(o));
}
