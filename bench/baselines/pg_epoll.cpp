// raw_pg: the floor for driving libpq from an event loop, with no galay code: one thread, one
// level-triggered epoll set, N non-blocking libpq connections running `SELECT $1::int`.
//
//   raw_pg --conninfo STR [--connections 16] [--duration 5] [--warmup 1] [--mode single|pipeline]
//          [--depth 16] [--inflight 1000] [--prepared] [--malloc-trim BYTES] [--json]
//
// Connecting: PQconnectStart for every connection at once, then PQconnectPoll whenever the socket
// is ready the way the last call asked for (writable before the first call), re-reading PQsocket
// after every call because libpq opens a new socket for each address and protocol fallback it
// tries. Running: PQsetnonblocking; a query is PQsendQueryParams (PQsendQueryPrepared with
// --prepared, after one PQsendPrepare), then PQflush, and EPOLLOUT is watched only while PQflush
// says output is left; on input, PQconsumeInput, then PQgetResult while !PQisBusy. `single`: one
// query in flight per connection. `pipeline`: PQenterPipelineMode, batches of --depth queries each
// followed by PQpipelineSync, --inflight queries in flight across the connections (split evenly),
// a connection refilled with as many queries as a completed sync freed. Every reply is checked
// against the parameter sent (pg_client.hpp); a wrong value or an error result is an error.
//
// Measured: queries completed, wall time and this process's CPU (getrusage) over --duration
// seconds after --warmup; then no new query is sent and the ones in flight are waited for (10 s).
// A connection lost counts every query it had in flight as an error. Exit 0 with no error, 1 with
// errors or when a connection cannot be made (one line with libpq's message), 2 on bad flags.
#include "pg_client.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <vector>

namespace {

constexpr const char* kTool = "raw_pg";

struct Options : foreign::pg::Options, foreign::pg::ModeOptions {};

/// A request whose replies have not all been read, in the order sent.
struct Item {
    enum Kind { Query, Sync, Prepare } kind;
    std::int32_t value = 0;
    bool answered = false; ///< its result came; the NULL that ends it has not
};

struct Conn {
    PGconn* pg = nullptr;
    int fd = -1; ///< the socket registered in the epoll set
    std::uint32_t events = 0;
    enum State { Connecting, Preparing, Running, Dead } state = Connecting;
    std::deque<Item> queue;
    int queries = 0; ///< queries in `queue`
    int cap = 1;     ///< queries in flight at most
};

class Client {
public:
    explicit Client(const Options& o)
        : o_(o)
        , conns_(static_cast<std::size_t>(o.connections)) {
        for (int i = 0; i < o.connections; ++i) {
            const int share = o.inflight / o.connections + (i < o.inflight % o.connections);
            conns_[static_cast<std::size_t>(i)].cap = o.pipeline() ? share : 1;
        }
    }
    ~Client() {
        for (Conn& c : conns_)
            PQfinish(c.pg);
        if (ep_ >= 0) ::close(ep_);
    }

    int run();

private:
    bool connect_all();
    void on_event(Conn& c, std::uint32_t ev);
    void connect_step(Conn& c);
    void on_connected(Conn& c);
    void read(Conn& c);
    void refill(Conn& c);
    void flush(Conn& c);
    bool watch(Conn& c, std::uint32_t events);
    void lose(Conn& c, const std::string& why);
    void error(const std::string& what);
    bool wait(double until);
    bool idle() const;

