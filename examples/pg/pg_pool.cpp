// The PostgreSQL pool of pg_pool.hpp: connecting, the reader and writer tasks of a connection,
// dispatching queries, timeouts with PQcancel, losing and making connections again.
#include "pg_pool.hpp"

#include <algorithm>
#include <deque>

namespace pg {

namespace {

/// libpq's message on one line (its newlines become spaces; the trailing ones go).
std::string one_line(const char* msg) {
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

using Clock = std::chrono::steady_clock;

} // namespace

const char* kind_name(ErrorKind k) noexcept {
    switch (k) {
    case ErrorKind::connect:
        return "connect";
    case ErrorKind::server:
        return "server";
    case ErrorKind::connection_lost:
        return "connection lost";
    case ErrorKind::timeout:
        return "timeout";
    case ErrorKind::pipeline_aborted:
        return "pipeline aborted";
    case ErrorKind::closed:
        return "closed";
    }
    return "?";
}

namespace detail {

/// A query or a batch, from `query()` / `run()` until its results are taken (the asking task
/// and the connections that carry it share it: a query that timed out may still be answered).
struct Request {
    Batch batch;
    std::chrono::nanoseconds timeout{0};
    galay::Event done;                ///< set when the last result is in
    ResultHandler each;               ///< run_each: where results go (else `results`)
    std::vector<QueryResult> results; ///< one per query, in the batch's order
    std::vector<bool> got;            ///< which of them came
    std::size_t sent = 0;             ///< the batch's queries sent so far (the first ones)
    std::size_t left = 0;             ///< results not in yet
    bool abandoned = false;

    Request(Batch b, ResultHandler h)
        : batch(std::move(b))
        , each(std::move(h))
        , got(batch.size())
        , left(batch.size()) {
        if (each) return;
        results.reserve(left); // filled in as they come
        for (std::size_t k = 0; k < left; ++k)
            results.emplace_back(std::unexpect, Error{ErrorKind::timeout, {}, {}});
    }
    void settle(std::size_t k, QueryResult r) {
        if (each)
            each(k, std::move(r));
        else
            results[k] = std::move(r);
        got[k] = true;
        if (--left == 0) done.set();
    }
};

/// A request on a connection whose results have not all been read, in the order sent.
struct InFlight {
    std::shared_ptr<Request> req; ///< null: a pipeline sync
    std::size_t index = 0;        ///< the query's place in its batch
    bool answered = false;        ///< its result came; the NULL that ends it has not
};

/// One connection's life, from connected to lost: a new one for every reconnection, so nothing
/// (a waiter, a stale wake-up) carries over to the next socket.
struct Session {
    std::size_t index = 0; ///< its connection's place in the pool
    PGconn* pg = nullptr;
    galay::AsyncFd afd;
    std::shared_ptr<PGcancel> cancel;
    std::deque<InFlight> inflight;
    int queries = 0;  ///< queries in `inflight`
    int unsynced = 0; ///< pipeline: queries sent since the last sync
    galay::Event wake_writer;
    bool dead = false;
    ~Session() {
        afd.reset(); // before PQfinish closes the socket
        PQfinish(pg);
    }
};

struct Conn {
    std::shared_ptr<Session> session; ///< null while it is being made again
};

struct PoolState : std::enable_shared_from_this<PoolState> {
    Options opts;
    std::vector<Conn> conns;
    std::deque<std::shared_ptr<Request>> waiting; ///< not sent yet, or not all of it
    std::size_t next = 0;                         ///< where dispatch() looks first
    bool closing = false;
    galay::Event closed;
    Stats stats;

