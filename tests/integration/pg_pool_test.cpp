// The PostgreSQL pool of examples/pg on both backends, against a real server
// (support/postgres.hpp): parameters and NULLs, 1,000 queries in flight over 4 connections (one
// at a time per connection, and in pipeline mode), an error inside a pipeline, a query past its
// timeout cancelled on the server, a wrong password, a server that is down or stops, a restart
// in the middle of a load (every query ends, the pool recovers), and pg_http answering curl.
// Batches: results in order (mixed statements, split over connections, with and without
// pipeline mode), an error in the middle of one, its timeout, a server restart while one runs,
// a waiter cancelled while its batch (in its frame) is half sent and half queued.
// Every wait is bounded: a query carries a timeout, a process a deadline.
#include "pg_pool.hpp"
#include "support/backends.hpp"
#include "support/postgres.hpp"
#include "support/process.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace galay {
namespace {

using namespace std::chrono_literals;
using test::PostgresServer;

#define SKIP_WITHOUT_POSTGRES()                                                                    \
    if (auto why = test::postgres_missing()) GTEST_SKIP() << "SKIP: " << *why

class PgPoolTest : public test::BackendTest {};

pg::Options pool_options(const std::string& conninfo, int conns, bool pipeline = false) {
    pg::Options o;
    o.conninfo = conninfo;
    o.connections = conns;
    o.pipeline = pipeline;
    o.connect_timeout = 20s;
    o.query_timeout = 30s; // every query in these tests ends by then, whatever happens
    return o;
}

std::string describe(const pg::QueryResult& r) {
    if (r) return "ok";
    return std::string(pg::kind_name(r.error().kind)) + ": " + r.error().message;
}

TEST_P(PgPoolTest, QueriesWithParametersNullsAndErrors) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.tcp_conninfo(), 2));
        CO_ASSERT(pool);
        auto sum = co_await pool->query("SELECT $1::int + $2::int", 40, 2);
        CO_ASSERT(sum);
        EXPECT_EQ(sum->get(0, 0), "42");
        EXPECT_EQ(sum->command_tag(), "SELECT 1");
        auto text = co_await pool->query("SELECT $1::text AS a, $2::text AS b, $3::bool", "it's",
                                         nullptr, true);
        CO_ASSERT(text);
        EXPECT_EQ(text->column_name(0), "a");
        EXPECT_EQ(text->get(0, 0), "it's");
        EXPECT_TRUE(text->is_null(0, 1));
        EXPECT_EQ(text->get(0, 2), "t");
        auto rows = co_await pool->query("SELECT generate_series(1, $1::int)", 5);
        CO_ASSERT(rows);
        EXPECT_EQ(rows->rows(), 5);
        EXPECT_EQ(rows->get(4, 0), "5");
        auto bad = co_await pool->query("SELECT 1 / $1::int", 0);
        CO_ASSERT(!bad);
        EXPECT_EQ(bad.error().kind, pg::ErrorKind::server);
        EXPECT_EQ(bad.error().sqlstate, "22012");
        EXPECT_NE(bad.error().message.find("division by zero"), std::string::npos);
        auto after = co_await pool->query("SELECT 'still fine'");
        CO_ASSERT(after);
        EXPECT_EQ(after->get(0, 0), "still fine");
    }());
}

/// `n` queries `SELECT $1::int` with distinct values, all in flight at once; how many came back
/// right (and the first wrong one in `wrong`).
Task<int> many_at_once(pg::Pool& pool, int n, std::string& wrong) {
    std::vector<JoinHandle<pg::QueryResult>> all;
    for (int i = 0; i < n; ++i)
        all.push_back(spawn([](pg::Pool& p, int v) -> Task<pg::QueryResult> {
            co_return co_await p.query("SELECT $1::int * 2", v);
        }(pool, i)));
    int right = 0;
    for (int i = 0; i < n; ++i) {
        pg::QueryResult r = co_await all[static_cast<std::size_t>(i)];
        if (r && r->get(0, 0) == std::to_string(2 * i))
            ++right;
        else if (wrong.empty())
            wrong = r ? "got " + std::string(r->get(0, 0)) : describe(r);
    }
    co_return right;
}

