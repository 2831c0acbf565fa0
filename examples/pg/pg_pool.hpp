// A PostgreSQL connection pool on galay's loop: N non-blocking libpq connections, each driven by
// galay tasks through galay::AsyncFd, queries with parameters, many in flight from one thread.
//
//     pg::Options opts{.conninfo = "host=/run/postgresql dbname=app", .connections = 4};
//     auto pool = co_await pg::Pool::open(std::move(opts)); // named: the guide's g++ 12 note
//     if (!pool) { std::puts(pool.error().message.c_str()); co_return; }
//     pg::QueryResult r = co_await pool->query("SELECT $1::int + $2::int", 1, 2);
//     if (r) std::printf("%s\n", std::string(r->get(0, 0)).c_str());      // "3"
//     auto slow = co_await pool->query("SELECT pg_sleep(60)").timeout(100ms);
//     // slow.error().kind == pg::ErrorKind::timeout: PQcancel was sent, the connection goes on
//     pg::Batch b;
//     for (int i = 0; i < 16; ++i) b.add("SELECT $1::int", i);
//     std::vector<pg::QueryResult> all = co_await pool->run(b); // in order; b kept till then
//     b.clear(); // reused: its memory stays
//
// Example code to copy, not part of the galay library. What it does, and why:
// - Every connection has a reader task (waits readable, PQconsumeInput, PQgetResult while
//   !PQisBusy) and a writer task (PQflush until done, waiting writable between tries). A query is
//   sent by the task that asks for it, on a connection with room; the others queue in order.
// - `pipeline = true`: each connection is in libpq's pipeline mode and carries up to
//   `max_inflight` queries; the queries sent in one turn of the loop share one PQpipelineSync
//   (at most `sync_every`). An error in a pipelined query makes the server skip the rest of its
//   sync group: those end with ErrorKind::pipeline_aborted (retry them).
// - A Batch is many queries that one task sends and awaits together: no task, Event or wake-up
//   per query. In pipeline mode it goes to one connection with room for it (else it is split
//   over the connections with room) and is a sync group of its own: an error in it makes the
//   rest of the group end with ErrorKind::pipeline_aborted, other batches go on. Without
//   pipeline mode its queries run side by side over the connections. `run` gives its results in
//   the order added; `run_each` hands each to a function as it is read, so none waits for the
//   rest of its batch. A timeout ends the ones not answered yet.
// - A Batch keeps its parameters' text in one buffer, and a call's state (its results, its
//   place in the queues) lives in the frame of the task that awaits it: a batch that its task
//   rebuilds and runs again costs one frame per call and no allocation per query but libpq's
//   own result (a single `query` still makes a Batch of its own). A waiter cancelled or destroyed
//   before its results came takes itself out of the pool; results that come for it later are read
//   and dropped.
// - A timeout ends the query at once with ErrorKind::timeout and sends PQcancel from the blocking
//   pool (it makes a connection of its own: it must not block the loop). The server then ends the
//   statement running on that connection; in pipeline mode that can be a later one of the group.
// - A lost connection (a server restart) ends every query it carried with
//   ErrorKind::connection_lost, and is made again (backoff 50 ms doubling to 2 s). While no
//   connection is up, a failed attempt ends the queued queries with ErrorKind::connect.
// Everything runs on the thread of the scheduler that opened the pool.
#pragma once

#include <galay/galay.hpp>

#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace pg {

enum class ErrorKind {
    connect,          ///< a connection could not be made: server down, wrong password, ...
    server,           ///< the server refused the query (SQL error): `sqlstate` says which
    connection_lost,  ///< the connection broke while the query was in flight
    timeout,          ///< past its timeout (the server was asked to cancel it)
    pipeline_aborted, ///< skipped: an earlier query of its pipeline sync group failed
    closed,           ///< the pool was closed
};

/// A query's or a connection's failure: what kind, libpq's or the server's message on one line,
/// and the SQLSTATE when the server gave one ("57014" for a cancelled statement).
struct Error {
    ErrorKind kind;
    std::string message;
    std::string sqlstate;
};

