// What the libpq comparison clients (raw_pg, pg_threads) share: their common flags, the query
// they run (`SELECT $1::int` with a distinct parameter each time), the check of its reply (one
// row, one column, the value sent), and the report. Text format both ways; the parameter's type
// is given (int4) so that no client leaves it to the server.
#pragma once

#include "foreign_client.hpp"

#include <libpq-fe.h>
#include <malloc.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>

namespace foreign::pg {

inline constexpr const char* kSql = "SELECT $1::int";
inline constexpr const char* kStatement = "galay_select"; ///< the name when prepared
inline constexpr Oid kInt4 = 23;

/// libpq's message on one line: its newlines and tabs (a server error's second line, a hint)
/// become single spaces, the trailing ones go.
inline std::string one_line(const char* msg) {
    std::string out;
    for (const char* p = msg == nullptr ? "" : msg; *p; ++p) {
        const bool space = *p == '\n' || *p == '\t' || *p == ' ';
        if (!space)
            out += *p;
        else if (!out.empty() && out.back() != ' ')
            out += ' ';
    }
    while (!out.empty() && out.back() == ' ')
        out.pop_back();
    return out;
}

/// libpq's notices and the errors it reports outside a query (a server shutting down tells an
/// idle connection so) are printed on stderr by default; the clients learn them from results.
inline void quiet_notices(PGconn* c) {
    PQsetNoticeProcessor(
        c, [](void*, const char*) {}, nullptr);
}

/// One query's parameter in libpq's text form.
struct Param {
    char text[16];
    const char* values[1] = {text};
    int lengths[1] = {0};
    int formats[1] = {0};
    explicit Param(std::int32_t v) {
        const auto r = std::to_chars(text, text + sizeof text - 1, v);
        *r.ptr = '\0';
        lengths[0] = static_cast<int>(r.ptr - text);
    }
};

/// The value of query number `n`: distinct for 2^31 queries.
inline std::int32_t value_of(std::uint64_t n) {
    return static_cast<std::int32_t>(n & 0x7fffffff);
}

/// PQprepare of the query under kStatement; "" or the server's error.
inline std::string prepare(PGconn* c) {
    const Oid types[1] = {kInt4};
    PGresult* r = PQprepare(c, kStatement, kSql, 1, types);
    std::string err =
        PQresultStatus(r) == PGRES_COMMAND_OK ? "" : one_line(PQresultErrorMessage(r));
    if (r == nullptr) err = one_line(PQerrorMessage(c));
    PQclear(r);
    return err;
}

/// Queues the query with `v` on a connection (PQsendQueryParams, or PQsendQueryPrepared when
/// `prepared`); false when libpq refused it (PQerrorMessage says why).
inline bool send(PGconn* c, bool prepared, std::int32_t v) {
    const Param p(v);
    static const Oid types[1] = {kInt4};
    return prepared ? PQsendQueryPrepared(c, kStatement, 1, p.values, p.lengths, p.formats, 0) == 1
                    : PQsendQueryParams(c, kSql, 1, types, p.values, p.lengths, p.formats, 0) == 1;
}

/// The query with `v`, blocking (PQexecParams or PQexecPrepared).
inline PGresult* exec(PGconn* c, bool prepared, std::int32_t v) {
    const Param p(v);
    static const Oid types[1] = {kInt4};
    return prepared ? PQexecPrepared(c, kStatement, 1, p.values, p.lengths, p.formats, 0)
                    : PQexecParams(c, kSql, 1, types, p.values, p.lengths, p.formats, 0);
}

/// "" when `r` is the reply to the query with `v`; else what is wrong with it.
inline std::string check(const PGresult* r, std::int32_t v) {
    if (r == nullptr) return "no result";
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK) {
        const std::string msg = one_line(PQresultErrorMessage(r));
        return std::string(PQresStatus(st)) + (msg.empty() ? "" : ": " + msg);
    }
    if (PQntuples(r) != 1 || PQnfields(r) != 1)
        return "expected 1 row of 1 column, got " + std::to_string(PQntuples(r)) + " x " +
               std::to_string(PQnfields(r));
    const Param want(v);
    const char* got = PQgetvalue(r, 0, 0);
    if (PQgetlength(r, 0, 0) != want.lengths[0] ||
        std::memcmp(got, want.text, want.lengths[0]) != 0)
        return "sent " + std::string(want.text) + ", got back " + got;
    return "";
}