    int cap() const { return opts.pipeline ? opts.max_inflight : 1; }
    galay::Task<std::expected<std::shared_ptr<Session>, Error>> connect();
    galay::Task<void> run(std::size_t i);
    galay::Task<void> read_loop(std::shared_ptr<Session> s);
    galay::Task<void> write_loop(std::shared_ptr<Session> s);
    void dispatch();
    Session* pick(std::size_t want);
    void send(Session& s, const std::shared_ptr<Request>& r, std::size_t n);
    bool sync(Session& s);
    void flush(Session& s);
    bool start(const std::shared_ptr<Request>& r);
    void give_up(Request& r, const galay::Result<void>& w);
    void drain(Session& s, bool& completed);
    void lose(Session& s, const std::string& why, ErrorKind kind = ErrorKind::connection_lost);
    void fail_waiting(ErrorKind kind, const std::string& why);
};

namespace {

/// The query's outcome from its result, which this takes.
QueryResult outcome(PGresult* r) {
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return Rows(r);
    Error e{st == PGRES_PIPELINE_ABORTED ? ErrorKind::pipeline_aborted : ErrorKind::server,
            one_line(PQresultErrorMessage(r)), ""};
    if (const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE)) e.sqlstate = code;
    if (e.message.empty()) e.message = PQresStatus(st);
    PQclear(r);
    return std::unexpected(std::move(e));
}

} // namespace

galay::Task<std::expected<std::shared_ptr<Session>, Error>> PoolState::connect() {
    auto fail = [](PGconn* c, std::string why) {
        PQfinish(c);
        return std::unexpected(Error{ErrorKind::connect, std::move(why), ""});
    };
    PGconn* c = PQconnectStart(opts.conninfo.c_str());
    if (c == nullptr) co_return fail(c, "PQconnectStart: out of memory");
    if (PQstatus(c) == CONNECTION_BAD) co_return fail(c, one_line(PQerrorMessage(c)));
    PQsetNoticeProcessor(
        c, [](void*, const char*) {}, nullptr);
    const auto deadline = Clock::now() + opts.connect_timeout;
    // libpq asks to be called again when the socket is ready the way it says (writable before
    // the first call). It may open a new socket inside PQconnectPoll (another address, a
    // protocol fallback): so a new AsyncFd for every call, dropped before the next one.
    for (PostgresPollingStatusType st = PGRES_POLLING_WRITING; st != PGRES_POLLING_OK;) {
        if (st == PGRES_POLLING_FAILED) co_return fail(c, one_line(PQerrorMessage(c)));
        auto afd = galay::AsyncFd::borrow(PQsocket(c));
        if (!afd) co_return fail(c, "no socket: " + one_line(PQerrorMessage(c)));
        const auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
        auto r = st == PGRES_POLLING_READING ? co_await afd->readable().timeout(left)
                                             : co_await afd->writable().timeout(left);
        afd->reset();
        if (!r && r.error() == std::errc::timed_out)
            co_return fail(c, "no connection within " +
                                  std::to_string(opts.connect_timeout.count()) + " ms");
        if (!r) co_return fail(c, "waiting for the socket: " + r.error().message());
        st = PQconnectPoll(c);
    }
    if (PQsetnonblocking(c, 1) != 0 || (opts.pipeline && PQenterPipelineMode(c) != 1))
        co_return fail(c, one_line(PQerrorMessage(c)));
    auto s = std::make_shared<Session>();
    s->pg = c;
    s->cancel = std::shared_ptr<PGcancel>(PQgetCancel(c), PQfreeCancel);
    auto afd = galay::AsyncFd::borrow(PQsocket(c));
    if (!afd) {
        s->pg = nullptr;
        co_return fail(c, "no socket: " + one_line(PQerrorMessage(c)));
    }
    s->afd = std::move(*afd);
    co_return s;
}

/// Ends the sync group open on `s` (PQpipelineSync, which also flushes what it can); false
/// when the connection broke (it is then lost).
bool PoolState::sync(Session& s) {
    if (PQpipelineSync(s.pg) != 1) {
        lose(s, one_line(PQerrorMessage(s.pg)));
        return false;
    }
    s.unsynced = 0;
    s.inflight.push_back({nullptr});
    return true;
}

/// PQflush; what it could not send, the writer sends once the socket is writable.
void PoolState::flush(Session& s) {
    const int f = PQflush(s.pg);
    if (f < 0) lose(s, one_line(PQerrorMessage(s.pg)));
    if (f == 1) s.wake_writer.notify_one();
}

/// Sends the next `n` queries of `r` on `s` (PQsendQueryParams, then PQflush or a wake-up of the
/// writer). When the connection breaks it is lost, and what of `r` it did not take stays to send.
void PoolState::send(Session& s, const std::shared_ptr<Request>& r, std::size_t n) {
    const Batch& b = r->batch;
    // Pipeline mode: a batch is a sync group of its own (an error in it skips none of another's
    // queries); single queries share a sync per turn of the loop (the writer's) or sync_every.
    const bool group = opts.pipeline && b.size() > 1;
    if (group && s.unsynced > 0 && !sync(s)) return;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = r->sent;
        const Batch::Entry& e = b.entries_[k];
        // The parameters' pointers: on the stack for up to 16 (no allocation per query).
        const char* few[16];
        std::vector<const char*> many(e.count > 16 ? e.count : 0);
        const char** values = e.count > 16 ? many.data() : few;
        for (std::uint32_t j = 0; j < e.count; ++j) {
            const Param& p = b.params_[e.first + j];
            values[j] = p ? p->c_str() : nullptr;
        }
        if (PQsendQueryParams(s.pg, b.sqls_[e.sql].c_str(), static_cast<int>(e.count), nullptr,
                              values, nullptr, nullptr, 0) != 1)
            return lose(s, one_line(PQerrorMessage(s.pg)));
        ++r->sent;
        s.inflight.push_back({r, k});
        ++s.queries;
        if (opts.pipeline && !group && ++s.unsynced >= opts.sync_every && !sync(s)) return;
    }
    if (group) {
        if (sync(s)) flush(s);
    } else if (opts.pipeline) {
        // The writer syncs once the tasks ready in this turn have sent theirs, so a burst of
        // queries shares one sync; a long burst is cut every sync_every queries.
        s.wake_writer.notify_one();
    } else {
        flush(s);
    }
}

/// A connection with room for a request's `want` queries still to send. One at a time per
/// connection: the next free one after the last used (the load spreads). Pipeline mode: the
/// last used one while it has room for them all, so that a burst of queries (the tasks its last
/// results woke) goes out as one sync group rather than one query per connection, else the next
/// with room for them all, else the first with any room (the request is split).
Session* PoolState::pick(std::size_t want) {
    Session* some = nullptr;
    std::size_t some_at = 0;
    for (std::size_t k = 0; k < conns.size(); ++k) {
        const std::size_t at = (next + k) % conns.size();
        Session* s = conns[at].session.get();
        if (s == nullptr || s->dead || s->queries >= cap()) continue;
        if (!opts.pipeline) {
            next = (at + 1) % conns.size();
            return s;
        }
        if (static_cast<std::size_t>(cap() - s->queries) >= want) {
            next = at;
            return s;
        }
        if (some == nullptr) {
            some = s;
            some_at = at;
        }
    }
    if (some != nullptr) next = some_at;
    return some;
}

/// Hands the queued requests to connections with room, in order.
void PoolState::dispatch() {
    while (!waiting.empty() && !closing) {
        std::shared_ptr<Request> r = waiting.front();
        if (r->abandoned || r->sent == r->batch.size()) {
            waiting.pop_front();
            continue;
        }
        const std::size_t want = r->batch.size() - r->sent;
        Session* room = pick(want);
        if (room == nullptr) return;
        send(*room, r, opts.pipeline ? std::min(want, std::size_t(cap() - room->queries)) : 1);
    }
}

/// Reads every complete result there is and ends its query; `completed` when one ended.
void PoolState::drain(Session& s, bool& completed) {
    while (!s.inflight.empty() && !PQisBusy(s.pg)) {
        InFlight& head = s.inflight.front();
        PGresult* r = PQgetResult(s.pg);
        if (r == nullptr) { // the end of the head query's results
            if (head.req == nullptr || !head.answered) {
                if (PQstatus(s.pg) == CONNECTION_BAD)
                    return lose(s, one_line(PQerrorMessage(s.pg)));
                return lose(s, "libpq ended a request that had no result");
            }
            s.inflight.pop_front();
            --s.queries;
            completed = true;
            continue;
        }
        const ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) { // not followed by a NULL
            PQclear(r);
            if (head.req != nullptr) return lose(s, "a sync result before its queries' ends");
            s.inflight.pop_front();
            continue;
        }
        if (head.req == nullptr || head.answered) {
            // A second result for one query: PQsendQueryParams runs one statement, so only
            // COPY and the like would come here; it is not a query this pool serves.
            PQclear(r);
            if (head.req == nullptr) return lose(s, "a result where a sync was expected");
            continue;
        }
        head.answered = true;
        if (!head.req->abandoned)
            head.req->settle(head.index, outcome(r));
        else
            PQclear(r);
    }
}