/// The name of an ErrorKind ("connect", "server", ...).
const char* kind_name(ErrorKind k) noexcept;

/// A query's result: the rows (none for a command) of libpq's PGresult, which it owns.
class Rows {
public:
    explicit Rows(PGresult* r) noexcept
        : res_(r) {}
    int rows() const noexcept { return PQntuples(res_.get()); }
    int columns() const noexcept { return PQnfields(res_.get()); }
    std::string_view column_name(int c) const noexcept { return PQfname(res_.get(), c); }
    bool is_null(int r, int c) const noexcept { return PQgetisnull(res_.get(), r, c) == 1; }
    /// The value in text form ("" for NULL: see is_null).
    std::string_view get(int r, int c) const noexcept {
        return {PQgetvalue(res_.get(), r, c),
                static_cast<std::size_t>(PQgetlength(res_.get(), r, c))};
    }
    /// "SELECT 1", "INSERT 0 3" ...
    std::string_view command_tag() const noexcept { return PQcmdStatus(res_.get()); }
    const PGresult* raw() const noexcept { return res_.get(); }

private:
    struct Clear {
        void operator()(PGresult* r) const noexcept { PQclear(r); }
    };
    std::unique_ptr<PGresult, Clear> res_;
};

using QueryResult = std::expected<Rows, Error>;

/// A parameter in libpq's text form; nullopt is SQL NULL.
using Param = std::optional<std::string>;
inline Param to_param(std::nullptr_t) {
    return std::nullopt;
}
inline Param to_param(std::string_view s) {
    return std::string(s);
}
inline Param to_param(const char* s) {
    return std::string(s);
}
inline Param to_param(const std::string& s) {
    return s;
}
inline Param to_param(bool b) {
    return b ? "true" : "false";
}
template <class T>
    requires(std::integral<T> || std::floating_point<T>) && (!std::same_as<T, bool>)
Param to_param(T v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}
template <class T>
Param to_param(const std::optional<T>& v) {
    return v ? to_param(*v) : std::nullopt;
}