TEST_P(PgPoolTest, AThousandQueriesInFlightOverFourConnections) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.tcp_conninfo(), 4));
        CO_ASSERT(pool);
        std::string wrong;
        const int right = co_await many_at_once(*pool, 1000, wrong);
        EXPECT_EQ(right, 1000) << wrong;
        EXPECT_EQ(pool->stats().connections_up, 4);
    }());
}

TEST_P(PgPoolTest, PipelineModeCarriesThemAll) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.socket_conninfo(), 4, true));
        CO_ASSERT(pool);
        std::string wrong;
        const int right = co_await many_at_once(*pool, 1000, wrong);
        EXPECT_EQ(right, 1000) << wrong;
        // The server counts the statements: 1,000 went over 4 backends.
        auto n = co_await pool->query("SELECT count(*) FROM pg_stat_activity WHERE "
                                      "backend_type = 'client backend' AND datname = 'postgres'");
        CO_ASSERT(n);
        EXPECT_EQ(n->get(0, 0), "4");
    }());
}

/// One query as a task of its own (to have several in flight from one test task).
Task<pg::QueryResult> ask(pg::Pool& pool, std::string sql, std::vector<pg::Param> params) {
    co_return co_await pool.query_params(std::move(sql), std::move(params));
}

TEST_P(PgPoolTest, AnErrorInAPipelineFailsItsGroupOnly) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.socket_conninfo(), 1, true));
        CO_ASSERT(pool);
        // Sent in one turn of the loop: one sync group, the failing query in the middle.
        auto first = spawn(ask(*pool, "SELECT $1::int", {"1"}));
        auto bad = spawn(ask(*pool, "SELECT 1 / $1::int", {"0"}));
        auto skipped = spawn(ask(*pool, "SELECT $1::int", {"3"}));
        pg::QueryResult r1 = co_await first;
        pg::QueryResult r2 = co_await bad;
        pg::QueryResult r3 = co_await skipped;
        CO_ASSERT(r1);
        EXPECT_EQ(r1->get(0, 0), "1");
        CO_ASSERT(!r2);
        EXPECT_EQ(r2.error().kind, pg::ErrorKind::server);
        EXPECT_EQ(r2.error().sqlstate, "22012");
        CO_ASSERT(!r3);
        EXPECT_EQ(r3.error().kind, pg::ErrorKind::pipeline_aborted) << describe(r3);
        // The next group runs.
        auto again = co_await pool->query("SELECT $1::int", 4);
        CO_ASSERT(again);
        EXPECT_EQ(again->get(0, 0), "4");
    }());
}

TEST_P(PgPoolTest, AQueryPastItsTimeoutIsCancelledOnTheServer) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        // One connection: the next query can only run once the sleep has ended, which without
        // the cancel would be 60 s away (past its 20 s timeout).
        auto pool = co_await pg::Pool::open(pool_options(server.tcp_conninfo(), 1));
        CO_ASSERT(pool);
        auto slow = co_await pool->query("SELECT pg_sleep(60)").timeout(200ms);
        CO_ASSERT(!slow);
        EXPECT_EQ(slow.error().kind, pg::ErrorKind::timeout) << describe(slow);
        EXPECT_EQ(pool->stats().cancels_sent, 1u);
        auto next = co_await pool->query("SELECT $1::int", 7).timeout(20s);
        CO_ASSERT(next);
        EXPECT_EQ(next->get(0, 0), "7");
        EXPECT_EQ(pool->stats().connections_lost, 0u);
    }());
}

TEST_P(PgPoolTest, AWrongPasswordIsAClearError) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.tcp_conninfo("wrong"), 2));
        CO_ASSERT(!pool);
        EXPECT_EQ(pool.error().kind, pg::ErrorKind::connect);
        EXPECT_NE(pool.error().message.find("password authentication failed"), std::string::npos)
            << pool.error().message;
    }());
}