    Options o_;
    std::vector<Conn> conns_;
    int ep_ = -1;
    std::string fatal_;
    bool issuing_ = true;
    std::uint64_t next_ = 0, done_ = 0, errors_ = 0;
    int lost_ = 0;
    std::string first_error_;
};

void Client::error(const std::string& what) {
    if (errors_++ == 0) first_error_ = what;
}

bool Client::watch(Conn& c, std::uint32_t events) {
    const int s = PQsocket(c.pg);
    if (s < 0) {
        lose(c, "no socket: " + std::string(PQerrorMessage(c.pg)));
        return false;
    }
    // While connecting, libpq closes a socket that failed (a refused address, a protocol
    // fallback) and opens another, often with the same number: closing took the old one out of
    // the set, so the number is registered again (EPOLL_CTL_MOD fails with ENOENT, then ADD).
    // Never EPOLL_CTL_DEL by an old number: another connection may own it by now. Once
    // connected, the socket stays until PQfinish.
    epoll_event e{};
    e.events = events;
    e.data.ptr = &c;
    if (c.state != Conn::Connecting && s == c.fd && events == c.events) return true;
    int rc = -1;
    if (s == c.fd) {
        rc = ::epoll_ctl(ep_, EPOLL_CTL_MOD, s, &e);
        if (rc != 0 && errno == ENOENT) rc = ::epoll_ctl(ep_, EPOLL_CTL_ADD, s, &e);
    } else {
        rc = ::epoll_ctl(ep_, EPOLL_CTL_ADD, s, &e);
        if (rc != 0 && errno == EEXIST) rc = ::epoll_ctl(ep_, EPOLL_CTL_MOD, s, &e);
    }
    if (rc != 0) {
        lose(c, std::string("epoll_ctl: ") + std::strerror(errno));
        return false;
    }
    c.fd = s;
    c.events = events;
    return true;
}

void Client::lose(Conn& c, const std::string& message) {
    if (c.state == Conn::Dead) return;
    const std::string why = foreign::pg::one_line(message.c_str());
    if (c.state == Conn::Connecting || c.state == Conn::Preparing) {
        if (fatal_.empty()) fatal_ = why;
    } else {
        ++lost_;
        // Every query it had in flight is lost; the message says why once.
        for (const Item& it : c.queue)
            if (it.kind == Item::Query && !it.answered) error("connection lost: " + why);
    }
    c.state = Conn::Dead;
    c.queue.clear();
    c.queries = 0;
    PQfinish(c.pg); // closes the socket, which leaves the epoll set
    c.pg = nullptr;
    c.fd = -1;
}

void Client::connect_step(Conn& c) {
    switch (PQconnectPoll(c.pg)) {
    case PGRES_POLLING_READING:
        watch(c, EPOLLIN);
        break;
    case PGRES_POLLING_WRITING:
        watch(c, EPOLLOUT);
        break;
    case PGRES_POLLING_OK:
        on_connected(c);
        break;
    default:
        lose(c, PQerrorMessage(c.pg));
    }
}

void Client::on_connected(Conn& c) {
    if (PQsetnonblocking(c.pg, 1) != 0) return lose(c, PQerrorMessage(c.pg));
    if (o_.prepared) {
        static const Oid types[1] = {foreign::pg::kInt4};
        if (PQsendPrepare(c.pg, foreign::pg::kStatement, foreign::pg::kSql, 1, types) != 1)
            return lose(c, PQerrorMessage(c.pg));
        c.state = Conn::Preparing;
        c.queue.push_back({Item::Prepare});
        return flush(c);
    }
    c.state = Conn::Running;
    if (o_.pipeline() && PQenterPipelineMode(c.pg) != 1) return lose(c, PQerrorMessage(c.pg));
    refill(c);
}

/// Sends as many queries as the connection has room for: one (single), or batches of --depth
/// each closed by a sync (pipeline).
void Client::refill(Conn& c) {
    if (!issuing_ || c.state != Conn::Running) return;
    bool sent = false;
    while (c.queries < c.cap) {
        const int n = o_.pipeline() ? std::min(o_.depth, c.cap - c.queries) : 1;
        for (int i = 0; i < n; ++i) {
            const std::int32_t v = foreign::pg::value_of(next_++);
            if (!foreign::pg::send(c.pg, o_.prepared, v)) return lose(c, PQerrorMessage(c.pg));
            c.queue.push_back({Item::Query, v});
            ++c.queries;
        }
        if (o_.pipeline()) {
            if (PQpipelineSync(c.pg) != 1) return lose(c, PQerrorMessage(c.pg));
            c.queue.push_back({Item::Sync});
        }
        sent = true;
    }
    if (sent) flush(c);
}

void Client::flush(Conn& c) {
    const int r = PQflush(c.pg);
    if (r < 0) return lose(c, PQerrorMessage(c.pg));
    watch(c, std::uint32_t{EPOLLIN} | (r == 1 ? std::uint32_t{EPOLLOUT} : 0u));
}

void Client::read(Conn& c) {
    if (PQconsumeInput(c.pg) != 1) return lose(c, PQerrorMessage(c.pg));
    bool refill_due = false;
    while (!c.queue.empty() && !PQisBusy(c.pg)) {
        Item& head = c.queue.front();
        PGresult* r = PQgetResult(c.pg);
        if (r == nullptr) { // the end of the head request's results
            if (head.kind == Item::Sync || !head.answered) {
                if (PQstatus(c.pg) == CONNECTION_BAD) return lose(c, PQerrorMessage(c.pg));
                return lose(c, "libpq ended a request that had no result");
            }
            if (head.kind == Item::Query) {
                --c.queries;
                refill_due |= !o_.pipeline();
            } else {
                c.state = Conn::Running;
                if (o_.pipeline() && PQenterPipelineMode(c.pg) != 1)
                    return lose(c, PQerrorMessage(c.pg));
                refill_due = true;
            }
            c.queue.pop_front();
            continue;
        }
        const ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) { // not followed by a NULL
            PQclear(r);
            if (head.kind != Item::Sync) return lose(c, "a sync result before its queries' ends");
            c.queue.pop_front();
            refill_due = true;
            continue;
        }
        if (head.kind == Item::Prepare) {
            if (st != PGRES_COMMAND_OK) {
                const std::string msg = PQresultErrorMessage(r);
                PQclear(r);
                return lose(c, "PQsendPrepare: " + msg);
            }
        } else if (head.kind == Item::Query && !head.answered) {
            const std::string wrong = foreign::pg::check(r, head.value);
            if (wrong.empty())
                ++done_;
            else
                error(wrong);
        } else {
            const std::string msg = PQresultErrorMessage(r);
            PQclear(r);
            return lose(c, "an unexpected " + std::string(PQresStatus(st)) + " result " + msg);
        }
        head.answered = true;
        PQclear(r);
    }
    if (c.state == Conn::Running && PQstatus(c.pg) == CONNECTION_BAD)
        return lose(c, PQerrorMessage(c.pg));
    if (refill_due) refill(c);
}