struct Options {
    std::string conninfo;   ///< libpq's connection string or URI
    int connections = 4;    ///< connections in the pool
    bool pipeline = false;  ///< libpq pipeline mode: many queries per connection
    int max_inflight = 256; ///< pipeline: queries in flight per connection at most
    int sync_every = 64;    ///< pipeline: queries per PQpipelineSync at most
    std::chrono::milliseconds connect_timeout{10'000}; ///< each connection attempt
    std::chrono::milliseconds query_timeout{0};        ///< default per query; 0: none
};

/// What the pool did so far.
struct Stats {
    int connections_up = 0;
    std::uint64_t reconnects = 0;       ///< connections made again after a loss
    std::uint64_t connections_lost = 0; ///< losses while connected
    std::uint64_t cancels_sent = 0;     ///< PQcancel calls for queries past their timeout
};

/// What `Pool::run_each` hands each result to: the query's place in its batch and its result.
using ResultHandler = std::function<void(std::size_t, QueryResult&&)>;

namespace detail {
struct PoolState;
struct Request;

/// A vector of trivially copyable values with room for N in the object itself: a Batch of one
/// query (what every `Pool::query` makes) then allocates nothing for its text, parameters and
/// entry.
template <class T, std::size_t N>
class Small {
    static_assert(std::is_trivially_copyable_v<T>);

public:
    Small() noexcept = default;
    Small(const Small& o) { append(o.data(), o.size_); }
    Small(Small&& o) noexcept { take(o); }
    Small& operator=(const Small& o) {
        if (this != &o) {
            size_ = 0;
            append(o.data(), o.size_);
        }
        return *this;
    }
    Small& operator=(Small&& o) noexcept {
        if (this != &o) {
            heap_.reset();
            take(o);
        }
        return *this;
    }
    T* data() noexcept { return heap_ ? heap_.get() : inline_; }
    const T* data() const noexcept { return heap_ ? heap_.get() : inline_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    T& operator[](std::size_t i) noexcept { return data()[i]; }
    const T& operator[](std::size_t i) const noexcept { return data()[i]; }
    void push_back(const T& v) {
        reserve(size_ + 1);
        data()[size_++] = v;
    }
    void append(const T* p, std::size_t n) {
        if (n == 0) return;
        reserve(size_ + n);
        std::memcpy(data() + size_, p, n * sizeof(T));
        size_ += n;
    }
    void reserve(std::size_t n) {
        if (n <= cap_) return;
        const std::size_t cap = std::max(n, cap_ * 2);
        auto bigger = std::make_unique_for_overwrite<T[]>(cap);
        if (size_ > 0) std::memcpy(bigger.get(), data(), size_ * sizeof(T));
        heap_ = std::move(bigger);
        cap_ = cap;
    }
    void clear() noexcept { size_ = 0; }

private:
    void take(Small& o) noexcept {
        if (o.heap_) {
            heap_ = std::move(o.heap_);
            cap_ = o.cap_;
        } else {
            if (o.size_ > 0) std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
            cap_ = N;
        }
        size_ = o.size_;
        o.size_ = 0;
        o.cap_ = N;
    }
    T inline_[N];
    std::unique_ptr<T[]> heap_;
    std::size_t size_ = 0;
    std::size_t cap_ = N;
};
} // namespace detail

/// Queries sent together by `Pool::run` (see the top of this file). Parameters are formatted
/// into one buffer as they are added (no string per parameter), and the SQL text of
/// consecutive queries that share it is stored once; reusing a Batch after clear() keeps its
/// memory, so a batch built again and again allocates nothing once it has grown.
class Batch {
public:
    /// Adds `sql` with `params` ($1, $2, ... in text form, as Pool::query takes them).
    template <class... Args>
    Batch& add(std::string_view sql, Args&&... params) {
        add_sql(sql, sizeof...(Args));
        (put(std::forward<Args>(params)), ...);
        return *this;
    }
    Batch& add_params(std::string_view sql, const std::vector<Param>& params);
    /// Room for `queries` queries of `params` parameters each, and `bytes` of SQL and
    /// parameter text (no reallocation while adding).
    void reserve(std::size_t queries, std::size_t params = 1, std::size_t bytes = 0);
    std::size_t size() const noexcept { return entries_.size(); }
    bool empty() const noexcept { return entries_.empty(); }
    void clear() noexcept;

private:
    friend struct detail::PoolState;
    static constexpr std::uint32_t kNull = 0xffffffff; ///< a parameter that is SQL NULL
    struct Entry {
        std::uint32_t sql;          ///< its text's offset in text_
        std::uint32_t first, count; ///< its parameters in params_
    };
    void add_sql(std::string_view sql, std::size_t params);
    void put_text(std::string_view s);
    template <class T>
    void put(T&& v) {
        using U = std::remove_cvref_t<T>;
        if constexpr (std::same_as<U, std::nullptr_t>)
            params_.push_back(kNull);
        else if constexpr (std::same_as<U, const char*> || std::same_as<U, char*>)
            v == nullptr ? params_.push_back(kNull) : put_text(v);
        else if constexpr (std::same_as<U, bool>)
            put_text(v ? "true" : "false");
        else if constexpr (std::integral<U> || std::floating_point<U>) {
            char buf[64];
            const auto r = std::to_chars(buf, buf + sizeof buf, v);
            put_text({buf, static_cast<std::size_t>(r.ptr - buf)});
        } else if constexpr (std::convertible_to<const U&, std::string_view>)
            put_text(std::string_view(v));
        else { // std::optional<T> (Param among them), or a type with a to_param of its own
            if constexpr (requires { v.has_value(); }) {
                if (!v.has_value()) return params_.push_back(kNull);
                put(*std::forward<T>(v));
            } else {
                put(to_param(std::forward<T>(v)));
            }
        }
    }
    /// The text at `offset` in text_ (NUL-terminated).
    const char* text(std::uint32_t offset) const noexcept { return text_.data() + offset; }
    detail::Small<char, 64> text_;           ///< SQL texts and parameters, each followed by a NUL
    detail::Small<std::uint32_t, 4> params_; ///< each parameter's offset in text_, or kNull
    detail::Small<Entry, 1> entries_;        ///< the queries, in the order added
    std::uint32_t last_sql_ = kNull;         ///< the last query's SQL text
};

/// What `co_await` on a query (R = QueryResult) or a batch (R = one QueryResult per query, in
/// the order added) gives; `.timeout(d)` before it ends what is not answered by then with
/// ErrorKind::timeout and asks the server to cancel it. Everything the call needs (its
/// results, its place in the pool's queues) lives in the frame of the task awaiting it: a
/// waiter that is cancelled or destroyed first takes itself out of the pool.
template <class R>
class [[nodiscard]] Call {
public:
    /// A call that runs `b`, which it keeps (query, run(Batch&&)).
    Call(std::shared_ptr<detail::PoolState> s, Batch b, ResultHandler each = {}) noexcept;
    /// A call that runs `*b`, which the caller keeps unchanged until the call ends
    /// (run(const Batch&)).
    Call(std::shared_ptr<detail::PoolState> s, const Batch* b, ResultHandler each = {}) noexcept;
    Call&& timeout(std::chrono::nanoseconds d) && {
        timeout_ = d;
        return std::move(*this);
    }
    auto operator co_await() && {
        task_.emplace(run());
        return std::move(*task_).operator co_await();
    }

private:
    galay::Task<R> run();
    std::shared_ptr<detail::PoolState> state_;
    Batch owned_;
    const Batch* batch_ = nullptr; ///< null: owned_
    ResultHandler each_;
    std::chrono::nanoseconds timeout_{0};
    std::optional<galay::Task<R>> task_; ///< last: its frame goes before what it refers to
};

using QueryCall = Call<QueryResult>;
using BatchCall = Call<std::vector<QueryResult>>;
using EachCall = Call<void>;
extern template class Call<QueryResult>;
extern template class Call<std::vector<QueryResult>>;
extern template class Call<void>;

/// A pool of libpq connections (see the top of this file). Move-only; destroying it closes it.
class Pool {
public:
    /// Makes every connection (one after the other; each within `connect_timeout`), then starts
    /// their tasks. Fails with ErrorKind::connect and libpq's message when one cannot be made.
    static galay::Task<std::expected<Pool, Error>> open(Options o);

