// The PostgreSQL pool of pg_pool.hpp: connecting, the reader and writer tasks of a connection,
// dispatching queries, timeouts with PQcancel, losing and making connections again.
#include "pg_pool.hpp"

#include <algorithm>
#include <deque>
#include <vector>

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

/// A query or a batch, from its call's start until its results are in or it gives up. It lives
/// in the frame of the task awaiting it: the pool refers to it (in `waiting`, in a connection's
/// `inflight`) only while a result of it is still to come, and forget() takes every such
/// reference back when the waiter stops first.
struct Request {
    const Batch& batch;
    PoolState* state;
    std::chrono::nanoseconds timeout;
    galay::Event done;              ///< set when the last result is in
    ResultHandler* each = nullptr;  ///< run_each: where results go (else `results`)
    QueryResult* results = nullptr; ///< one per query, in the batch's order
    std::size_t sent = 0;           ///< the batch's queries sent so far (the first ones)
    std::size_t left = 0;           ///< results not in yet
    bool queued = false;            ///< in `waiting` (some of it not sent yet)
    bool abandoned = false;         ///< gave up: forgotten by the pool

    Request(const Batch& b, PoolState* s, std::chrono::nanoseconds t, ResultHandler* h,
            QueryResult* out) noexcept
        : batch(b)
        , state(s)
        , timeout(t)
        , each(h)
        , results(out)
        , left(b.size()) {}
    Request(const Request&) = delete;
    Request& operator=(const Request&) = delete;
    ~Request();
    void settle(std::size_t k, QueryResult r) {
        if (each != nullptr)
            (*each)(k, std::move(r));
        else
            results[k] = std::move(r);
        if (--left == 0) done.set();
    }
};

/// A query sent on a connection whose results have not all been read, or a sync, in the order
/// sent. `req` is the query's request until its result is handed over (or its request gave up):
/// null after, so that nothing here outlives what it points to.
struct InFlight {
    Request* req = nullptr;
    std::size_t index = 0; ///< the query's place in its batch
    bool sync = false;     ///< a pipeline sync, not a query
    bool answered = false; ///< its result came; the NULL that ends it has not
};

/// A queue in one power-of-two array that grows and never shrinks. A connection's queries in
/// flight come and go by the thousand in pipeline mode, and a std::deque allocated and freed a
/// block for every 21 of them.
template <class T>
class Ring {
public:
    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    T& front() noexcept { return buf_[head_]; }
    /// The i-th from the front.
    T& operator[](std::size_t i) noexcept { return buf_[(head_ + i) & (buf_.size() - 1)]; }
    void push_back(const T& v) {
        if (size_ == buf_.size()) grow();
        buf_[(head_ + size_++) & (buf_.size() - 1)] = v;
    }
    void pop_front() noexcept {
        head_ = (head_ + 1) & (buf_.size() - 1);
        --size_;
    }
    void clear() noexcept { head_ = size_ = 0; }

private:
    void grow() {
        std::vector<T> bigger(buf_.empty() ? 16 : buf_.size() * 2);
        for (std::size_t i = 0; i < size_; ++i)
            bigger[i] = (*this)[i];
        buf_.swap(bigger);
        head_ = 0;
    }
    std::vector<T> buf_;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
};

