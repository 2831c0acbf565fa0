// Runs one SQL query with parameters through the PostgreSQL pool on galay's loop (examples/pg)
// and prints its rows, tab-separated, a NULL as \N.
//   ./pg_query --dsn DSN [--conns N] [--timeout MS] [--backend B] SQL [PARAM...]
//   ./pg_query --dsn "host=/run/postgresql dbname=app" 'SELECT $1::int + $2::int' 1 2     -> 3
// Exit code: 0, 1 when the query or the connection fails (one line: "pg_query: <kind>:
// <message>"), 2 for a bad argument.
#include "galay_cli_backend.hpp"
#include "pg_pool.hpp"

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
    Options o;
    std::vector<std::string> words; // SQL, then its parameters
    cli::App app{"Runs SQL with PARAMs as $1, $2, ... (text; \\N is NULL) on PostgreSQL through "
                 "libpq on galay's loop, and prints its rows tab-separated (NULL as \\N). A "
                 "parameter that starts with '-' and is not a number goes after `--`.",
                 "pg_query"};
    app.add_option("--dsn", o.dsn, "libpq connection string or URI")
        ->required()
        ->check(galay::tools::non_empty());
    app.add_option("--conns", o.conns, "connections in the pool")
        ->check(galay::tools::whole(1, 1000))
        ->capture_default_str();
    app.add_option("--timeout", o.timeout_ms, "cancel the query after this many milliseconds")
        ->check(galay::tools::whole(1, 30LL * 86400 * 1000)); // 30 days: no overflow as ns
    galay::tools::add_backend_flag(app, &o.backend);
    app.add_option("SQL", words, "the query, then its parameters ($1, $2, ...)")->required();
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "pg_query")) return *code;
    o.sql = words.front();
    for (std::size_t i = 1; i < words.size(); ++i)
        o.params.push_back(words[i] == "\\N" ? pg::Param() : pg::Param(words[i]));
    galay::Scheduler sched({.backend = o.backend});
    return sched.block_on(run(o));
}