TEST_P(PgPoolTest, AServerThatIsDownIsAClearError) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    const std::string conninfo = server.tcp_conninfo();
    server.stop(); // nobody listens on its port now
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(conninfo, 2));
        CO_ASSERT(!pool);
        EXPECT_EQ(pool.error().kind, pg::ErrorKind::connect);
        EXPECT_NE(pool.error().message.find("Connection refused"), std::string::npos)
            << pool.error().message;
    }());
}

TEST_P(PgPoolTest, AServerThatStopsEndsTheQueriesInFlight) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.tcp_conninfo(), 2));
        CO_ASSERT(pool);
        auto sleeping = spawn(ask(*pool, "SELECT pg_sleep(60)", {}));
        // Stopping waits for the server's exit: on the blocking pool, while this loop serves.
        auto stopped = co_await spawn_blocking([&] { server.stop(); });
        CO_ASSERT(stopped);
        pg::QueryResult r = co_await sleeping;
        CO_ASSERT(!r);
        EXPECT_TRUE(r.error().kind == pg::ErrorKind::connection_lost ||
                    r.error().kind == pg::ErrorKind::server)
            << describe(r);
        // No server: a new query ends with the connection error, not at its timeout.
        auto later = co_await pool->query("SELECT 1");
        CO_ASSERT(!later);
        EXPECT_EQ(later.error().kind, pg::ErrorKind::connect) << describe(later);
        EXPECT_NE(later.error().message.find("Connection refused"), std::string::npos)
            << describe(later);
    }());
}

/// The load of the restart test: `tasks` tasks each running queries one after the other until
/// `stop`, every query with a timeout; the counts of what came back.
struct Load {
    std::mutex m;
    std::condition_variable cv;
    long ok = 0, errors = 0, ok_after_restart = 0;
    bool restarted = false, stop = false;
    std::string wrong; ///< a wrong value (never acceptable)
    std::string error_kinds;

    void count(const pg::QueryResult& r, int v) {
        std::lock_guard lock(m);
        if (r && r->get(0, 0) == std::to_string(v)) {
            ++ok;
            ok_after_restart += restarted;
        } else if (r) {
            wrong = "sent " + std::to_string(v) + ", got " + std::string(r->get(0, 0));
        } else {
            ++errors;
            const std::string k = pg::kind_name(r.error().kind);
            if (error_kinds.find(k) == std::string::npos) error_kinds += k + ";";
        }
        cv.notify_all();
    }
    bool stopping() {
        std::lock_guard lock(m);
        return stop;
    }
};

Task<void> load_task(pg::Pool& pool, Load& load, int id) {
    for (int i = 0; !load.stopping(); ++i) {
        const int v = id * 1'000'000 + i;
        auto r = co_await pool.query("SELECT $1::int", v).timeout(20s);
        load.count(r, v);
        if (!r) co_await sleep(10ms); // a retry's pace while the server is away
    }
}

TEST_P(PgPoolTest, AServerRestartUnderLoadEndsEveryQueryAndThePoolRecovers) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    Load load;
    pg::Stats stats;
    // The pool runs on a thread of its own: this one restarts the server (the fixture must be
    // started from the thread it lives on).
    std::thread client([&] {
        run([&]() -> Task<void> {
            auto pool = co_await pg::Pool::open(pool_options(server.tcp_conninfo(), 4));
            if (!pool) {
                std::lock_guard lock(load.m);
                load.wrong = "open: " + pool.error().message;
                load.stop = true;
                load.cv.notify_all();
                co_return;
            }
            std::vector<JoinHandle<void>> tasks;
            for (int id = 0; id < 64; ++id)
                tasks.push_back(spawn(load_task(*pool, load, id)));
            for (auto& t : tasks)
                co_await t; // each ends once `stop` is set and its query has ended
            // The load can finish on the first connection back while the others still sit in
            // their reconnect backoff (at most 2 s): the pool must bring them all back, so look
            // until it has, within a bound far beyond that backoff.
            for (int i = 0; i < 3000 && pool->stats().connections_up < 4; ++i)
                co_await sleep(10ms);
            stats = pool->stats();
        }());
    });
    auto wait_until = [&](auto pred) {
        std::unique_lock lock(load.m);
        return load.cv.wait_for(lock, 60s, [&] { return pred() || load.stop; }) && pred();
    };
    EXPECT_TRUE(wait_until([&] { return load.ok >= 500; })) << load.wrong;
    server.restart();
    {
        std::lock_guard lock(load.m);
        load.restarted = true;
    }
    EXPECT_TRUE(wait_until([&] { return load.ok_after_restart >= 500; }))
        << "errors " << load.errors << " (" << load.error_kinds << ")";
    {
        std::lock_guard lock(load.m);
        load.stop = true;
    }
    client.join();
    EXPECT_EQ(load.wrong, "");
    EXPECT_GE(load.ok_after_restart, 500);
    EXPECT_GE(stats.connections_lost, 1u);
    EXPECT_GE(stats.reconnects, 1u);
    EXPECT_EQ(stats.connections_up, 4);
}

