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

/// One query, from `query()` until its result is taken (the asking task and the connection that
/// carries it share it: a query that timed out may still be answered later).
struct Pending {
    std::string sql;
    std::vector<Param> params;
    std::chrono::nanoseconds timeout{0};
    galay::Event done;
    std::optional<QueryResult> result;
    bool sent = false, abandoned = false;
    /// The connection it was sent on. Alive while the query waits for its result: a lost
    /// connection ends its queries first.
    struct Session* carrier = nullptr;
};

/// A request on a connection whose results have not all been read, in the order sent.
struct InFlight {
    std::shared_ptr<Pending> query; ///< null: a pipeline sync
    bool answered = false;          ///< its result came; the NULL that ends it has not
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
    std::deque<std::shared_ptr<Pending>> waiting;
    std::size_t next = 0; ///< where dispatch() looks first
    bool closing = false;
    galay::Event closed;
    Stats stats;

    int cap() const { return opts.pipeline ? opts.max_inflight : 1; }
    galay::Task<std::expected<std::shared_ptr<Session>, Error>> connect();
    galay::Task<void> run(std::size_t i);
    galay::Task<void> read_loop(std::shared_ptr<Session> s);
    galay::Task<void> write_loop(std::shared_ptr<Session> s);
    void dispatch();
    bool send(Session& s, const std::shared_ptr<Pending>& p);
    void drain(Session& s, bool& completed);
    void lose(Session& s, const std::string& why, ErrorKind kind = ErrorKind::connection_lost);
    void fail_waiting(ErrorKind kind, const std::string& why);
};

