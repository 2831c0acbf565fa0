// http_turns: an HTTP/1.1 load generator (closed loop, or open at --rate) that loads several
// servers in turns, for latency comparisons on a machine whose speed drifts
// (bench/studies/http_servers.py --mode turns).
//
//   http_turns --target galay=127.0.0.1:8080 --target nginx=127.0.0.1:8081 -c 100 -d 5
//              --warmup 1 --slice 0.5 [--rate 50000] [--path /] [--rounds-order rotate] [--json]
//
// It opens -c keep-alive connections to every target (in waves of at most 1000 connects in
// progress; any connect failure ends the run with a message naming the target), then gives the
// targets turns of --slice seconds. In a target's turn each of its connections has exactly one
// request outstanding (`GET PATH HTTP/1.1` + Host), and sends the next one as soon as the last
// byte of a response has been read: the load shape of `wrk -t1 -cN`. When the slice is over no
// new request is sent, and the turn ends when the last outstanding response has arrived (the
// drain); then the next target's turn starts. So no request is outstanding while its target is
// not in its turn, and no latency contains another target's turn. This is what pausing wrk
// (SIGSTOP) cannot give: a stopped wrk's requests wait out the pause.
//
// --rate R makes the load open-loop: in a target's turn requests are due at R per second, evenly
// spaced from the turn's start, each sent on a free connection as soon as it is due (or, when
// every connection is waiting for a response, as soon as one is free), and its latency counts
// from when it was due, so a server that falls behind is charged for the wait (no coordinated
// omission). Every request due before the slice ends is sent, the last ones after it if they
// found every connection busy (the turn then lasts until they are answered): a measured turn has
// exactly ceil(--slice x R) requests, the worst moments included. Every target then gets the same
// offered load, whatever their speed: the closed loop gives a faster server more requests per
// second, and once the client is saturated a fast server's tail is partly the client's queueing.
//
// ceil(--warmup / --slice) turns per target are not counted (warm-up), then ceil(-d / --slice)
// measured turns per target. The order is rotated from one cycle of turns to the next (A B C,
// B C A, C A B, ...; --rounds-order alternate: A B C, C B A, ...), so no target always follows
// the same one.
//
// Latency per request: from its write to the read that brought the last byte of its response,
// in a log-linear histogram (<1% relative error). Responses are framed by the status line, the
// headers and Content-Length (case-insensitive); Transfer-Encoding (chunked) is not supported and
// counts as a protocol error, as do bytes past the end of a response (nothing is pipelined) and
// bytes nobody asked for. A non-2xx status, `Connection: close`, a peer close, a reset and a
// request outstanding longer than --timeout are errors too; a connection that had one is closed
// and reconnected. Errors are counted in every turn, warm-up included; any error: exit status 1
// (after the report).
//
// Per target: measured requests (2xx), errors by kind, active seconds (the sum of its measured
// turns, from the first request written to the last response read), throughput = requests /
// active seconds, latency min/mean/stdev/p50/p90/p95/p99/p99.9/max, and `responses`: every
// complete response it sent during the whole run (warm-up included), the count to divide a
// server's CPU over the whole run by. Also the p99 of each measured turn on its own, in cycle
// order (JSON `turn_p99_us`; null for a turn without a 2xx response; the table shows their
// median): the k-th turn of every target is in the same cycle, seconds apart, so comparing
// targets turn by turn leaves out what a stall of the machine did to one cycle. And the client's
// own load in the target's measured turns: `client_busy`, this thread's CPU time over the turns'
// wall time (1.0: the client never waited, so it, not the server, set the pace and latencies
// include its own queue of ready responses), and `client_events_per_wait` (JSON; `ev/wait` in
// the table), the mean number of ready connections an epoll_wait returned. At --rate the client
// polls without waiting while requests fall due, so it is always busy: client_busy is null
// there (`-` in the table).
//
// Latency at the socket: the same requests, up to the kernel's receive timestamp of the last
// segment the completing read took (SO_TIMESTAMPNS; on loopback, the moment the server's send
// delivered it) instead of the read itself. It leaves out the client's own queue of ready
// responses, which the closed loop puts in every latency once the client is the bottleneck
// (JSON `socket_latency_us`, `turn_socket_p99_us`; `sock_p99_us` in the table).
//
// One thread, non-blocking sockets, level-triggered epoll, one read per readiness event. The
// histogram is every program's (measure/histogram.hpp); like the other baselines it uses no galay
// code.
#include "common.hpp"
#include "load_common.hpp"
#include "measure/format.hpp"        // the suite's number formats (no galay code)
#include "measure/histogram.hpp"     // the suite's latency histogram (no galay code)
#include "measure/latency_stats.hpp" // quantile (no galay code)

#include "galay_cli.hpp"

#include "galay_cli.hpp"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <netdb.h>
#include <string>
#include <string_view>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <vector>