TEST_P(PgPoolTest, PgHttpAnswersCurlWithTheQuerysResult) {
    SKIP_WITHOUT_POSTGRES();
    if (test::run_process({"curl", "--version"}).exit_code != 0)
        GTEST_SKIP() << "SKIP: curl is not installed";
    PostgresServer server;
    test::Process http({PG_HTTP_BIN, "--dsn", server.tcp_conninfo(), "--port", "0", "--backend",
                        backend_name(GetParam()), "--conns", "2"});
    ASSERT_TRUE(http.wait_for("listening on http://", false, 60s)) << http.err();
    ASSERT_TRUE(http.wait_for("(", false, 10s)) << http.out();
    const std::string out = http.out();
    const auto at = out.find("http://");
    const std::string base = out.substr(at, out.find(' ', at) - at);
    auto sum =
        test::run_process({"curl", "-sS", "-w", " %{http_code}", base + "/sum?a=40&b=2"}, 30s);
    EXPECT_EQ(sum.exit_code, 0) << sum.err;
    EXPECT_EQ(sum.out, "42\n 200");
    auto bad =
        test::run_process({"curl", "-sS", "-w", " %{http_code}", base + "/sum?a=x&b=2"}, 30s);
    EXPECT_NE(bad.out.find("invalid input syntax for type integer"), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find(" 400"), std::string::npos) << bad.out;
    auto missing = test::run_process({"curl", "-sS", "-w", " %{http_code}", base + "/nope"}, 30s);
    EXPECT_NE(missing.out.find(" 404"), std::string::npos) << missing.out;
    http.signal(SIGTERM);
    auto end = http.finish(30s);
    EXPECT_TRUE(end.exited && end.exit_code == 0) << end.exit_code << " " << end.err;
}

TEST_P(PgPoolTest, PgQueryPrintsRowsAndSaysWhatWentWrong) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    const std::string be = backend_name(GetParam());
    auto ok = test::run_process({PG_QUERY_BIN, "--backend", be, "--dsn", server.tcp_conninfo(),
                                 "SELECT $1::int + $2::int, $3::text", "1", "2", "\\N"},
                                60s);
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_EQ(ok.out, "3\t\\N\n");
    auto wrong = test::run_process(
        {PG_QUERY_BIN, "--backend", be, "--dsn", server.tcp_conninfo("wrong"), "SELECT 1"}, 60s);
    EXPECT_EQ(wrong.exit_code, 1);
    EXPECT_NE(wrong.err.find("pg_query: connect: "), std::string::npos) << wrong.err;
    EXPECT_NE(wrong.err.find("password authentication failed"), std::string::npos) << wrong.err;
    auto usage = test::run_process({PG_QUERY_BIN, "--conns", "x", "--dsn", "d", "SELECT 1"}, 60s);
    EXPECT_EQ(usage.exit_code, 2);
    EXPECT_EQ(
        usage.err,
        "pg_query: error: --conns: 'x' is not a whole number (expected 1 .. 1000) (see --help)\n");
    auto help = test::run_process({PG_QUERY_BIN, "--help"}, 60s);
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("Usage: pg_query"), std::string::npos);
}