/// The connection is gone (or the pool closes): its queries end with `kind`, its tasks stop,
/// and its socket is closed. The reader's task makes it again.
void PoolState::lose(Session& s, const std::string& why, ErrorKind kind) {
    if (s.dead) return;
    s.dead = true;
    if (kind == ErrorKind::connection_lost) ++stats.connections_lost;
    for (InFlight& f : s.inflight)
        if (f.req && !f.answered && !f.req->abandoned)
            f.req->settle(f.index, std::unexpected(Error{kind, why, ""}));
    s.inflight.clear();
    s.queries = 0;
    s.wake_writer.notify_one(); // the writer sees `dead` and ends
    s.afd.reset();              // both tasks' waits end; galay lets go of the socket
    PQfinish(s.pg);
    s.pg = nullptr;
}

void PoolState::fail_waiting(ErrorKind kind, const std::string& why) {
    std::deque<std::shared_ptr<Request>> all;
    all.swap(waiting);
    for (auto& r : all) // what was sent of it ends with its connection
        for (std::size_t k = r->sent; k < r->batch.size() && !r->abandoned; ++k)
            r->settle(k, std::unexpected(Error{kind, why, ""}));
}

galay::Task<void> PoolState::write_loop(std::shared_ptr<Session> s) {
    for (;;) {
        auto w = co_await s->wake_writer.wait();
        if (!w || s->dead) co_return;
        if (s->unsynced > 0 && !sync(*s)) co_return;
        for (;;) {
            const int f = PQflush(s->pg);
            if (f < 0) co_return lose(*s, one_line(PQerrorMessage(s->pg)));
            if (f == 0) break;
            auto w = co_await s->afd.writable();
            if (s->dead) co_return;
            if (!w) co_return lose(*s, "waiting to write: " + w.error().message());
        }
    }
}