namespace {

using i64 = int64_t;
using u64 = uint64_t;
using baseline::now_ns;
using galay::tools::LatencyHistogram;
using galay::tools::with_commas;

constexpr i64 kSec = 1'000'000'000;
constexpr i64 kMs = 1'000'000;

// CLOCK_REALTIME (what receive timestamps are in) or this thread's CPU time, in ns.
i64 clock_ns(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<i64>(ts.tv_sec) * kSec + ts.tv_nsec;
}

// One latency measure of a target: every measured request, and each measured turn on its own.
struct TurnLatencies {
    LatencyHistogram all;
    LatencyHistogram turn;           // the current measured turn's
    std::vector<double> turn_p99_ns; // each measured turn's p99 (-1: no 2xx response in it)

    void record(i64 ns) {
        all.record(static_cast<u64>(ns));
        turn.record(static_cast<u64>(ns));
    }
    void begin_turn() { turn.reset(); }
    void end_turn() {
        turn_p99_ns.push_back(turn.count() ? static_cast<double>(turn.percentile_ns(0.99)) : -1.0);
    }
};

enum Err { kConnect, kClosed, kReset, kStatus, kTimeout, kProtocol, kConnClose, kErrKinds };
constexpr const char* kErrNames[kErrKinds] = {"connect", "closed",   "reset",           "status",
                                              "timeout", "protocol", "connection_close"};

enum class State : uint8_t { Connecting, Idle, Busy, Dead };

struct Conn {
    int fd = -1;
    uint32_t target = 0;
    State state = State::Dead;
    bool want_out = false;    // waiting for EPOLLOUT to write the rest of the request
    bool in_head = true;      // reading the status line and headers (else the body)
    bool close_after = false; // the response said Connection: close (or HTTP/1.0)
    int status = 0;
    size_t tx_off = 0; // bytes of the request written
    u64 body_left = 0; // body bytes still owed
    i64 sent_at = 0;   // when the outstanding request was written
    i64 arrived = -1;  // kernel receive time of the last bytes read, on the steady clock (-1: none)
    std::string head;  // a head split over reads (empty otherwise: parsed in place)
};

struct Target {
    std::string name, host, hostport; // hostport: for messages and the Host header
    int port = 0;
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
    std::string request;
    uint32_t first = 0, count = 0; // its connections: [first, first + count)

    TurnLatencies latency; // from the request's write to the read of its response's last byte
    // The same requests, up to the kernel's receive timestamp of the response's last bytes
    // instead of the read that took them: the client's own queue of ready responses left out.
    TurnLatencies sock;
    u64 requests = 0;        // measured turns, 2xx
    u64 warmup_requests = 0; // warm-up turns, 2xx
    u64 responses = 0;       // complete responses, every turn, any status
    u64 errors[kErrKinds] = {};
    u64 in_flight = 0;
    i64 active_ns = 0, warmup_ns = 0;
    int turns = 0, warmup_turns = 0;
    // The client's own load in the measured turns: this thread's CPU time and the wall time
    // of the turns (start to end, drain included), and its epoll_waits with the events they
    // returned. A client busy ~100% of a turn is the bottleneck: latencies then hold its queue.
    i64 client_cpu_ns = 0, client_wall_ns = 0;
    u64 waits = 0, wait_events = 0;
    u64 connect_failures = 0; // in the initial connect phase
    std::string connect_error;