/// One connection's life, from connected to lost: a new one for every reconnection, so nothing
/// (a waiter, a stale wake-up) carries over to the next socket.
struct Session {
    std::size_t index = 0; ///< its connection's place in the pool
    PGconn* pg = nullptr;
    galay::AsyncFd afd;
    std::shared_ptr<PGcancel> cancel;
    Ring<InFlight> inflight;
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
    std::deque<Request*> waiting; ///< not sent yet, or not all of it
    std::size_t next = 0;         ///< where dispatch() looks first
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
    void send(Session& s, Request& r, std::size_t n);
    bool sync(Session& s);
    void flush(Session& s);
    bool start(Request& r);
    void give_up(Request& r, const galay::Result<void>& w);
    void forget(Request& r, std::vector<char>* unanswered = nullptr);
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
    s.inflight.push_back({.sync = true});
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
void PoolState::send(Session& s, Request& r, std::size_t n) {
    const Batch& b = r.batch;
    // Pipeline mode: a batch is a sync group of its own (an error in it skips none of another's
    // queries); single queries share a sync per turn of the loop (the writer's) or sync_every.
    const bool group = opts.pipeline && b.size() > 1;
    if (group && s.unsynced > 0 && !sync(s)) return;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = r.sent;
        const Batch::Entry& e = b.entries_[k];
        // The parameters' pointers: on the stack for up to 16 (no allocation per query).
        const char* few[16];
        std::vector<const char*> many(e.count > 16 ? e.count : 0);
        const char** values = e.count > 16 ? many.data() : few;
        for (std::uint32_t j = 0; j < e.count; ++j) {
            const std::uint32_t at = b.params_[e.first + j];
            values[j] = at == Batch::kNull ? nullptr : b.text(at);
        }
        if (PQsendQueryParams(s.pg, b.text(e.sql), static_cast<int>(e.count), nullptr, values,
                              nullptr, nullptr, 0) != 1)
            return lose(s, one_line(PQerrorMessage(s.pg)));
        ++r.sent;
        s.inflight.push_back({&r, k});
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

/// Hands the queued requests to connections with room, in order. A request leaves the queue as
/// soon as all of it is sent: from then on only the connections refer to it.
void PoolState::dispatch() {
    while (!waiting.empty() && !closing) {
        Request& r = *waiting.front();
        const std::size_t want = r.batch.size() - r.sent;
        Session* room = pick(want);
        if (room == nullptr) return;
        send(*room, r, opts.pipeline ? std::min(want, std::size_t(cap() - room->queries)) : 1);
        if (r.sent == r.batch.size() && !waiting.empty() && waiting.front() == &r) {
            waiting.pop_front();
            r.queued = false;
        }
    }
}

/// Reads every complete result there is and ends its query; `completed` when one ended. The
/// result of a query whose request gave up is read and dropped.
void PoolState::drain(Session& s, bool& completed) {
    while (!s.inflight.empty() && !PQisBusy(s.pg)) {
        InFlight& head = s.inflight.front();
        PGresult* r = PQgetResult(s.pg);
        if (r == nullptr) { // the end of the head query's results
            if (head.sync || !head.answered) {
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
            if (!head.sync) return lose(s, "a sync result before its queries' ends");
            s.inflight.pop_front();
            continue;
        }
        if (head.sync || head.answered) {
            // A second result for one query: PQsendQueryParams runs one statement, so only
            // COPY and the like would come here; it is not a query this pool serves.
            PQclear(r);
            if (head.sync) return lose(s, "a result where a sync was expected");
            continue;
        }
        head.answered = true;
        if (Request* req = std::exchange(head.req, nullptr))
            req->settle(head.index, outcome(r));
        else
            PQclear(r); // its waiter gave up
    }
}

/// The connection is gone (or the pool closes): its queries end with `kind`, its tasks stop,
/// and its socket is closed. The reader's task makes it again.
void PoolState::lose(Session& s, const std::string& why, ErrorKind kind) {
    if (s.dead) return;
    s.dead = true;
    if (kind == ErrorKind::connection_lost) ++stats.connections_lost;
    for (std::size_t k = 0; k < s.inflight.size(); ++k)
        if (Request* req = std::exchange(s.inflight[k].req, nullptr))
            req->settle(s.inflight[k].index, std::unexpected(Error{kind, why, ""}));
    s.inflight.clear();
    s.queries = 0;
    s.wake_writer.notify_one(); // the writer sees `dead` and ends
    s.afd.reset();              // both tasks' waits end; galay lets go of the socket
    PQfinish(s.pg);
    s.pg = nullptr;
}

void PoolState::fail_waiting(ErrorKind kind, const std::string& why) {
    std::deque<Request*> all;
    all.swap(waiting);
    for (Request* r : all) { // what was sent of it ends with its connection
        r->queued = false;
        for (std::size_t k = r->sent; k < r->batch.size(); ++k)
            r->settle(k, std::unexpected(Error{kind, why, ""}));
    }
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
bool PoolState::start(Request& r) {
    if (closing) {
        for (std::size_t k = 0; k < r.batch.size(); ++k)
            r.settle(k, std::unexpected(Error{ErrorKind::closed, "the pool is closed", ""}));
        return false;
    }
    waiting.push_back(&r);
    r.queued = true;
    dispatch();
    return true;
}

/// Takes every reference to `r` out of the pool: the queue, and the connections' queries of it
/// not answered yet (their results will be read and dropped). `unanswered`, when given, gets a
/// mark for each of those queries.
void PoolState::forget(Request& r, std::vector<char>* unanswered) {
    r.abandoned = true;
    if (r.queued) {
        std::erase(waiting, &r);
        r.queued = false;
    }
    for (Conn& c : conns) {
        Session* s = c.session.get();
        if (s == nullptr) continue;
        for (std::size_t k = 0; k < s->inflight.size(); ++k) {
            InFlight& f = s->inflight[k];
            if (f.req != &r) continue;
            f.req = nullptr;
            if (unanswered != nullptr) (*unanswered)[f.index] = 1;
        }
    }
}

/// `r`'s wait ended (`w`) before every result came: the rest end with ErrorKind::timeout, the
/// unsent ones leave the queue, and every connection running one of the sent ones is asked to
/// cancel its statement (PQcancel, from the blocking pool: it connects and waits).
void PoolState::give_up(Request& r, const galay::Result<void>& w) {
    bool cancel_missing = false;
    for (Conn& c : conns) {
        Session* s = c.session.get();
        if (s == nullptr || s->dead) continue;
        bool carries = false;
        for (std::size_t k = 0; k < s->inflight.size() && !carries; ++k)
            carries = s->inflight[k].req == &r;
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
    std::vector<char> missing(r.batch.size(), 0);
    for (std::size_t k = r.sent; k < missing.size(); ++k)
        missing[k] = 1;
    forget(r, &missing);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.timeout).count();
    const bool timed_out = w.error() == std::errc::timed_out;
    const std::string why = !timed_out       ? "cancelled"
                            : cancel_missing ? "no result in time (no cancel)"
                                             : "no result within " + std::to_string(ms) + " ms";
    for (std::size_t k = 0; k < missing.size(); ++k) {
        if (!missing[k]) continue;
        QueryResult e = std::unexpected(
            Error{ErrorKind::timeout,
                  k >= r.sent && timed_out ? "no connection was free in time" : why, ""});
        if (r.each != nullptr)
            (*r.each)(k, std::move(e));
        else
            r.results[k] = std::move(e);
    }
}

/// A request destroyed with results still to come (its waiter's frame went without resuming:
/// a scheduler shutting down) leaves nothing behind that points to it.
Request::~Request() {
    if (left > 0 && !abandoned) state->forget(*this);
}

} // namespace detail

template <class R>
Call<R>::Call(std::shared_ptr<detail::PoolState> s, Batch b, ResultHandler each) noexcept
    : state_(std::move(s))
    , owned_(std::move(b))
    , each_(std::move(each))
    , timeout_(state_->opts.query_timeout) {}

template <class R>
Call<R>::Call(std::shared_ptr<detail::PoolState> s, const Batch* b, ResultHandler each) noexcept
    : state_(std::move(s))
    , batch_(b)
    , each_(std::move(each))
    , timeout_(state_->opts.query_timeout) {}

template <class R>
galay::Task<R> Call<R>::run() {
    // This Call owns the task, so its members outlive the frame.
    const Batch& b = batch_ != nullptr ? *batch_ : owned_;
    // Filled in as they come; a query with no result by the end keeps the timeout error.
    const auto none = [] { return QueryResult(std::unexpect, Error{ErrorKind::timeout, {}, {}}); };
    auto out = [&] {
        if constexpr (std::is_same_v<R, QueryResult>) {
            return none();
        } else if constexpr (std::is_void_v<R>) {
            return 0; // run_each: the handler takes them
        } else {
            std::vector<QueryResult> all;
            all.reserve(b.size());
            for (std::size_t k = 0; k < b.size(); ++k)
                all.push_back(none());
            return all;
        }
    }();
    QueryResult* results = nullptr;
    if constexpr (std::is_same_v<R, QueryResult>)
        results = &out;
    else if constexpr (!std::is_void_v<R>)
        results = out.data();
    detail::Request r(b, state_.get(), timeout_, std::is_void_v<R> ? &each_ : nullptr, results);
    if (r.left > 0 && state_->start(r)) {
        galay::Result<void> w;
        if (r.timeout.count() > 0)
            w = co_await r.done.wait().timeout(r.timeout);
        else
            w = co_await r.done.wait();
        if (!w && r.left > 0) state_->give_up(r, w);
    }
    // Every result is in (or ended): nothing in the pool refers to `r` any more.
    if constexpr (!std::is_void_v<R>) co_return std::move(out);
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

QueryCall Pool::query_params(std::string_view sql, const std::vector<Param>& params) {
    Batch b;
    b.add_params(sql, params);
    return QueryCall(state_, std::move(b));
}

BatchCall Pool::run(const Batch& b) {
    return BatchCall(state_, &b);
}

BatchCall Pool::run(Batch&& b) {
    return BatchCall(state_, std::move(b));
}

EachCall Pool::run_each(const Batch& b, ResultHandler each) {
    if (!each) each = [](std::size_t, QueryResult&&) {};
    return EachCall(state_, &b, std::move(each));
}

EachCall Pool::run_each(Batch&& b, ResultHandler each) {
    if (!each) each = [](std::size_t, QueryResult&&) {};
    return EachCall(state_, std::move(b), std::move(each));
}

Batch& Batch::add_params(std::string_view sql, const std::vector<Param>& params) {
    add_sql(sql, params.size());
    for (const Param& p : params)
        put(p);
    return *this;
}

void Batch::add_sql(std::string_view sql, std::size_t params) {
    // (last_sql_ past the text: a Batch moved from, whose text went with the move)
    if (last_sql_ >= text_.size() || std::string_view(text(last_sql_)) != sql) {
        last_sql_ = static_cast<std::uint32_t>(text_.size());
        text_.append(sql.data(), sql.size());
        text_.push_back('\0');
    }
    entries_.push_back({last_sql_, static_cast<std::uint32_t>(params_.size()),
                        static_cast<std::uint32_t>(params)});
}

void Batch::put_text(std::string_view s) {
    params_.push_back(static_cast<std::uint32_t>(text_.size()));
    text_.append(s.data(), s.size());
    text_.push_back('\0');
}

void Batch::reserve(std::size_t queries, std::size_t params, std::size_t bytes) {
    entries_.reserve(queries);
    params_.reserve(queries * params);
    text_.reserve(bytes);
}

void Batch::clear() noexcept {
    text_.clear();
    params_.clear();
    entries_.clear();
    last_sql_ = kNull;
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