galay::Task<void> PoolState::read_loop(std::shared_ptr<Session> s) {
    for (;;) {
        auto r = co_await s->afd.readable();
        if (s->dead) co_return;
        if (!r) co_return lose(*s, "waiting to read: " + r.error().message());
        if (PQconsumeInput(s->pg) != 1) co_return lose(*s, one_line(PQerrorMessage(s->pg)));
        bool completed = false;
        drain(*s, completed);
        if (s->dead) co_return;
        if (PQstatus(s->pg) == CONNECTION_BAD) co_return lose(*s, one_line(PQerrorMessage(s->pg)));
        if (completed) {
            // The tasks these results woke will send their next queries in this turn of the
            // loop: in pipeline mode they go to this connection first, as one sync group.
            if (opts.pipeline) next = s->index;
            dispatch();
        }
    }
}

galay::Task<void> PoolState::run(std::size_t i) {
    auto keep = shared_from_this(); // the state lives as long as a connection's task
    auto backoff = std::chrono::milliseconds(50);
    while (!closing) {
        if (conns[i].session == nullptr) {
            auto s = co_await connect();
            if (closing) co_return;
            if (!s) {
                // Nobody can serve the queued queries: tell them now rather than at their
                // timeouts (or never).
                bool any_up = false;
                for (const Conn& c : conns)
                    any_up |= c.session != nullptr && !c.session->dead;
                if (!any_up) fail_waiting(ErrorKind::connect, s.error().message);
                auto w = co_await closed.wait().timeout(backoff);
                if (!w && w.error() != std::errc::timed_out) co_return; // shutting down
                backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
                continue;
            }
            ++stats.reconnects;
            backoff = std::chrono::milliseconds(50);
            conns[i].session = std::move(*s);
        }
        conns[i].session->index = i;
        std::shared_ptr<Session> s = conns[i].session;
        galay::spawn(write_loop(s));
        dispatch();
        co_await read_loop(s);
        conns[i].session.reset();
    }
}