    u64 total_errors() const {
        u64 n = 0;
        for (u64 e : errors)
            n += e;
        return n;
    }
};

struct Options {
    std::vector<std::string> targets;
    int connections = 100;
    double duration = 5, warmup = 1, slice = 0.5, timeout = 10;
    double rate = 0; // requests/s in a target's turn (open loop); 0: closed loop
    std::string path = "/", order = "rotate";
    bool json = false;
};

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

// Whether the comma-separated header value has the token (case-insensitive).
bool has_token(std::string_view value, std::string_view token) {
    while (!value.empty()) {
        const size_t comma = value.find(',');
        if (iequals(trim(value.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

// Parses a response head (without its final blank line) into c.status, c.body_left and
// c.close_after. Returns what is wrong with it, or an empty string.
std::string parse_head(Conn& c, std::string_view head) {
    size_t eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    auto digit = [&](size_t i) { return line[i] >= '0' && line[i] <= '9'; };
    if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || !digit(7) || line[8] != ' ' ||
        !digit(9) || !digit(10) || !digit(11) || (line.size() > 12 && line[12] != ' '))
        return "malformed status line '" + std::string(line.substr(0, 60)) + "'";
    c.status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    const bool http10 = line[7] == '0';
    bool close = false, keep_alive = false, have_length = false;
    u64 length = 0;
    while (eol != std::string_view::npos) {
        head.remove_prefix(eol + 2);
        eol = head.find("\r\n");
        const std::string_view h = head.substr(0, eol);
        const size_t colon = h.find(':');
        if (colon == std::string_view::npos || colon == 0)
            return "malformed header line '" + std::string(h.substr(0, 60)) + "'";
        const std::string_view name = h.substr(0, colon), value = trim(h.substr(colon + 1));
        if (iequals(name, "content-length")) {
            u64 v = 0;
            if (value.empty() || value.size() > 15)
                return "bad Content-Length '" + std::string(value.substr(0, 20)) + "'";
            for (char ch : value) {
                if (ch < '0' || ch > '9')
                    return "bad Content-Length '" + std::string(value.substr(0, 20)) + "'";
                v = v * 10 + static_cast<u64>(ch - '0');
            }
            if (have_length && v != length) return "two different Content-Length headers";
            have_length = true;
            length = v;
        } else if (iequals(name, "transfer-encoding")) {
            return "Transfer-Encoding: " + std::string(value.substr(0, 40)) +
                   " (not supported: only responses framed by Content-Length are)";
        } else if (iequals(name, "connection")) {
            close = close || has_token(value, "close");
            keep_alive = keep_alive || has_token(value, "keep-alive");
        }
    }
    if (c.status < 200) return "interim response " + std::to_string(c.status) + " (not expected)";
    if (!have_length && c.status != 204 && c.status != 304)
        return "status " + std::to_string(c.status) +
               " without Content-Length (a body up to the close is not supported)";
    c.body_left = have_length && c.status != 204 && c.status != 304 ? length : 0;
    c.close_after = close || (http10 && !keep_alive);
    return {};
}

class Turns {
public:
    explicit Turns(const Options& o)
        : o_(o) {}
    int run();

private:
    static constexpr size_t kReadBuf = 64 * 1024;
    static constexpr size_t kMaxHead = 64 * 1024;
    static constexpr int kMaxInProgress = 1000;
    static constexpr i64 kCheckEvery = 100 * kMs; // timeout scan of the loaded target

    Options o_;
    std::vector<Target> targets_;
    std::vector<Conn> conns_;
    int ep_ = -1;
    std::vector<char> buf_ = std::vector<char>(kReadBuf);
    i64 timeout_ns_ = 0;

    bool connecting_phase_ = true;
    size_t next_to_connect_ = 0;
    int in_progress_ = 0;

    // The turn under way.
    uint32_t cur_ = 0;
    bool sending_ = false, measured_ = false;
    i64 deadline_ = 0, last_done_ = 0;
    int warmup_turns_ = 0, measured_turns_ = 0;
    // --rate: the turn's free connections, how many requests fall due in it (ceil(slice x
    // rate)) and how many of them were sent.
    std::vector<uint32_t> free_;
    i64 turn_start_ = 0;
    i64 real_offset_ = 0; // CLOCK_REALTIME minus CLOCK_MONOTONIC (receive timestamps are real)
    u64 due_total_ = 0, issued_ = 0;

    bool parse_targets();
    bool resolve(Target& t);
    void ctl(int op, uint32_t id, uint32_t events);
    bool open_socket(uint32_t id);
    void start_connects();
    bool connect_all();
    void on_connect_result(uint32_t id, int err);
    void connected(uint32_t id);
    void error(uint32_t id, Err kind, const std::string& why);
    void drop(uint32_t id);
    void reconnect(uint32_t id);
    void send(uint32_t id, i64 now);
    bool open_loop() const { return o_.rate > 0; }
    i64 due_at(u64 i) const {
        return turn_start_ + static_cast<i64>(static_cast<double>(i) * 1e9 / o_.rate);
    }
    void dispatch(i64 now);
    void flush(uint32_t id);
    void on_readable(uint32_t id);
    void consume(uint32_t id, const char* p, size_t n, i64 now);
    void complete(uint32_t id, i64 now);
    void check_timeouts(Target& t, i64 now);
    void poll(i64 deadline);
    void turn(uint32_t t, bool measured);
    void report(i64 wall_ns) const;
};

bool Turns::parse_targets() {
    std::vector<std::string> names;
    for (const std::string& spec : o_.targets) {
        Target t;
        const size_t eq = spec.find('=');
        const size_t colon = spec.rfind(':');
        if (eq == std::string::npos || eq == 0 || colon == std::string::npos || colon < eq + 2 ||
            colon + 1 == spec.size()) {
            std::fprintf(stderr, "http_turns: --target '%s': expected NAME=HOST:PORT\n",
                         spec.c_str());
            return false;
        }
        t.name = spec.substr(0, eq);
        t.host = spec.substr(eq + 1, colon - eq - 1);
        if (t.host.size() > 2 && t.host.front() == '[' && t.host.back() == ']') // [v6]:port
            t.host = t.host.substr(1, t.host.size() - 2);
        char* end = nullptr;
        const long port = std::strtol(spec.c_str() + colon + 1, &end, 10);
        if (*end != '\0' || port < 1 || port > 65535) {
            std::fprintf(stderr, "http_turns: --target '%s': invalid port\n", spec.c_str());
            return false;
        }
        t.port = static_cast<int>(port);
        if (std::find(names.begin(), names.end(), t.name) != names.end()) {
            std::fprintf(stderr, "http_turns: --target '%s': the name '%s' is given twice\n",
                         spec.c_str(), t.name.c_str());
            return false;
        }
        names.push_back(t.name);
        t.hostport = spec.substr(eq + 1);
        t.request = "GET " + o_.path + " HTTP/1.1\r\nHost: " + t.hostport + "\r\n\r\n";
        targets_.push_back(std::move(t));
    }
    return true;
}

bool Turns::resolve(Target& t) {
    const int rc = baseline::resolve_tcp(t.host, t.port, t.addr, t.addr_len);
    if (rc != 0)
        std::fprintf(stderr, "http_turns: target %s: cannot resolve %s: %s\n", t.name.c_str(),
                     t.host.c_str(), gai_strerror(rc));
    return rc == 0;
}

void Turns::ctl(int op, uint32_t id, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u32 = id;
    if (epoll_ctl(ep_, op, conns_[id].fd, &ev) != 0) baseline::die("http_turns: epoll_ctl");
}

void Turns::error(uint32_t id, Err kind, const std::string& why) {
    Target& t = targets_[conns_[id].target];
    const u64 before = t.total_errors();
    ++t.errors[kind];
    if (before < 3)
        std::fprintf(stderr, "http_turns: target %s (%s), connection %u: %s\n", t.name.c_str(),
                     t.hostport.c_str(), id - t.first, why.c_str());
    else if (before == 3)
        std::fprintf(stderr, "http_turns: target %s: (further errors not shown)\n", t.name.c_str());
}

// Closes the connection (its outstanding request, if any, is abandoned) and opens a new one.
void Turns::drop(uint32_t id) {
    Conn& c = conns_[id];
    if (c.state == State::Busy) --targets_[c.target].in_flight;
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.state = State::Dead;
    reconnect(id);
}

// A socket for connection `id`, connect() started. False if the connection failed at once
// (counted and reported by the caller through on_connect_result).
bool Turns::open_socket(uint32_t id) {
    Conn& c = conns_[id];
    Target& t = targets_[c.target];
    const uint32_t target = c.target;
    c = Conn{};
    c.target = target;
    c.fd = ::socket(t.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
            std::fprintf(stderr,
                         "http_turns: too many open files (%zu connections): raise the limit "
                         "with `ulimit -n`\n",
                         conns_.size());
            std::exit(1);
        }
        baseline::die("http_turns: socket");
    }
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // Receive timestamps: each recvmsg reports when the kernel received the last segment it read
    // (CLOCK_REALTIME). Loopback delivers in the sender's send call, so it is when the server sent
    // the response's last bytes.
    if (setsockopt(c.fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0)
        baseline::die("http_turns: setsockopt SO_TIMESTAMPNS");
    c.state = State::Connecting;
    if (::connect(c.fd, reinterpret_cast<sockaddr*>(&t.addr), t.addr_len) == 0) {
        ctl(EPOLL_CTL_ADD, id, EPOLLIN);
        connected(id);
        return true;
    }
    if (errno == EINPROGRESS) {
        ctl(EPOLL_CTL_ADD, id, EPOLLOUT);
        if (connecting_phase_) ++in_progress_;
        return true;
    }
    const int err = errno;
    ::close(c.fd);
    c.fd = -1;
    c.state = State::Dead;
    errno = err;
    return false;
}

void Turns::reconnect(uint32_t id) {
    if (!open_socket(id))
        error(id, kConnect, std::string("reconnect failed: ") + std::strerror(errno));
}

// Keeps at most kMaxInProgress connects outstanding; called again as each one finishes.
void Turns::start_connects() {
    while (in_progress_ < kMaxInProgress && next_to_connect_ < conns_.size()) {
        const auto id = static_cast<uint32_t>(next_to_connect_++);
        if (!open_socket(id)) on_connect_result(id, errno);
    }
}

void Turns::on_connect_result(uint32_t id, int err) {
    Conn& c = conns_[id];
    if (err == 0) {
        ctl(EPOLL_CTL_MOD, id, EPOLLIN);
        connected(id);
        return;
    }
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.state = State::Dead;
    if (connecting_phase_) {
        Target& t = targets_[c.target];
        if (t.connect_failures++ == 0) t.connect_error = std::strerror(err);
    } else {
        error(id, kConnect, std::string("reconnect failed: ") + std::strerror(err));
    }
}

void Turns::connected(uint32_t id) {
    Conn& c = conns_[id];
    c.state = State::Idle;
    if (connecting_phase_ || c.target != cur_ || !sending_) return;
    if (open_loop()) {
        free_.push_back(id);
        dispatch(now_ns());
    } else {
        send(id, now_ns());
    }
}

bool Turns::connect_all() {
    const i64 deadline = now_ns() + 30 * kSec;
    start_connects();
    while (in_progress_ > 0 || next_to_connect_ < conns_.size()) {
        if (now_ns() >= deadline) {
            for (uint32_t id = 0; id < conns_.size(); ++id)
                if (conns_[id].state == State::Connecting) on_connect_result(id, ETIMEDOUT);
            break;
        }
        poll(deadline);
        start_connects();
    }
    connecting_phase_ = false;
    bool ok = true;
    for (const Target& t : targets_) {
        if (!t.connect_failures) continue;
        std::fprintf(stderr, "http_turns: target %s (%s): %s of %u connections failed: %s\n",
                     t.name.c_str(), t.hostport.c_str(), with_commas(t.connect_failures).c_str(),
                     t.count, t.connect_error.c_str());
        ok = false;
    }
    return ok;
}

void Turns::send(uint32_t id, i64 now) {
    Conn& c = conns_[id];
    c.sent_at = now;
    c.state = State::Busy;
    c.tx_off = 0;
    c.in_head = true;
    ++targets_[c.target].in_flight;
    flush(id);
}

// --rate: send every request that is due, each on a free connection, stamped with when it was
// due (a request waits for a connection as long as every one is busy).
void Turns::dispatch(i64 now) {
    while (sending_ && issued_ < due_total_ && due_at(issued_) <= now) {
        while (!free_.empty() && conns_[free_.back()].state != State::Idle)
            free_.pop_back(); // (dropped, or listed twice)
        if (free_.empty()) return;
        const uint32_t id = free_.back();
        free_.pop_back();
        send(id, due_at(issued_));
        ++issued_;
    }
}

// Writes the rest of the request; on a short write waits for EPOLLOUT.
void Turns::flush(uint32_t id) {
    Conn& c = conns_[id];
    const std::string& req = targets_[c.target].request;
    const ssize_t w = ::write(c.fd, req.data() + c.tx_off, req.size() - c.tx_off);
    if (w < 0 && errno != EAGAIN) {
        error(id, kReset, std::string("send: ") + std::strerror(errno));
        drop(id);
        return;
    }
    if (w > 0) c.tx_off += static_cast<size_t>(w);
    const bool rest = c.tx_off < req.size();
    if (rest != c.want_out) ctl(EPOLL_CTL_MOD, id, rest ? EPOLLIN | EPOLLOUT : EPOLLIN);
    c.want_out = rest;
}

void Turns::on_readable(uint32_t id) {
    Conn& c = conns_[id];
    iovec iov{buf_.data(), buf_.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t r = ::recvmsg(c.fd, &m, 0);
    const i64 now = now_ns();
    c.arrived = -1;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&m); r > 0 && cm != nullptr; cm = CMSG_NXTHDR(&m, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
            timespec ts{};
            std::memcpy(&ts, CMSG_DATA(cm), sizeof ts);
            c.arrived = static_cast<i64>(ts.tv_sec) * kSec + ts.tv_nsec - real_offset_;
        }
    }
    if (r < 0) {
        if (errno == EAGAIN) return;
        error(id, kReset, std::string("recv: ") + std::strerror(errno));
        drop(id);
        return;
    }
    if (r == 0) {
        error(id, kClosed,
              c.state == State::Busy ? "the server closed the connection before the response was "
                                       "complete"
                                     : "the server closed an idle keep-alive connection");
        drop(id);
        return;
    }
    if (c.state != State::Busy) {
        error(id, kProtocol, std::to_string(r) + " bytes arrived with no request outstanding");
        drop(id);
        return;
    }
    consume(id, buf_.data(), static_cast<size_t>(r), now);
}

void Turns::consume(uint32_t id, const char* p, size_t n, i64 now) {
    Conn& c = conns_[id];
    if (c.in_head) {
        static constexpr std::string_view kEnd = "\r\n\r\n";
        std::string_view head;
        size_t used = 0; // bytes of p up to the end of the head
        if (c.head.empty()) {
            const size_t at = std::string_view(p, n).find(kEnd);
            if (at != std::string_view::npos) {
                head = std::string_view(p, at);
                used = at + kEnd.size();
            }
        }
        if (head.data() == nullptr) { // the head continues from an earlier read, or goes on
            const size_t old = c.head.size();
            c.head.append(p, n);
            const size_t at = c.head.find(kEnd, old >= 3 ? old - 3 : 0);
            if (at == std::string::npos) {
                if (c.head.size() > kMaxHead) {
                    error(id, kProtocol, "no end of the response head within 64 KiB");
                    drop(id);
                }
                return;
            }
            head = std::string_view(c.head.data(), at);
            used = at + kEnd.size() - old;
        }
        const std::string bad = parse_head(c, head);
        c.head.clear();
        if (!bad.empty()) {
            error(id, kProtocol, bad);
            drop(id);
            return;
        }
        c.in_head = false;
        p += used;
        n -= used;
    }
    const size_t take = static_cast<size_t>(std::min<u64>(n, c.body_left));
    c.body_left -= take;
    if (n > take) {
        error(id, kProtocol,
              std::to_string(n - take) +
                  " bytes past the end of a response (only one request was outstanding)");
        drop(id);
        return;
    }
    if (c.body_left == 0) complete(id, now);
}

void Turns::complete(uint32_t id, i64 now) {
    Conn& c = conns_[id];
    Target& t = targets_[c.target];
    c.state = State::Idle;
    c.in_head = true;
    --t.in_flight;
    ++t.responses;
    last_done_ = now;
    if (c.status < 200 || c.status > 299) {
        error(id, kStatus, "status " + std::to_string(c.status));
    } else if (c.close_after) {
        error(id, kConnClose, "the response closes the connection (Connection: close)");
    } else if (measured_) {
        t.latency.record(now - c.sent_at);
        // (a timestamp before the request was due: the clock was stepped; not recorded)
        if (c.arrived >= c.sent_at) t.sock.record(c.arrived - c.sent_at);
        ++t.requests;
    } else {
        ++t.warmup_requests;
    }
    if (c.close_after) {
        drop(id);
        return;
    }
    if (c.target != cur_ || !sending_) return;
    if (open_loop()) {
        free_.push_back(id);
        dispatch(now);
    } else if (now < deadline_) {
        send(id, now);
    }
}

void Turns::check_timeouts(Target& t, i64 now) {
    for (uint32_t id = t.first; id < t.first + t.count; ++id) {
        const Conn& c = conns_[id];
        if (c.state == State::Busy && now - c.sent_at > timeout_ns_) {
            error(id, kTimeout,
                  "no complete response within " + galay::tools::general(o_.timeout) + " s");
            drop(id);
        }
    }
}

// One epoll_wait (until `deadline` at most) and its events.
void Turns::poll(i64 deadline) {
    epoll_event evs[1024];
    const i64 wait = std::max<i64>(0, deadline - now_ns());
    const int timeout_ms = static_cast<int>(std::min<i64>((wait + kMs - 1) / kMs, 1000));
    const int n = epoll_wait(ep_, evs, 1024, timeout_ms);
    if (n < 0) {
        if (errno == EINTR) return;
        baseline::die("http_turns: epoll_wait");
    }
    if (measured_ && n > 0) {
        ++targets_[cur_].waits;
        targets_[cur_].wait_events += static_cast<u64>(n);
    }
    for (int i = 0; i < n; ++i) {
        const uint32_t id = evs[i].data.u32;
        Conn& c = conns_[id];
        const uint32_t e = evs[i].events;
        if (c.state == State::Dead) continue; // dropped earlier in this batch
        if (c.state == State::Connecting) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (connecting_phase_) --in_progress_;
            on_connect_result(id, err);
            continue;
        }
        if ((e & EPOLLOUT) && c.want_out) {
            flush(id);
            if (c.state == State::Dead || c.state == State::Connecting) continue;
        }
        if (e & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(id);
    }
}

// Target t's turn: every idle connection sends, each response is followed by the next request
// until the slice is over, then the outstanding responses are awaited.
void Turns::turn(uint32_t ti, bool measured) {
    Target& t = targets_[ti];
    cur_ = ti;
    measured_ = measured;
    sending_ = true;
    if (measured) {
        t.latency.begin_turn();
        t.sock.begin_turn();
    }
    real_offset_ =
        clock_ns(CLOCK_REALTIME) - now_ns(); // (again each turn: a step of the clock is brief)
    const i64 cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    const i64 start = now_ns();
    deadline_ = start + static_cast<i64>(o_.slice * kSec);
    last_done_ = start;
    turn_start_ = start;
    issued_ = 0;
    due_total_ = open_loop() ? static_cast<u64>(std::ceil(o_.slice * o_.rate - 1e-9)) : 0;
    free_.clear();
    if (open_loop()) {
        for (uint32_t id = t.first + t.count; id-- > t.first;) // (the first popped first)
            if (conns_[id].state == State::Idle) free_.push_back(id);
    } else {
        // Each request its own time: the first writes of 1000 connections take milliseconds.
        for (uint32_t id = t.first; id < t.first + t.count; ++id)
            if (conns_[id].state == State::Idle) send(id, now_ns());
    }
    i64 next_check = start + kCheckEvery;
    for (;;) {
        const i64 now = now_ns();
        if (sending_ && now >= deadline_) {
            // (open loop: the requests due before the end are all sent first)
            if (open_loop()) dispatch(now);
            if (open_loop() && issued_ < due_total_ && now - deadline_ > timeout_ns_) {
                // No connection came free for --timeout after the slice (all dead, say): the
                // requests still due count as timeouts.
                t.errors[kTimeout] += due_total_ - issued_;
                issued_ = due_total_;
            }
            if (!open_loop() || issued_ >= due_total_) sending_ = false;
        }
        if (!sending_ && t.in_flight == 0) break;
        if (now >= next_check) {
            check_timeouts(t, now);
            next_check = now + kCheckEvery;
        }
        if (sending_ && open_loop()) {
            dispatch(now);
            poll(now); // busy: requests fall due every few microseconds
        } else {
            poll(sending_ ? std::min(deadline_, next_check) : next_check);
        }
    }
    sending_ = false;
    const i64 active = std::max<i64>(last_done_ - start, 0);
    if (measured) {
        t.active_ns += active;
        t.client_wall_ns += now_ns() - start;
        t.client_cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
        ++t.turns;
        t.latency.end_turn();
        t.sock.end_turn();
    } else {
        t.warmup_ns += active;
        ++t.warmup_turns;
    }
}

int Turns::run() {
    if (!parse_targets()) return 2;
    for (Target& t : targets_)
        if (!resolve(t)) return 1;
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) baseline::die("http_turns: epoll_create1");
    timeout_ns_ = static_cast<i64>(o_.timeout * kSec);
    const auto per = static_cast<uint32_t>(o_.connections);
    conns_.resize(targets_.size() * per);
    for (uint32_t i = 0; i < targets_.size(); ++i) {
        targets_[i].first = i * per;
        targets_[i].count = per;
        for (uint32_t k = 0; k < per; ++k)
            conns_[i * per + k].target = i;
    }
    const i64 t0 = now_ns();
    if (!connect_all()) {
        std::fprintf(stderr, "http_turns: not every connection could be opened: nothing "
                             "measured\n");
        return 1;
    }

    warmup_turns_ = o_.warmup > 0 ? static_cast<int>(std::ceil(o_.warmup / o_.slice - 1e-9)) : 0;
    measured_turns_ = static_cast<int>(std::ceil(o_.duration / o_.slice - 1e-9));
    const auto n = static_cast<uint32_t>(targets_.size());
    for (int cycle = 0; cycle < warmup_turns_ + measured_turns_; ++cycle) {
        const bool measured = cycle >= warmup_turns_;
        for (uint32_t k = 0; k < n; ++k) {
            uint32_t ti;
            if (o_.order == "alternate")
                ti = cycle % 2 == 0 ? k : n - 1 - k;
            else
                ti = (k + static_cast<uint32_t>(cycle)) % n;
            turn(ti, measured);
        }
    }
    const i64 wall = now_ns() - t0;
    for (Conn& c : conns_)
        if (c.fd >= 0) ::close(c.fd);
    report(wall);
    bool errors = false;
    for (const Target& t : targets_) {
        if (t.total_errors()) errors = true;
        if (t.requests == 0) {
            std::fprintf(stderr,
                         "http_turns: target %s: no request completed in the measured "
                         "turns\n",
                         t.name.c_str());
            errors = true;
        }
    }
    return errors ? 1 : 0;
}

void Turns::report(i64 wall_ns) const {
    const double us = 1e-3;
    for (const Target& t : targets_) {
        if (!t.total_errors()) continue;
        std::string kinds;
        for (int k = 0; k < kErrKinds; ++k)
            if (t.errors[k])
                kinds += std::string(kinds.empty() ? "" : ", ") + kErrNames[k] + " " +
                         with_commas(t.errors[k]);
        std::fprintf(stderr, "http_turns: target %s: %s errors (%s)\n", t.name.c_str(),
                     with_commas(t.total_errors()).c_str(), kinds.c_str());
    }
    auto seconds = [](i64 ns) { return static_cast<double>(ns) / kSec; };
    auto rps = [&](const Target& t) {
        return t.active_ns > 0 ? static_cast<double>(t.requests) / seconds(t.active_ns) : 0.0;
    };
    auto busy = [](const Target& t) {
        return t.client_wall_ns > 0
                   ? static_cast<double>(t.client_cpu_ns) / static_cast<double>(t.client_wall_ns)
                   : 0.0;
    };
    auto per_wait = [](const Target& t) {
        return t.waits > 0 ? static_cast<double>(t.wait_events) / static_cast<double>(t.waits)
                           : 0.0;
    };
    if (o_.json) {
        nlohmann::ordered_json j;
        j["tool"] = "http_turns";
        j["conns"] = o_.connections;
        j["slice_s"] = o_.slice;
        j["rate"] = o_.rate;
        j["turns"] = measured_turns_;
        j["warmup_turns"] = warmup_turns_;
        j["duration_s"] = o_.duration;
        j["warmup_s"] = o_.warmup;
        j["path"] = o_.path;
        j["order"] = o_.order;
        j["wall_s"] = seconds(wall_ns);
        j["targets"] = nlohmann::ordered_json::array();
        for (const Target& t : targets_) {
            nlohmann::ordered_json e;
            for (int k = 0; k < kErrKinds; ++k)
                e[kErrNames[k]] = t.errors[k];
            auto latency_json = [&](const LatencyHistogram& h) {
                return nlohmann::ordered_json{{"min", h.min_ns() * us},
                                              {"mean", h.mean_ns() * us},
                                              {"stdev", h.stddev_ns() * us},
                                              {"p50", h.percentile_ns(0.50) * us},
                                              {"p90", h.percentile_ns(0.90) * us},
                                              {"p95", h.percentile_ns(0.95) * us},
                                              {"p99", h.percentile_ns(0.99) * us},
                                              {"p99_9", h.percentile_ns(0.999) * us},
                                              {"max", h.max_ns() * us}};
            };
            auto per_turn = [&](const std::vector<double>& ns) {
                nlohmann::ordered_json a = nlohmann::ordered_json::array();
                for (double v : ns)
                    a.push_back(v < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(v * us));
                return a;
            };
            j["targets"].push_back({{"name", t.name},
                                    {"address", t.hostport},
                                    {"requests", t.requests},
                                    {"errors", t.total_errors()},
                                    {"error_kinds", e},
                                    {"active_s", seconds(t.active_ns)},
                                    {"throughput", rps(t)},
                                    {"turns", t.turns},
                                    {"warmup_requests", t.warmup_requests},
                                    {"warmup_active_s", seconds(t.warmup_ns)},
                                    {"responses", t.responses},
                                    {"latency_us", latency_json(t.latency.all)},
                                    {"turn_p99_us", per_turn(t.latency.turn_p99_ns)},
                                    {"socket_latency_count", t.sock.all.count()},
                                    {"socket_latency_us", latency_json(t.sock.all)},
                                    {"turn_socket_p99_us", per_turn(t.sock.turn_p99_ns)},
                                    {"client_busy", open_loop() ? nlohmann::ordered_json()
                                                                : nlohmann::ordered_json(busy(t))},
                                    {"client_events_per_wait", per_wait(t)}});
        }
        std::printf("%s\n", j.dump().c_str());
        return;
    }
    std::string load = "closed loop";
    if (open_loop()) {
        load = "open loop at ";
        load += with_commas(static_cast<u64>(o_.rate));
        load += " req/s";
    }
    std::printf("http_turns: %zu targets x %d connections, GET %s, %s; turns of %g s, %d warm-up "
                "+ %d measured per target, order %s; %.1f s in all\n",
                targets_.size(), o_.connections, o_.path.c_str(), load.c_str(), o_.slice,
                warmup_turns_, measured_turns_, o_.order.c_str(), seconds(wall_ns));
    std::printf("%-16s %12s %7s %8s %10s %8s %8s %8s %8s %8s %8s %8s %8s %9s %14s %11s %8s %12s\n",
                "target", "requests", "errors", "active_s", "req/s", "min_us", "mean_us",
                "stdev_us", "p50_us", "p90_us", "p95_us", "p99_us", "p99.9_us", "max_us",
                "turn_p99_med", "client_busy", "ev/wait", "sock_p99_us");
    for (const Target& t : targets_) {
        const LatencyHistogram& h = t.latency.all;
        std::vector<double> turns; // (the turns with a 2xx response)
        for (double v : t.latency.turn_p99_ns)
            if (v >= 0) turns.push_back(v);
        const double turn_med = galay::tools::quantile(turns, 0.5);
        char busy_cell[16] = "-";
        if (!open_loop()) std::snprintf(busy_cell, sizeof busy_cell, "%.0f%%", busy(t) * 100);
        std::printf("%-16s %12s %7s %8.3f %10s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f "
                    "%9.1f %14.1f %11s %8.1f %12.1f\n",
                    t.name.c_str(), with_commas(t.requests).c_str(),
                    with_commas(t.total_errors()).c_str(), seconds(t.active_ns),
                    with_commas(static_cast<u64>(std::llround(rps(t)))).c_str(), h.min_ns() * us,
                    h.mean_ns() * us, h.stddev_ns() * us, h.percentile_ns(0.50) * us,
                    h.percentile_ns(0.90) * us, h.percentile_ns(0.95) * us,
                    h.percentile_ns(0.99) * us, h.percentile_ns(0.999) * us, h.max_ns() * us,
                    turn_med * us, busy_cell, per_wait(t), t.sock.all.percentile_ns(0.99) * us);
    }
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    cli::App app{"http_turns: HTTP/1.1 load (closed loop, or open at --rate) that gives several "
                 "servers turns, no request outstanding between a server's turns"};
    app.add_option("--target", o.targets, "NAME=HOST:PORT (repeat: one per server)")->required();
    app.add_option("-c", o.connections, "Keep-alive connections per target")
        ->capture_default_str()
        ->check(cli::Range(1, 1'000'000));
    app.add_option("-d", o.duration, "Measured seconds of turns per target")
        ->capture_default_str()
        ->check(cli::PositiveNumber);
    app.add_option("--warmup", o.warmup, "Seconds of turns per target not counted (0: none)")
        ->capture_default_str()
        ->check(cli::NonNegativeNumber);
    app.add_option("--slice", o.slice, "Seconds of one turn (then its requests are drained)")
        ->capture_default_str()
        ->check(cli::Range(0.001, 3600.0));
    app.add_option("--rate", o.rate,
                   "Requests per second in a target's turn, open loop, latency from when each "
                   "fell due (0: closed loop, one request outstanding per connection)")
        ->capture_default_str()
        ->check(cli::Range(0.0, 1e8));
    app.add_option("--timeout", o.timeout, "Seconds a request may be outstanding (else an error)")
        ->capture_default_str()
        ->check(cli::Range(0.001, 3600.0));
    app.add_option("--path", o.path, "Request path")->capture_default_str();
    app.add_option("--rounds-order", o.order,
                   "Order of the targets from one cycle of turns to the next: rotate (A B C, B C "
                   "A, ...) or alternate (A B C, C B A, ...)")
        ->capture_default_str()
        ->check(cli::IsMember({"rotate", "alternate"}));
    app.add_flag("--json", o.json, "Print one JSON object on stdout instead of the table");
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "http_turns")) return *code;
    if (o.path.empty() || o.path.front() != '/' ||
        o.path.find_first_of(" \r\n") != std::string::npos) {
        std::fprintf(stderr,
                     "http_turns: error: --path: '%s' must start with '/' and have no spaces "
                     "(see --help)\n",
                     o.path.c_str());
        return 2;
    }

    std::signal(SIGPIPE, SIG_IGN);
    if (!baseline::ensure_fds("http_turns", o.targets.size() * static_cast<size_t>(o.connections)))
        return 1;
    Turns turns(o);
    return turns.run();
}