/// A batch of `n` queries `SELECT $1::int * 2` (values from `first`), every fifth one
/// `SELECT $1::text` instead (a batch mixes statements).
pg::Batch doubling(int first, int n) {
    pg::Batch b;
    for (int v = first; v < first + n; ++v)
        if (v % 5 == 0)
            b.add("SELECT $1::text", "t" + std::to_string(v));
        else
            b.add("SELECT $1::int * 2", v);
    return b;
}

/// How many of `rs` (from doubling(first, ...)) are right; the first wrong one in `wrong`.
int right_answers(const std::vector<pg::QueryResult>& rs, int first, std::string& wrong) {
    int right = 0;
    for (std::size_t i = 0; i < rs.size(); ++i) {
        const int v = first + static_cast<int>(i);
        const std::string want = v % 5 == 0 ? "t" + std::to_string(v) : std::to_string(2 * v);
        if (rs[i] && rs[i]->get(0, 0) == want)
            ++right;
        else if (wrong.empty())
            wrong = "#" + std::to_string(i) + ": " +
                    (rs[i] ? std::string(rs[i]->get(0, 0)) : describe(rs[i]));
    }
    return right;
}

TEST_P(PgPoolTest, ABatchGivesItsResultsInOrder) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    for (const bool pipeline : {true, false}) {
        run([&]() -> Task<void> {
            auto opts = pool_options(server.socket_conninfo(), 3, pipeline);
            opts.max_inflight = 40; // a batch of 100 is split over the connections
            auto pool = co_await pg::Pool::open(std::move(opts));
            CO_ASSERT(pool);
            // Several batches at once from several tasks, and a single query among them.
            std::vector<JoinHandle<std::vector<pg::QueryResult>>> batches;
            for (int k = 0; k < 4; ++k)
                batches.push_back(
                    spawn([](pg::Pool& p, int first) -> Task<std::vector<pg::QueryResult>> {
                        co_return co_await p.run(doubling(first, 100));
                    }(*pool, k * 1000)));
            auto one = co_await pool->query("SELECT $1::int", 7);
            CO_ASSERT(one);
            EXPECT_EQ(one->get(0, 0), "7");
            for (int k = 0; k < 4; ++k) {
                std::vector<pg::QueryResult> rs = co_await batches[static_cast<std::size_t>(k)];
                std::string wrong;
                CO_ASSERT(rs.size() == 100u);
                EXPECT_EQ(right_answers(rs, k * 1000, wrong), 100)
                    << "pipeline " << pipeline << " " << wrong;
            }
            auto none = co_await pool->run(pg::Batch{});
            EXPECT_TRUE(none.empty());
            EXPECT_EQ(pool->stats().connections_lost, 0u);
        }());
    }
}

// A Batch keeps a small query in the object itself and a larger one on the heap: copied,
// moved, cleared and built again, each copy runs its own queries.
TEST_P(PgPoolTest, ABatchCopiedMovedOrRebuiltRunsItsOwnQueries) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.socket_conninfo(), 1));
        CO_ASSERT(pool);
        const std::string wide(300, 'w'); // past the room kept in the object
        pg::Batch small;
        small.add("SELECT $1::int", 5);
        pg::Batch big;
        big.add("SELECT $1::text || $2 || $3 || $4 || $5 || $6", wide, "a", "b", "c", "d", "e");
        pg::Batch small_copy = small;
        pg::Batch big_copy = big;
        pg::Batch moved = std::move(small);
        small.add("SELECT $1::int", 9); // moved from: empty, and usable again
        big.clear();
        big.add("SELECT $1::text", "rebuilt");
        const std::vector<std::pair<const pg::Batch*, std::string>> want = {
            {&small, "9"},
            {&small_copy, "5"},
            {&moved, "5"},
            {&big, "rebuilt"},
            {&big_copy, wide + "abcde"}};
        for (const auto& [b, value] : want) {
            std::vector<pg::QueryResult> rs = co_await pool->run(*b);
            CO_ASSERT(rs.size() == 1u);
            CO_ASSERT(rs[0]);
            EXPECT_EQ(rs[0]->get(0, 0), value);
        }
    }());
}