    Pool(Pool&&) noexcept = default;
    Pool& operator=(Pool&&) noexcept = default;
    ~Pool() { close(); }

    /// Run `sql` with `params` ($1, $2, ... in text form: numbers, strings, nullptr for NULL).
    template <class... Args>
    QueryCall query(std::string_view sql, Args&&... params) {
        Batch b;
        b.add(sql, std::forward<Args>(params)...);
        return QueryCall(state_, std::move(b));
    }
    QueryCall query_params(std::string_view sql, const std::vector<Param>& params);
    /// Run every query of `b` (see Batch); an empty batch gives an empty vector. The caller
    /// keeps `b` unchanged until the call ends (a Batch in the awaiting task's frame, reused
    /// for the next call, allocates nothing); a Batch passed as an rvalue is kept by the call.
    BatchCall run(const Batch& b);
    BatchCall run(Batch&& b);
    /// Run every query of `b` and hand each result to `each` as it is read, in order, from the
    /// pool's reader: no result waits for the rest of its batch (a service that holds none
    /// keeps the heap small). `co_await` ends once every one was handed over (those past the
    /// timeout with ErrorKind::timeout). `each` must not throw, suspend or use the pool. `b`
    /// as for run().
    EachCall run_each(const Batch& b, ResultHandler each);
    EachCall run_each(Batch&& b, ResultHandler each);

    /// Ends every query queued or in flight with ErrorKind::closed and lets go of the
    /// connections (their tasks end at the loop's next turn). Idempotent.
    void close() noexcept;

    Stats stats() const noexcept;

private:
    static galay::Task<std::expected<Pool, Error>>
    open_state(std::shared_ptr<detail::PoolState> state);
    explicit Pool(std::shared_ptr<detail::PoolState> s) noexcept
        : state_(std::move(s)) {}
    std::shared_ptr<detail::PoolState> state_;
};

} // namespace pg