void Client::on_event(Conn& c, std::uint32_t ev) {
    if (c.state == Conn::Dead) return;
    if (c.state == Conn::Connecting) return connect_step(c);
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) read(c);
    if (c.state != Conn::Dead && (ev & EPOLLOUT)) flush(c);
}

/// One epoll_wait (until `until` at most) and its events; false on an epoll error.
bool Client::wait(double until) {
    epoll_event evs[256];
    const double left = until - foreign::wall_s();
    const int ms = left <= 0 ? 0 : static_cast<int>(std::ceil(left * 1000));
    const int n = ::epoll_wait(ep_, evs, 256, ms);
    if (n < 0) {
        if (errno == EINTR) return true;
        fatal_ = std::string("epoll_wait: ") + std::strerror(errno);
        return false;
    }
    for (int i = 0; i < n; ++i)
        on_event(*static_cast<Conn*>(evs[i].data.ptr), evs[i].events);
    return true;
}

bool Client::idle() const {
    for (const Conn& c : conns_)
        if (c.state != Conn::Dead && !c.queue.empty()) return false;
    return true;
}

bool Client::connect_all() {
    for (Conn& c : conns_) {
        c.pg = PQconnectStart(o_.conninfo.c_str());
        if (c.pg == nullptr) {
            fatal_ = "PQconnectStart: out of memory";
            return false;
        }
        if (PQstatus(c.pg) == CONNECTION_BAD) {
            lose(c, PQerrorMessage(c.pg));
            return false;
        }
        foreign::pg::quiet_notices(c.pg);
        watch(c, EPOLLOUT); // as if PQconnectPoll had asked for writing
    }
    const double deadline = foreign::wall_s() + 30;
    while (fatal_.empty()) {
        bool ready = true;
        for (const Conn& c : conns_)
            ready &= c.state == Conn::Running;
        if (ready) return true;
        if (foreign::wall_s() > deadline) {
            fatal_ = "not every connection was made within 30 s";
            return false;
        }
        if (!wait(deadline)) return false;
    }
    return false;
}

int Client::run() {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) {
        std::fprintf(stderr, "%s: epoll_create1: %s\n", kTool, std::strerror(errno));
        return 1;
    }
    // The connections' first batches go out as they connect; the warm-up starts once all are.
    if (!connect_all()) {
        std::fprintf(stderr, "%s: connect: %s\n", kTool, fatal_.c_str());
        return 1;
    }
    const double start = foreign::wall_s();
    const double measure_at = start + o_.warmup, end_at = measure_at + o_.duration;
    while (foreign::wall_s() < measure_at && lost_ < o_.connections && wait(measure_at)) {
    }
    const foreign::Mark from = foreign::Mark::now(done_);
    while (foreign::wall_s() < end_at && lost_ < o_.connections && wait(end_at)) {
    }
    const foreign::Mark to = foreign::Mark::now(done_);
    issuing_ = false;
    const double drain_until = foreign::wall_s() + 10;
    while (!idle() && foreign::wall_s() < drain_until && wait(drain_until)) {
    }
    for (const Conn& c : conns_)
        for (const Item& it : c.queue)
            if (c.state != Conn::Dead && it.kind == Item::Query && !it.answered)
                error("no reply within 10 s after the run");
    if (!fatal_.empty()) error(fatal_);

    return foreign::pg::report(kTool, o_,
                               {o_.mode, o_.pipeline() ? o_.depth : 1,
                                o_.pipeline() ? o_.inflight : o_.connections, from, to, done_,
                                errors_, lost_, first_error_});
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    cli::App app{"raw_pg: N non-blocking libpq connections on one epoll loop, SELECT $1::int "
                 "(the floor of the PostgreSQL comparison)"};
    foreign::pg::add_options(app, o);
    foreign::pg::add_mode_options(app, o);
    if (auto code = foreign::parse(app, argc, argv, kTool)) return *code;
    foreign::pg::apply_heap(o);
    if (auto problem = foreign::pg::mode_problem(o, o); !problem.empty())
        return foreign::usage_error(kTool, problem);
    Client client(o);
    return client.run();
}
