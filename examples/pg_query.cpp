// Runs one SQL query with parameters through the PostgreSQL pool on galay's loop (examples/pg)
// and prints its rows, tab-separated, a NULL as \N.
//   ./pg_query --dsn DSN [--conns N] [--timeout MS] [--backend B] SQL [PARAM...]
//   ./pg_query --dsn "host=/run/postgresql dbname=app" 'SELECT $1::int + $2::int' 1 2     -> 3
// Exit code: 0, 1 when the query or the connection fails (one line: "pg_query: <kind>:
// <message>"), 2 for a bad argument.
#include "pg_pool.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Options {
    std::string dsn;
    int conns = 1;
    long timeout_ms = 0;
    galay::Backend backend = galay::Backend::automatic;
    std::string sql;
    std::vector<pg::Param> params;
};

[[noreturn]] void bad(const std::string& flag, const std::string& problem) {
    std::fprintf(stderr, "pg_query: error: %s: %s (see --help)\n", flag.c_str(), problem.c_str());
    std::exit(2);
}

long number(const std::string& flag, std::string_view text, long min) {
    long v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < min)
        bad(flag, "'" + std::string(text) + "' is not a number >= " + std::to_string(min));
    return v;
}

Options parse(int argc, char** argv) {
    Options o;
    bool have_sql = false, dash_dash = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) bad(a, "needs a value");
            return argv[++i];
        };
        if (dash_dash || a.empty() || a[0] != '-' || a == "-") {
            if (!have_sql) {
                o.sql = a;
                have_sql = true;
            } else {
                o.params.push_back(a == "\\N" ? pg::Param() : pg::Param(a));
            }
        } else if (a == "--") {
            dash_dash = true;
        } else if (a == "--help" || a == "-h") {
            std::printf(
                "usage: pg_query --dsn DSN [--conns N] [--timeout MS] [--backend "
                "io_uring|epoll|auto] [--] SQL [PARAM...]\n"
                "Runs SQL with PARAMs as $1, $2, ... (text; \\N is NULL) on PostgreSQL through "
                "libpq on galay's loop, and prints its rows tab-separated (NULL as \\N).\n"
                "  --dsn DSN     libpq connection string or URI (required)\n"
                "  --conns N     connections in the pool (default 1)\n"
                "  --timeout MS  cancel the query after MS milliseconds (default: none)\n"
                "  --help        this text\n");
            std::exit(0);
        } else if (a == "--dsn") {
            o.dsn = value();
        } else if (a == "--conns") {
            o.conns = static_cast<int>(number(a, value(), 1));
            if (o.conns > 1000) bad(a, "at most 1000");
        } else if (a == "--timeout") {
            o.timeout_ms = number(a, value(), 1);
        } else if (a == "--backend") {
            auto b = galay::parse_backend(value());
            if (!b) bad(a, "expected io_uring, epoll or auto");
            o.backend = *b;
        } else {
            bad(a, "unknown option");
        }
    }
    if (o.dsn.empty()) bad("--dsn", "missing");
    if (!have_sql) bad("SQL", "missing");
    return o;
}

int fail(const pg::Error& e) {
    std::fprintf(stderr, "pg_query: %s: %s\n", pg::kind_name(e.kind), e.message.c_str());
    return 1;
}

galay::Task<int> run(const Options& o) {
    pg::Options opts{.conninfo = o.dsn,
                     .connections = o.conns,
                     .query_timeout = std::chrono::milliseconds(o.timeout_ms)};
    auto pool = co_await pg::Pool::open(std::move(opts));
    if (!pool) co_return fail(pool.error());
    pg::QueryResult r = co_await pool->query_params(o.sql, o.params);
    if (!r) co_return fail(r.error());
    for (int row = 0; row < r->rows(); ++row) {
        std::string line;
        for (int c = 0; c < r->columns(); ++c) {
            if (c > 0) line += '\t';
            line += r->is_null(row, c) ? std::string_view("\\N") : r->get(row, c);
        }
        std::printf("%s\n", line.c_str());
    }
    co_return 0;
}

} // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    galay::Scheduler sched({.backend = o.backend});
    return sched.block_on(run(o));
}