TEST_P(PgPoolTest, RunEachHandsEveryResultOverInOrder) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.socket_conninfo(), 2, true));
        CO_ASSERT(pool);
        std::vector<pg::QueryResult> got;
        std::vector<std::size_t> order;
        auto keep = [&](std::size_t i, pg::QueryResult&& r) {
            order.push_back(i);
            got.push_back(std::move(r));
        };
        pg::Batch b = doubling(1, 50);
        b.add("SELECT 1 / $1::int", 0).add("SELECT $1::int", 51); // fails, then skipped
        co_await pool->run_each(std::move(b), keep);
        CO_ASSERT(got.size() == 52u);
        for (std::size_t i = 0; i < order.size(); ++i)
            EXPECT_EQ(order[i], i);
        CO_ASSERT(!got[50] && !got[51]);
        EXPECT_EQ(got[50].error().sqlstate, "22012");
        EXPECT_EQ(got[51].error().kind, pg::ErrorKind::pipeline_aborted) << describe(got[51]);
        std::string wrong;
        got.erase(got.begin() + 50, got.end());
        EXPECT_EQ(right_answers(got, 1, wrong), 50) << wrong;
        // Past its timeout: what came was handed over, the rest end with `timeout`, once each.
        got.clear();
        order.clear();
        pg::Batch slow;
        slow.add("SELECT pg_sleep(60)").add("SELECT $1::int", 2);
        co_await pool->run_each(std::move(slow), keep).timeout(300ms);
        CO_ASSERT(got.size() == 2u);
        for (const auto& r : got) {
            CO_ASSERT(!r);
            EXPECT_EQ(r.error().kind, pg::ErrorKind::timeout) << describe(r);
        }
        co_await pool->run_each(pg::Batch{}, keep); // nothing to hand over
        EXPECT_EQ(got.size(), 2u);
        EXPECT_EQ(pool->stats().cancels_sent, 1u);
    }());
}

TEST_P(PgPoolTest, AnErrorInABatchSkipsTheRestOfItOnly) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    run([&]() -> Task<void> {
        auto pool = co_await pg::Pool::open(pool_options(server.socket_conninfo(), 1, true));
        CO_ASSERT(pool);
        // Two batches sent in the same turn on the one connection: each is its own sync group.
        auto other = spawn([](pg::Pool& p) -> Task<std::vector<pg::QueryResult>> {
            co_return co_await p.run(doubling(1, 8));
        }(*pool));
        pg::Batch b;
        b.add("SELECT $1::int", 1).add("SELECT 1 / $1::int", 0).add("SELECT $1::int", 3);
        b.add_params("SELECT $1::int", {"4"});
        std::vector<pg::QueryResult> rs = co_await pool->run(std::move(b));
        CO_ASSERT(rs.size() == 4u);
        CO_ASSERT(rs[0]);
        EXPECT_EQ(rs[0]->get(0, 0), "1");
        CO_ASSERT(!rs[1]);
        EXPECT_EQ(rs[1].error().kind, pg::ErrorKind::server);
        EXPECT_EQ(rs[1].error().sqlstate, "22012");
        for (std::size_t i : {2u, 3u}) {
            CO_ASSERT(!rs[i]);
            EXPECT_EQ(rs[i].error().kind, pg::ErrorKind::pipeline_aborted) << describe(rs[i]);
        }
        std::vector<pg::QueryResult> others = co_await other;
        std::string wrong;
        EXPECT_EQ(right_answers(others, 1, wrong), 8) << wrong;
        auto again = co_await pool->run(doubling(20, 5));
        EXPECT_EQ(right_answers(again, 20, wrong), 5) << wrong;
    }());
}

