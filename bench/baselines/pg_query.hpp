// The query every PostgreSQL comparison client runs (`SELECT $1::int` with a distinct parameter
// each time) and the check of its reply: one row, one column, the value sent. Text format both
// ways; the parameter's type is given (int4) so that no client leaves it to the server.
#pragma once

#include <libpq-fe.h>

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

} // namespace foreign::pg