/// Queues `r` and sends what a connection has room for; false (every result set) when the pool
/// is closed.
bool PoolState::start(const std::shared_ptr<Request>& r) {
    if (closing) {
        for (std::size_t k = 0; k < r->batch.size(); ++k)
            r->settle(k, std::unexpected(Error{ErrorKind::closed, "the pool is closed", ""}));
        return false;
    }
    waiting.push_back(r);
    dispatch();
    return true;
}

/// `r`'s wait ended (`w`) before every result came: the rest end with ErrorKind::timeout, the
/// unsent ones leave the queue, and every connection running one of the sent ones is asked to
/// cancel its statement (PQcancel, from the blocking pool: it connects and waits).
void PoolState::give_up(Request& r, const galay::Result<void>& w) {
    r.abandoned = true;
    if (r.sent < r.batch.size())
        std::erase_if(waiting, [&](const auto& q) { return q.get() == &r; });
    bool cancel_missing = false;
    for (Conn& c : conns) {
        Session* s = c.session.get();
        if (s == nullptr || s->dead) continue;
        const bool carries = std::any_of(s->inflight.begin(), s->inflight.end(),
                                         [&](auto& f) { return f.req.get() == &r && !f.answered; });
        if (!carries) continue;
        if (s->cancel == nullptr) {
            cancel_missing = true;
            continue;
        }
        ++stats.cancels_sent;
        galay::spawn([](std::shared_ptr<PGcancel> c) -> galay::Task<void> {
            co_await galay::spawn_blocking([&c] {
                char err[256];
                PQcancel(c.get(), err, sizeof err);
            });
        }(s->cancel));
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.timeout).count();
    const std::string why = cancel_missing ? "no result in time (no cancel)"
                            : w.error() == std::errc::timed_out
                                ? "no result within " + std::to_string(ms) + " ms"
                                : "cancelled";
    for (std::size_t k = 0; k < r.batch.size(); ++k) {
        if (r.got[k]) continue;
        QueryResult e = std::unexpected(
            Error{ErrorKind::timeout, k >= r.sent ? "no connection was free in time" : why, ""});
        if (r.each)
            r.each(k, std::move(e));
        else
            r.results[k] = std::move(e);
    }
}

} // namespace detail

template <class R>
Call<R>&& Call<R>::timeout(std::chrono::nanoseconds d) && {
    req_->timeout = d;
    return std::move(*this);
}

template <class R>
galay::Task<R> Call<R>::run() {
    // This Call owns the task, so its members outlive the frame.
    detail::Request& r = *req_;
    if (r.left > 0 && state_->start(req_)) {
        galay::Result<void> w;
        if (r.timeout.count() > 0)
            w = co_await r.done.wait().timeout(r.timeout);
        else
            w = co_await r.done.wait();
        if (!w && r.left > 0) state_->give_up(r, w);
    }
    // Every result is in (or ended): nothing refers to them any more.
    if constexpr (std::is_same_v<R, QueryResult>)
        co_return std::move(r.results[0]);
    else if constexpr (!std::is_void_v<R>)
        co_return std::move(r.results);
}