TEST_P(PgPoolTest, ABatchPastItsTimeoutKeepsWhatCameAndCancelsTheRest) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    for (const bool pipeline : {true, false}) {
        run([&]() -> Task<void> {
            // One connection: the next query can only run once the sleep has ended, which
            // without the cancel would be 60 s away (past its 20 s timeout).
            auto pool = co_await pg::Pool::open(pool_options(server.tcp_conninfo(), 1, pipeline));
            CO_ASSERT(pool);
            pg::Batch b;
            b.add("SELECT $1::int", 1).add("SELECT pg_sleep(60)").add("SELECT $1::int", 3);
            auto rs = co_await pool->run(std::move(b)).timeout(300ms);
            CO_ASSERT(rs.size() == 3u);
            // Pipelined, the first result may wait for the group's end: answered or timed out.
            if (!pipeline) {
                CO_ASSERT(rs[0]);
                EXPECT_EQ(rs[0]->get(0, 0), "1");
            } else if (!rs[0]) {
                EXPECT_EQ(rs[0].error().kind, pg::ErrorKind::timeout) << describe(rs[0]);
            }
            for (std::size_t i : {1u, 2u}) {
                CO_ASSERT(!rs[i]);
                EXPECT_EQ(rs[i].error().kind, pg::ErrorKind::timeout) << describe(rs[i]);
            }
            EXPECT_EQ(pool->stats().cancels_sent, 1u);
            auto next = co_await pool->run(doubling(1, 4)).timeout(20s);
            std::string wrong;
            EXPECT_EQ(right_answers(next, 1, wrong), 4) << "pipeline " << pipeline << " " << wrong;
            EXPECT_EQ(pool->stats().connections_lost, 0u);
        }());
    }
}

/// Awaits a batch that lives in this frame (a sleep that only a cancel ends, then six more) with
/// run or run_each; `started` is set just before, `got` says how each of its results ended.
Task<void> batch_in_frame(pg::Pool& pool, bool each, bool& started, std::vector<std::string>& got) {
    pg::Batch b;
    b.add("SELECT pg_sleep(60)");
    for (int v = 1; v <= 6; ++v)
        b.add("SELECT $1::int", v);
    started = true;
    if (each) {
        co_await pool.run_each(
            b, [&](std::size_t, pg::QueryResult&& r) { got.push_back(describe(r)); });
    } else {
        std::vector<pg::QueryResult> rs = co_await pool.run(b);
        for (const auto& r : rs)
            got.push_back(describe(r));
    }
}

TEST_P(PgPoolTest, AWaiterCancelledMidBatchLeavesNothingOfItInThePool) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    for (const bool pipeline : {true, false})
        for (const bool each : {false, true})
            run([&]() -> Task<void> {
                // One connection with room for two: the batch's first queries are sent, the
                // rest wait in the pool's queue. The waiter's frame (its batch, its call) is
                // gone once it is cancelled; the results that come for it later, and the queue,
                // must not touch it (ASan sees it if they do), and the pool goes on. A pool of
                // its own each time: a cancel names a backend, and acts on what it runs when
                // the signal lands.
                const std::string which =
                    "pipeline " + std::to_string(pipeline) + " each " + std::to_string(each);
                auto opts = pool_options(server.tcp_conninfo(), 1, pipeline);
                opts.max_inflight = 2;
                auto pool = co_await pg::Pool::open(std::move(opts));
                CO_ASSERT(pool);
                auto watch = co_await pg::Pool::open(pool_options(server.tcp_conninfo(), 1));
                CO_ASSERT(watch);
                CancelSource stop;
                bool started = false;
                std::vector<std::string> got;
                auto waiter = spawn(with_cancel(stop, batch_in_frame(*pool, each, started, got)));
                while (!started)
                    co_await yield_now();
                // A cancel reaches only a statement the server runs: wait until it runs it.
                bool sleeping = false;
                std::string seen;
                for (int tries = 0; tries < 5000 && !sleeping; ++tries) {
                    auto n = co_await watch->query(
                        "SELECT string_agg(state || ':' || query, ',') FROM pg_stat_activity "
                        "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()");
                    seen = n ? std::string(n->get(0, 0)) : describe(n);
                    sleeping = seen.find("active:SELECT pg_sleep(60)") != std::string::npos;
                }
                EXPECT_TRUE(sleeping) << which << ": " << seen;
                CO_ASSERT(sleeping);
                stop.cancel();
                co_await waiter;
                EXPECT_EQ(got.size(), 7u) << which;
                for (const std::string& g : got)
                    EXPECT_EQ(g, "timeout: cancelled") << which;
                auto next = co_await pool->run(doubling(1, 8)).timeout(20s);
                std::string wrong;
                EXPECT_EQ(right_answers(next, 1, wrong), 8) << which << " " << wrong;
                EXPECT_EQ(pool->stats().cancels_sent, 1u) << which;
                EXPECT_EQ(pool->stats().connections_lost, 0u) << which;
            }());
}