/// The flags every libpq client here takes.
struct Options {
    std::string conninfo;
    int connections = 16;
    double duration = 5, warmup = 1;
    bool prepared = false, json = false;
    long malloc_trim = 64L << 20; ///< glibc's M_TRIM_THRESHOLD; 0: glibc's own (dynamic) one
};

inline void add_options(cli::App& app, Options& o) {
    app.add_option("--conninfo", o.conninfo, "libpq connection string")->required();
    app.add_option("--connections", o.connections, "connections")
        ->capture_default_str()
        ->check(cli::Range(1, 10000));
    app.add_option("--duration", o.duration, "measured seconds")
        ->capture_default_str()
        ->check(cli::Range(0.001, 86400.0));
    app.add_option("--warmup", o.warmup, "seconds before measuring")
        ->capture_default_str()
        ->check(cli::Range(0.0, 86400.0));
    app.add_flag("--prepared", o.prepared, "prepare the statement once per connection");
    app.add_flag("--json", o.json, "print one JSON object");
    app.add_option("--malloc-trim", o.malloc_trim,
                   "glibc's M_TRIM_THRESHOLD in bytes, the same for every client (0: glibc's "
                   "default, which gives the heap's top back and faults it in again as results "
                   "come and go)")
        ->capture_default_str()
        ->check(cli::Range(0L, 1L << 30));
}

/// Applies --malloc-trim (after parsing, before the first connection).
inline void apply_heap(const Options& o) {
    if (o.malloc_trim > 0) mallopt(M_TRIM_THRESHOLD, static_cast<int>(o.malloc_trim));
}

/// The flags of the clients that run both modes (raw_pg, galay_pg).
struct ModeOptions {
    std::string mode = "single";
    int depth = 16, inflight = 1000;
    bool pipeline() const { return mode == "pipeline"; }
};

inline void add_mode_options(cli::App& app, ModeOptions& o) {
    app.add_option("--mode", o.mode,
                   "single: one query in flight per connection; pipeline: "
                   "libpq pipeline mode")
        ->capture_default_str()
        ->check(cli::IsMember({"single", "pipeline"}));
    app.add_option("--depth", o.depth, "pipeline: queries per PQpipelineSync")
        ->capture_default_str()
        ->check(cli::Range(1, 100000));
    app.add_option("--inflight", o.inflight, "pipeline: queries in flight across the connections")
        ->capture_default_str()
        ->check(cli::Range(1, 10000000));
}

/// After parsing: what is wrong with the combination of flags ("" when nothing).
inline std::string mode_problem(const Options& o, const ModeOptions& m) {
    if (m.pipeline() && m.inflight < o.connections)
        return "--inflight: " + std::to_string(m.inflight) + " is fewer than --connections " +
               std::to_string(o.connections);
    return "";
}

/// How a run went: what its report says besides the flags.
struct Outcome {
    std::string mode = "single";
    int depth = 1, inflight = 0;
    Mark from, to;           ///< the measured window
    std::uint64_t total = 0; ///< queries answered in the whole run, warm-up included
    std::uint64_t errors = 0;
    int lost = 0; ///< connections lost
    std::string first_error;
};

/// Prints the report (JSON with --json, else one line) and returns the exit code: 0 without
/// errors, else 1.
inline int report(const char* tool, const Options& o, const Outcome& r) {
    nlohmann::json j{{"implementation", tool},
                     {"mode", r.mode},
                     {"statement", o.prepared ? "prepared" : "params"},
                     {"connections", o.connections},
                     {"depth", r.depth},
                     {"inflight", r.inflight},
                     {"warmup_s", o.warmup},
                     {"malloc_trim", o.malloc_trim}};
    put_window(j, "queries", r.from, r.to);
    j["total_queries"] = r.total;
    j["errors"] = r.errors;
    j["connections_lost"] = r.lost;
    j["first_error"] = r.first_error;
    const nlohmann::json& per = j["client_cpu_us_per_query"];
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s %s%s: %llu queries in %.2f s: %.0f queries/s, client CPU %.2f us/query, "
                  "%llu errors (%d connections, %d in flight)",
                  tool, r.mode.c_str(), o.prepared ? " prepared" : "",
                  static_cast<unsigned long long>(r.to.count - r.from.count),
                  r.to.wall - r.from.wall, j["queries_per_s"].get<double>(),
                  per.is_null() ? 0.0 : per.get<double>(),
                  static_cast<unsigned long long>(r.errors), o.connections, r.inflight);
    std::string human = line;
    if (!r.first_error.empty()) human += "; first error: " + r.first_error;
    print(j, o.json, human);
    return r.errors == 0 ? 0 : 1;
}

} // namespace foreign::pg