namespace {

void finish(Pending& p, QueryResult r) {
    p.result.emplace(std::move(r));
    p.done.set();
}

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

/// Sends `p` on `s` (PQsendQueryParams, then PQflush or a wake-up of the writer); false when
/// the connection broke (it is then lost, and `p` was not taken).
bool PoolState::send(Session& s, const std::shared_ptr<Pending>& p) {
    // The parameters' pointers: on the stack for up to 16 (no allocation per query).
    const std::size_t n = p->params.size();
    const char* few[16];
    std::vector<const char*> many(n > 16 ? n : 0);
    const char** values = n > 16 ? many.data() : few;
    for (std::size_t k = 0; k < n; ++k)
        values[k] = p->params[k] ? p->params[k]->c_str() : nullptr;
    if (PQsendQueryParams(s.pg, p->sql.c_str(), static_cast<int>(n), nullptr, values, nullptr,
                          nullptr, 0) != 1) {
        lose(s, one_line(PQerrorMessage(s.pg)));
        return false;
    }
    p->sent = true;
    p->carrier = &s;
    s.inflight.push_back({p});
    ++s.queries;
    if (opts.pipeline) {
        // The writer syncs once the tasks ready in this turn have sent theirs, so a burst of
        // queries shares one sync; a long burst is cut every sync_every queries.
        if (++s.unsynced >= opts.sync_every) {
            if (PQpipelineSync(s.pg) != 1) {
                lose(s, one_line(PQerrorMessage(s.pg)));
                return true;
            }
            s.unsynced = 0;
            s.inflight.push_back({nullptr});
        }
        s.wake_writer.notify_one();
        return true;
    }
    const int f = PQflush(s.pg);
    if (f < 0) lose(s, one_line(PQerrorMessage(s.pg)));
    if (f == 1) s.wake_writer.notify_one();
    return true;
}

/// Hands the queued queries to connections with room, in order. One at a time per connection:
/// the next free one after the last used (the load spreads). Pipeline mode: the last used one
/// while it has room, so that a burst of queries (the tasks its last results woke) goes out
/// as one sync group rather than one query per connection.
void PoolState::dispatch() {
    while (!waiting.empty() && !closing) {
        Session* room = nullptr;
        for (std::size_t k = 0; k < conns.size() && room == nullptr; ++k) {
            Session* s = conns[(next + k) % conns.size()].session.get();
            if (s != nullptr && !s->dead && s->queries < cap()) {
                room = s;
                next = (next + k + (opts.pipeline ? 0 : 1)) % conns.size();
            }
        }
        if (room == nullptr) return;
        std::shared_ptr<Pending> p = std::move(waiting.front());
        waiting.pop_front();
        if (p->abandoned) continue;
        if (!send(*room, p)) waiting.push_front(std::move(p)); // another connection takes it
    }
}

/// Reads every complete result there is and ends its query; `completed` when one ended.
void PoolState::drain(Session& s, bool& completed) {
    while (!s.inflight.empty() && !PQisBusy(s.pg)) {
        InFlight& head = s.inflight.front();
        PGresult* r = PQgetResult(s.pg);
        if (r == nullptr) { // the end of the head query's results
            if (head.query == nullptr || !head.answered) {
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
            if (head.query != nullptr) return lose(s, "a sync result before its queries' ends");
            s.inflight.pop_front();
            continue;
        }
        if (head.query == nullptr || head.answered) {
            // A second result for one query: PQsendQueryParams runs one statement, so only
            // COPY and the like would come here; it is not a query this pool serves.
            PQclear(r);
            if (head.query == nullptr) return lose(s, "a result where a sync was expected");
            continue;
        }
        head.answered = true;
        if (!head.query->abandoned)
            finish(*head.query, outcome(r));
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
        if (f.query && !f.answered && !f.query->abandoned)
            finish(*f.query, std::unexpected(Error{kind, why, ""}));
    s.inflight.clear();
    s.queries = 0;
    s.wake_writer.notify_one(); // the writer sees `dead` and ends
    s.afd.reset();              // both tasks' waits end; galay lets go of the socket
    PQfinish(s.pg);
    s.pg = nullptr;
}

void PoolState::fail_waiting(ErrorKind kind, const std::string& why) {
    std::deque<std::shared_ptr<Pending>> all;
    all.swap(waiting);
    for (auto& p : all)
        if (!p->abandoned) finish(*p, std::unexpected(Error{kind, why, ""}));
}

galay::Task<void> PoolState::write_loop(std::shared_ptr<Session> s) {
    for (;;) {
        auto w = co_await s->wake_writer.wait();
        if (!w || s->dead) co_return;
        if (s->unsynced > 0) {
            if (PQpipelineSync(s->pg) != 1) co_return lose(*s, one_line(PQerrorMessage(s->pg)));
            s->unsynced = 0;
            s->inflight.push_back({nullptr});
        }
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

} // namespace detail

QueryCall&& QueryCall::timeout(std::chrono::nanoseconds d) && {
    pending_->timeout = d;
    return std::move(*this);
}

galay::Task<QueryResult> QueryCall::run() {
    // This QueryCall owns the task, so its members outlive the frame.
    detail::PoolState* s = state_.get();
    const std::shared_ptr<detail::Pending>& p = pending_;
    if (s->closing) co_return std::unexpected(Error{ErrorKind::closed, "the pool is closed", ""});
    s->waiting.push_back(p);
    s->dispatch();
    galay::Result<void> w;
    if (p->timeout.count() > 0)
        w = co_await p->done.wait().timeout(p->timeout);
    else
        w = co_await p->done.wait();
    if (w || p->result) co_return std::move(*p->result);
    p->abandoned = true;
    if (!p->sent) {
        std::erase(s->waiting, p);
        co_return std::unexpected(Error{ErrorKind::timeout, "no connection was free in time", ""});
    }
    // Ask the server to stop it, from the blocking pool: PQcancel connects and waits.
    std::shared_ptr<PGcancel> cancel = p->carrier->cancel;
    if (cancel == nullptr)
        co_return std::unexpected(Error{ErrorKind::timeout, "no result in time (no cancel)", ""});
    ++s->stats.cancels_sent;
    galay::spawn([](std::shared_ptr<PGcancel> c) -> galay::Task<void> {
        co_await galay::spawn_blocking([&c] {
            char err[256];
            PQcancel(c.get(), err, sizeof err);
        });
    }(std::move(cancel)));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(p->timeout).count();
    co_return std::unexpected(Error{ErrorKind::timeout,
                                    w.error() == std::errc::timed_out
                                        ? "no result within " + std::to_string(ms) + " ms"
                                        : "cancelled",
                                    ""});
}

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
    auto p = std::make_shared<detail::Pending>();
    p->sql = std::move(sql);
    p->params = std::move(params);
    p->timeout = state_->opts.query_timeout;
    return QueryCall(state_, std::move(p));
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