TEST_P(PgPoolTest, AServerRestartMidBatchEndsItAndThePoolRecovers) {
    SKIP_WITHOUT_POSTGRES();
    PostgresServer server;
    std::mutex m;
    std::vector<pg::QueryResult> during, after;
    std::string problem;
    // The pool runs on a thread of its own: this one restarts the server (the fixture must be
    // started from the thread it lives on).
    std::thread client([&] {
        run([&]() -> Task<void> {
            auto pool = co_await pg::Pool::open(pool_options(server.tcp_conninfo(), 1, true));
            if (!pool) {
                std::lock_guard lock(m);
                problem = "open: " + pool.error().message;
                co_return;
            }
            pg::Batch b;
            b.add("SELECT $1::int", 1).add("SELECT pg_sleep(60)").add("SELECT $1::int", 3);
            auto rs = co_await pool->run(std::move(b)); // 30 s at most (pool_options)
            // Once the server is back the pool reconnects: a batch that finds no connection yet
            // ends with `connect` at once, one sent on the connection the server is closing
            // with `connection_lost`; 200 tries are bounded by their timeouts.
            std::vector<pg::QueryResult> next;
            for (int tries = 0; tries < 200; ++tries) {
                next = co_await pool->run(doubling(1, 6)).timeout(20s);
                // A batch sent just as the server closed the old connection ends with it.
                const bool again =
                    !next[0] && (next[0].error().kind == pg::ErrorKind::connect ||
                                 next[0].error().kind == pg::ErrorKind::connection_lost);
                if (!again) break;
                co_await sleep(20ms); // a retry's pace while the server is away
            }
            std::lock_guard lock(m);
            during = std::move(rs);
            after = std::move(next);
        }());
    });
    // Restart once the sleep runs on the server (it is then in flight on the pool's connection).
    PGconn* watch = PQconnectdb(server.socket_conninfo().c_str());
    bool seen = false;
    for (auto until = std::chrono::steady_clock::now() + 30s;
         !seen && std::chrono::steady_clock::now() < until;) {
        PGresult* r = PQexec(watch, "SELECT count(*) FROM pg_stat_activity WHERE "
                                    "state = 'active' AND query = 'SELECT pg_sleep(60)'");
        seen = PQresultStatus(r) == PGRES_TUPLES_OK && std::string(PQgetvalue(r, 0, 0)) == "1";
        PQclear(r);
        if (!seen) std::this_thread::sleep_for(5ms); // a poll of the server's state
    }
    PQfinish(watch);
    EXPECT_TRUE(seen) << "the batch's sleep never ran";
    server.restart();
    client.join();
    EXPECT_EQ(problem, "");
    ASSERT_EQ(during.size(), 3u);
    for (std::size_t i = 1; i < 3; ++i) {
        ASSERT_FALSE(during[i]) << i;
        const pg::ErrorKind k = during[i].error().kind;
        EXPECT_TRUE(k == pg::ErrorKind::connection_lost || k == pg::ErrorKind::server ||
                    k == pg::ErrorKind::pipeline_aborted)
            << i << ": " << describe(during[i]);
    }
    std::string wrong;
    EXPECT_EQ(right_answers(after, 1, wrong), 6) << wrong;
}

GALAY_INSTANTIATE_BACKENDS(PgPoolTest);

} // namespace
} // namespace galay