template class Call<QueryResult>;
template class Call<std::vector<QueryResult>>;
template class Call<void>;

galay::Task<std::expected<Pool, Error>> Pool::open(Options o) {
    // Not a coroutine itself: the options are moved into the state here, so the task never
    // refers to the caller's (often temporary) argument.
    auto state = std::make_shared<detail::PoolState>();
    state->opts = std::move(o);
    return open_state(std::move(state));
}

galay::Task<std::expected<Pool, Error>> Pool::open_state(std::shared_ptr<detail::PoolState> state) {
    const Options& o = state->opts;
    if (o.connections < 1 || o.max_inflight < 1 || o.sync_every < 1)
        co_return std::unexpected(Error{ErrorKind::connect, "bad pool options", ""});
    state->conns.resize(static_cast<std::size_t>(o.connections));
    for (auto& c : state->conns) {
        auto s = co_await state->connect();
        if (!s) co_return std::unexpected(s.error());
        c.session = std::move(*s);
    }
    for (std::size_t i = 0; i < state->conns.size(); ++i)
        galay::spawn(state->run(i)); // detached: it ends when the pool is closed
    co_return Pool(std::move(state));
}

QueryCall Pool::query_params(std::string sql, std::vector<Param> params) {
    Batch b;
    b.add_params(sql, std::move(params));
    auto r = std::make_shared<detail::Request>(std::move(b), nullptr);
    r->timeout = state_->opts.query_timeout;
    return QueryCall(state_, std::move(r));
}

BatchCall Pool::run(Batch b) {
    auto r = std::make_shared<detail::Request>(std::move(b), nullptr);
    r->timeout = state_->opts.query_timeout;
    return BatchCall(state_, std::move(r));
}

EachCall Pool::run_each(Batch b, ResultHandler each) {
    if (!each) each = [](std::size_t, QueryResult&&) {};
    auto r = std::make_shared<detail::Request>(std::move(b), std::move(each));
    r->timeout = state_->opts.query_timeout;
    return EachCall(state_, std::move(r));
}

Batch& Batch::add_params(std::string_view sql, std::vector<Param> params) {
    if (params_.empty()) { // the first query's (or a single query's) vector is taken as it is
        add_sql(sql, params.size());
        params_ = std::move(params);
        return *this;
    }
    add_sql(sql, params.size());
    for (Param& p : params)
        params_.push_back(std::move(p));
    return *this;
}

void Batch::add_sql(std::string_view sql, std::size_t params) {
    if (sqls_.empty() || sqls_.back() != sql) sqls_.emplace_back(sql);
    entries_.push_back({static_cast<std::uint32_t>(sqls_.size() - 1),
                        static_cast<std::uint32_t>(params_.size()),
                        static_cast<std::uint32_t>(params)});
}

void Batch::reserve(std::size_t queries, std::size_t params) {
    entries_.reserve(queries);
    params_.reserve(queries * params);
}

void Batch::clear() noexcept {
    sqls_.clear();
    params_.clear();
    entries_.clear();
}

void Pool::close() noexcept {
    if (!state_ || state_->closing) return;
    state_->closing = true;
    state_->closed.set();
    for (auto& c : state_->conns)
        if (c.session) state_->lose(*c.session, "the pool is closed", ErrorKind::closed);
    state_->fail_waiting(ErrorKind::closed, "the pool is closed");
}

Stats Pool::stats() const noexcept {
    Stats st = state_->stats;
    st.connections_up = 0;
    for (const auto& c : state_->conns)
        st.connections_up += c.session != nullptr && !c.session->dead;
    return st;
}

} // namespace pg
