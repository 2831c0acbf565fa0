// raw_client: a minimal single-threaded epoll ping-pong client, the yardstick for bench_client.
//
//   raw_client -h 127.0.0.1 -p 8080 -c 100 -s 256 -d 10 -P 1 --warmup 1 --server-pid PID --json
//
// Each connection keeps -P messages in flight; when one is fully echoed the next is sent. Every
// echoed byte is compared with what was sent: message `seq` of connection `id` carries a pattern
// derived from (id, seq), so a byte from another connection, another message, a shifted offset
// or a zero fill is detected. Latency is per message, from the moment it is issued to the moment
// its last echoed byte is read, kept in a log-linear histogram (<1% relative error).
//
// Phases: connect (in waves of at most 1000 in progress, so 10,000 connections do not overflow
// the server's listen backlog) -> warm-up (traffic, not counted) -> measured window -> drain
// (no new messages; what is in flight must come back within a grace period or it is a
// "short echo" error). Any error makes the exit code 1.
#include "common.hpp"
#include "load_common.hpp"
#include "measure/format.hpp"    // the suite's number formats (no galay code)
#include "measure/histogram.hpp" // bench_client's histogram: the same percentiles

#include "galay_cli.hpp"

#include "galay_cli.hpp"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <netdb.h>
#include <optional>
#include <sstream>
#include <string>
#include <sys/epoll.h>
#include <vector>

namespace {

using i64 = int64_t;
using u64 = uint64_t;
using baseline::now_ns;
using galay::tools::mib;
using galay::tools::with_commas;

// Pattern of message `seq` on connection `id`: 64-bit words base + k * golden, little-endian.
inline u64 message_base(u64 id, u64 seq) {
    u64 z = (id << 40) ^ seq ^ 0x5bd1e9955bd1e995ull; // splitmix64 finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Writes bytes [off, off + len) of a message with the given base.
void fill_message(u64 base, size_t off, size_t len, unsigned char* dst) {
    constexpr u64 kGolden = 0x9e3779b97f4a7c15ull;
    u64 w = base + (off / 8) * kGolden;
    if (size_t skip = off % 8) {
        unsigned char tmp[8];
        std::memcpy(tmp, &w, 8);
        const size_t n = std::min(8 - skip, len);
        std::memcpy(dst, tmp + skip, n);
        dst += n;
        len -= n;
        w += kGolden;
    }
    for (; len >= 8; len -= 8, dst += 8, w += kGolden)
        std::memcpy(dst, &w, 8);
    if (len) std::memcpy(dst, &w, len);
}

enum class Phase { Connect, Warmup, Measure, Drain, Done };
enum class State : uint8_t { Idle, Connecting, Active, Dead };

struct Conn {
    int fd = -1;
    State state = State::Idle;
    bool want_out = false;
    uint32_t rx_off = 0; // bytes received of message `done`
    u64 issued = 0;      // messages issued; message `issued` is the next to send
    u64 done = 0;        // messages fully echoed and verified
    u64 tx_bytes = 0;    // bytes of the outgoing stream written so far
};

struct Options {
    std::string host = "127.0.0.1";
    int port = 8080;
    int connections = 100;
    size_t size = 256;
    double duration = 10;
    int pipeline = 1;
    double warmup = 0;
    int server_pid = 0;
    bool json = false;
};

// utime + stime of a process (all threads), in seconds. Granularity is one clock tick (10 ms).
std::optional<double> process_cpu(int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    if (!f || !std::getline(f, s)) return std::nullopt;
    const size_t paren = s.rfind(')'); // comm may contain spaces and parentheses
    if (paren == std::string::npos) return std::nullopt;
    std::istringstream rest(s.substr(paren + 2));
    std::string field;
    u64 utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) { // fields 14 and 15 (1-based) per proc(5)
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

class Client {
public:
    explicit Client(const Options& o)
        : o_(o)
        , conns_(static_cast<size_t>(o.connections))
        , sent_at_(static_cast<size_t>(o.connections) * static_cast<size_t>(o.pipeline))
        , tx_(std::max<size_t>(kChunk, o.size))
        , rx_(kChunk)
        , expect_(std::max<size_t>(kChunk, o.size)) {}

    int run();

private:
    static constexpr size_t kChunk = 256 * 1024;
    static constexpr int kMaxInProgress = 1000;
    static constexpr i64 kSec = 1'000'000'000;

    Options o_;
    sockaddr_storage addr_{};
    socklen_t addr_len_ = 0;
    std::string target_;
    int ep_ = -1;
    std::vector<Conn> conns_;
    std::vector<i64> sent_at_; // issue time of each in-flight message, [conn * P + seq % P]
    std::vector<unsigned char> tx_, rx_, expect_;

    Phase phase_ = Phase::Connect;
    size_t next_to_connect_ = 0;
    int in_progress_ = 0, alive_ = 0;
    u64 in_flight_ = 0; // messages issued but not yet echoed, all connections

    i64 phase_end_ = 0, measure_start_ = 0, measure_end_ = 0, next_tick_ = 0, last_tick_ = 0;
    int tick_no_ = 0;
    u64 last_tick_ok_ = 0;
    std::optional<double> cpu_start_, cpu_end_;

    galay::tools::LatencyHistogram hist_;
    u64 requests_ = 0, successful_ = 0;
    u64 errors_ = 0, err_connect_ = 0, err_mismatch_ = 0, err_reset_ = 0, err_short_ = 0;
    int errors_printed_ = 0;

    std::FILE* human() const { return o_.json ? stderr : stdout; }
    size_t slot(uint32_t id, u64 seq) const {
        return size_t{id} * static_cast<size_t>(o_.pipeline) + seq % static_cast<u64>(o_.pipeline);
    }

    bool resolve();
    void ctl(int op, uint32_t id, uint32_t events);
    void start_connects();
    void on_connected(uint32_t id);
    void fail(uint32_t id, u64& counter, const std::string& why);
    void fill_stream(uint32_t id, u64 from, size_t len, unsigned char* dst) const;
    void issue(uint32_t id, u64 count, i64 now);
    void flush(uint32_t id);
    void on_readable(uint32_t id);
    void start_traffic(i64 now);
    void advance(i64 now);
    void tick(i64 now);
    void report();
};

bool Client::resolve() {
    const int rc = baseline::resolve_tcp(o_.host, o_.port, addr_, addr_len_);
    if (rc != 0) {
        std::fprintf(stderr, "raw_client: cannot resolve %s: %s\n", o_.host.c_str(),
                     gai_strerror(rc));
        return false;
    }
    target_ = o_.host + ":" + std::to_string(o_.port);
    return true;
}

void Client::ctl(int op, uint32_t id, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u32 = id;
    if (epoll_ctl(ep_, op, conns_[id].fd, &ev) != 0) baseline::die("epoll_ctl");
}

void Client::fail(uint32_t id, u64& counter, const std::string& why) {
    Conn& c = conns_[id];
    ++counter;
    ++errors_;
    if (errors_printed_ < 5)
        std::fprintf(stderr, "raw_client: connection %u: %s\n", id, why.c_str());
    else if (errors_printed_ == 5)
        std::fprintf(stderr, "raw_client: (further errors not shown)\n");
    ++errors_printed_;
    if (c.state == State::Connecting) --in_progress_;
    if (c.state == State::Active) --alive_;
    in_flight_ -= c.issued - c.done;
    c.issued = c.done; // nothing of this connection is in flight any more
    c.state = State::Dead;
    ::close(c.fd);
    c.fd = -1;
}

// Keeps at most kMaxInProgress connects outstanding; called again as each one finishes.
void Client::start_connects() {
    while (in_progress_ < kMaxInProgress && next_to_connect_ < conns_.size()) {
        const auto id = static_cast<uint32_t>(next_to_connect_++);
        Conn& c = conns_[id];
        c.fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c.fd < 0) baseline::die("socket");
        int one = 1;
        setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c.state = State::Connecting;
        ++in_progress_;
        if (::connect(c.fd, reinterpret_cast<sockaddr*>(&addr_), addr_len_) == 0) {
            ctl(EPOLL_CTL_ADD, id, EPOLLIN);
            on_connected(id);
        } else if (errno == EINPROGRESS) {
            ctl(EPOLL_CTL_ADD, id, EPOLLOUT);
        } else {
            fail(id, err_connect_, "connect to " + target_ + " failed: " + std::strerror(errno));
        }
    }
}

void Client::on_connected(uint32_t id) {
    conns_[id].state = State::Active;
    --in_progress_;
    ++alive_;
}

void Client::fill_stream(uint32_t id, u64 from, size_t len, unsigned char* dst) const {
    while (len) {
        const u64 seq = from / o_.size;
        const size_t off = static_cast<size_t>(from % o_.size);
        const size_t n = std::min(len, o_.size - off);
        fill_message(message_base(id, seq), off, n, dst);
        dst += n;
        len -= n;
        from += n;
    }
}

void Client::issue(uint32_t id, u64 count, i64 now) {
    Conn& c = conns_[id];
    for (u64 i = 0; i < count; ++i)
        sent_at_[slot(id, c.issued++)] = now;
    in_flight_ += count;
    if (!c.want_out) flush(id); // otherwise EPOLLOUT will pick the new bytes up
}

// Writes the issued-but-unwritten part of the stream; on a short write waits for EPOLLOUT.
void Client::flush(uint32_t id) {
    Conn& c = conns_[id];
    const u64 end = c.issued * o_.size;
    while (c.tx_bytes < end) {
        const size_t n = static_cast<size_t>(std::min<u64>(end - c.tx_bytes, kChunk));
        fill_stream(id, c.tx_bytes, n, tx_.data());
        const ssize_t w = ::write(c.fd, tx_.data(), n);
        if (w < 0 && errno != EAGAIN) {
            fail(id, err_reset_, std::string("send: ") + std::strerror(errno));
            return;
        }
        if (w > 0) c.tx_bytes += static_cast<u64>(w);
        if (w < static_cast<ssize_t>(n)) {
            if (!c.want_out) ctl(EPOLL_CTL_MOD, id, EPOLLIN | EPOLLOUT);
            c.want_out = true;
            return;
        }
    }
    if (c.want_out) {
        c.want_out = false;
        ctl(EPOLL_CTL_MOD, id, EPOLLIN);
    }
}

void Client::on_readable(uint32_t id) {
    Conn& c = conns_[id];
    const u64 expect = (c.issued - c.done) * o_.size - c.rx_off;
    // Never read past what we are owed: extra bytes would belong to no message.
    const size_t cap = expect ? static_cast<size_t>(std::min<u64>(expect, kChunk)) : kChunk;
    const ssize_t r = ::read(c.fd, rx_.data(), cap);
    const i64 now = now_ns();
    advance(now);
    if (r < 0) {
        if (errno == EAGAIN) return;
        fail(id, err_reset_, std::string("recv: ") + std::strerror(errno));
        return;
    }
    if (r == 0) {
        if (expect || phase_ == Phase::Warmup || phase_ == Phase::Measure)
            fail(id, err_reset_, "server closed the connection");
        return;
    }
    if (!expect) {
        fail(id, err_mismatch_, std::to_string(r) + " unexpected bytes (nothing was sent)");
        return;
    }
    const unsigned char* p = rx_.data();
    size_t left = static_cast<size_t>(r);
    u64 completed = 0;
    while (left) {
        const size_t take = std::min(left, o_.size - c.rx_off);
        fill_message(message_base(id, c.done), c.rx_off, take, expect_.data());
        if (std::memcmp(p, expect_.data(), take) != 0) {
            size_t at = 0;
            while (p[at] == expect_[at])
                ++at;
            if (phase_ == Phase::Measure) ++requests_;
            fail(id, err_mismatch_,
                 "echo mismatch in message " + std::to_string(c.done) + " at byte " +
                     std::to_string(c.rx_off + at));
            return;
        }
        p += take;
        left -= take;
        c.rx_off += static_cast<uint32_t>(take);
        if (c.rx_off == o_.size) {
            if (phase_ == Phase::Measure) {
                hist_.record(static_cast<u64>(now - sent_at_[slot(id, c.done)]));
                ++requests_;
                ++successful_;
            }
            ++c.done;
            c.rx_off = 0;
            ++completed;
        }
    }
    in_flight_ -= completed;
    if (completed && (phase_ == Phase::Warmup || phase_ == Phase::Measure))
        issue(id, completed, now);
}

void Client::start_traffic(i64 now) {
    phase_ = o_.warmup > 0 ? Phase::Warmup : Phase::Measure;
    const i64 warm = static_cast<i64>(o_.warmup * kSec);
    measure_start_ = now + warm;
    measure_end_ = measure_start_ + static_cast<i64>(o_.duration * kSec);
    phase_end_ = phase_ == Phase::Warmup ? measure_start_ : measure_end_;
    if (phase_ == Phase::Measure) {
        if (o_.server_pid) cpu_start_ = process_cpu(o_.server_pid);
    }
    last_tick_ = measure_start_;
    next_tick_ = measure_start_ + kSec;
    for (uint32_t id = 0; id < conns_.size(); ++id)
        if (conns_[id].state == State::Active) issue(id, static_cast<u64>(o_.pipeline), now);
}

void Client::tick(i64 now) {
    const double secs = static_cast<double>(now - last_tick_) / kSec;
    const u64 n = successful_ - last_tick_ok_;
    const double mbps = mib(static_cast<double>(n * o_.size)) / secs;
    std::fprintf(human(), "[%ds] QPS: %s | Throughput: %.2f MB/s | Total: %s | Errors: %s\n",
                 ++tick_no_, with_commas(static_cast<u64>(std::llround(n / secs))).c_str(), mbps,
                 with_commas(successful_).c_str(), with_commas(errors_).c_str());
    std::fflush(human());
    last_tick_ = now;
    last_tick_ok_ = successful_;
    next_tick_ += kSec;
}

// Phase transitions happen at the first event past a deadline, using that event's timestamp,
// so the counted completions and the server-CPU window cover the same interval.
void Client::advance(i64 now) {
    if (phase_ == Phase::Measure && now >= next_tick_ && now < measure_end_) tick(now);
    if (now < phase_end_) return;
    switch (phase_) {
    case Phase::Warmup:
        phase_ = Phase::Measure;
        measure_start_ = now;
        measure_end_ = now + static_cast<i64>(o_.duration * kSec);
        phase_end_ = measure_end_;
        last_tick_ = now;
        next_tick_ = now + kSec;
        if (o_.server_pid) cpu_start_ = process_cpu(o_.server_pid);
        break;
    case Phase::Measure:
        if (o_.server_pid) cpu_end_ = process_cpu(o_.server_pid);
        measure_end_ = now;
        if (now - last_tick_ > kSec / 2) tick(now); // the last, partial second
        phase_ = Phase::Drain;
        phase_end_ = now + 2 * kSec; // grace period for echoes still in flight
        break;
    case Phase::Drain:
        phase_ = Phase::Done;
        break;
    default:
        break;
    }
}

int Client::run() {
    if (!resolve()) return 1;
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) baseline::die("epoll_create1");

    std::FILE* h = human();
    std::fprintf(h, "=== Benchmark Client ===\n");
    std::fprintf(h, "Target: %s\n", target_.c_str());
    std::fprintf(h, "Connections: %d\n", o_.connections);
    std::fprintf(h, "Message Size: %zu bytes\n", o_.size);
    std::fprintf(h, "Duration: %g seconds\n", o_.duration);
    std::fprintf(h, "Pipeline: %d\n", o_.pipeline);
    if (o_.warmup > 0) std::fprintf(h, "Warmup: %g seconds\n", o_.warmup);
    std::fflush(h);

    std::vector<epoll_event> evs(1024);
    const i64 connect_deadline = now_ns() + 30 * kSec;
    start_connects();
    for (;;) {
        i64 now = now_ns();
        if (phase_ == Phase::Connect) {
            if (in_progress_ == 0 && next_to_connect_ == conns_.size()) {
                if (err_connect_)
                    std::fprintf(stderr, "raw_client: %s of %d connections to %s failed\n",
                                 with_commas(err_connect_).c_str(), o_.connections,
                                 target_.c_str());
                if (alive_ == 0) {
                    std::fprintf(stderr, "raw_client: no connection could be established\n");
                    report();
                    return 1;
                }
                start_traffic(now);
            } else if (now >= connect_deadline) {
                for (uint32_t id = 0; id < conns_.size(); ++id)
                    if (conns_[id].state == State::Connecting)
                        fail(id, err_connect_, "connect to " + target_ + " timed out");
                next_to_connect_ = conns_.size();
                continue;
            }
        } else {
            advance(now);
            if (phase_ == Phase::Drain && in_flight_ == 0) phase_ = Phase::Done;
            if (phase_ == Phase::Done || alive_ == 0) break;
        }
        const i64 deadline = phase_ == Phase::Connect   ? connect_deadline
                             : phase_ == Phase::Measure ? std::min(next_tick_, phase_end_)
                                                        : phase_end_;
        const int timeout_ms = static_cast<int>(std::max<i64>(0, (deadline - now) / 1'000'000 + 1));
        const int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), timeout_ms);
        if (n < 0) {
            if (errno == EINTR) continue;
            baseline::die("epoll_wait");
        }
        for (int i = 0; i < n; ++i) {
            const uint32_t id = evs[i].data.u32;
            Conn& c = conns_[id];
            const uint32_t e = evs[i].events;
            if (c.state == State::Connecting) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                    fail(id, err_connect_,
                         "connect to " + target_ + " failed: " + std::strerror(err));
                } else {
                    ctl(EPOLL_CTL_MOD, id, EPOLLIN);
                    on_connected(id);
                }
                start_connects();
                continue;
            }
            if (c.state != State::Active) continue; // failed earlier in this batch
            if ((e & EPOLLOUT) && c.want_out) {
                flush(id);
                if (c.state != State::Active) continue;
            }
            if (e & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(id);
        }
    }

    if (phase_ == Phase::Drain) { // grace period over: what is still missing is a short echo
        for (uint32_t id = 0; id < conns_.size(); ++id) {
            const Conn& c = conns_[id];
            if (c.state == State::Active && c.issued != c.done)
                fail(id, err_short_,
                     "short echo: " + std::to_string((c.issued - c.done) * o_.size - c.rx_off) +
                         " bytes never came back");
        }
    }
    if (measure_end_ == 0 || phase_ == Phase::Measure || phase_ == Phase::Warmup) {
        // Every connection died before the window closed.
        measure_end_ = now_ns();
        if (o_.server_pid) cpu_end_ = process_cpu(o_.server_pid);
    }
    for (Conn& c : conns_)
        if (c.fd >= 0) ::close(c.fd);
    report();
    if (successful_ == 0 && errors_ == 0)
        std::fprintf(stderr, "raw_client: no request completed in the measured window\n");
    return errors_ || successful_ == 0 ? 1 : 0;
}

void Client::report() {
    const double secs = std::max<i64>(measure_end_ - measure_start_, 1) / double(kSec);
    const u64 bytes = successful_ * o_.size;
    const double qps = static_cast<double>(successful_) / secs;
    const double mbps = mib(static_cast<double>(bytes)) / secs;
    const double us = 1e-3;
    std::optional<double> cpu;
    if (o_.server_pid) {
        if (cpu_start_ && cpu_end_)
            cpu = *cpu_end_ - *cpu_start_;
        else
            std::fprintf(stderr, "raw_client: could not read /proc/%d/stat\n", o_.server_pid);
    }
    std::optional<double> cpu_per_req;
    if (cpu && successful_) cpu_per_req = *cpu * 1e6 / static_cast<double>(successful_);

    if (errors_)
        std::fprintf(stderr,
                     "raw_client: %s errors (connect %s, mismatch %s, reset/closed %s, short echo "
                     "%s)\n",
                     with_commas(errors_).c_str(), with_commas(err_connect_).c_str(),
                     with_commas(err_mismatch_).c_str(), with_commas(err_reset_).c_str(),
                     with_commas(err_short_).c_str());

    if (o_.json) {
        nlohmann::ordered_json j;
        j["tool"] = "raw_client";
        j["host"] = o_.host;
        j["port"] = o_.port;
        j["connections"] = o_.connections;
        j["message_size"] = o_.size;
        j["pipeline"] = o_.pipeline;
        j["duration_s"] = secs;
        j["requests"] = requests_;
        j["successful"] = successful_;
        j["errors"] = errors_;
        j["bytes"] = bytes;
        j["qps"] = qps;
        j["throughput_mbps"] = mbps;
        j["latency_us"] = {{"mean", hist_.mean_ns() * us},
                           {"p50", hist_.percentile_ns(0.50) * us},
                           {"p99", hist_.percentile_ns(0.99) * us},
                           {"p999", hist_.percentile_ns(0.999) * us},
                           {"max", hist_.max_ns() * us}};
        j["server_cpu_s"] = cpu ? nlohmann::ordered_json(*cpu) : nullptr;
        j["server_cpu_us_per_req"] = cpu_per_req ? nlohmann::ordered_json(*cpu_per_req) : nullptr;
        std::printf("%s\n", j.dump().c_str());
        return;
    }
    std::printf("=== Final Results ===\n");
    std::printf("Total Requests: %s\n", with_commas(requests_).c_str());
    std::printf("Successful: %s\n", with_commas(successful_).c_str());
    std::printf("Errors: %s\n", with_commas(errors_).c_str());
    std::printf("Total Data: %.2f MB\n", mib(static_cast<double>(bytes)));
    std::printf("Measured Time: %.3f seconds\n", secs);
    std::printf("Average QPS: %s\n", with_commas(static_cast<u64>(std::llround(qps))).c_str());
    std::printf("Average Throughput: %.2f MB/s\n", mbps);
    std::printf("Latency mean: %.2f us\n", hist_.mean_ns() * us);
    std::printf("Latency p50: %.2f us\n", hist_.percentile_ns(0.50) * us);
    std::printf("Latency p99: %.2f us\n", hist_.percentile_ns(0.99) * us);
    std::printf("Latency p99.9: %.2f us\n", hist_.percentile_ns(0.999) * us);
    std::printf("Latency max: %.2f us\n", hist_.max_ns() * us);
    if (cpu) {
        std::printf("Server CPU: %.2f seconds (%.1f%% of one core)\n", *cpu, *cpu / secs * 100);
        if (cpu_per_req) std::printf("Server CPU per request: %.3f us\n", *cpu_per_req);
    }
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    cli::App app{
        "raw_client: minimal epoll ping-pong echo load client (baseline for bench_client)"};
    app.set_help_flag("--help", "Print this help message and exit");
    app.add_option("-h", o.host, "Server host")->capture_default_str();
    app.add_option("-p", o.port, "Server port")->capture_default_str()->check(cli::Range(1, 65535));
    app.add_option("-c", o.connections, "Connections")
        ->capture_default_str()
        ->check(cli::Range(1, 1'000'000));
    app.add_option("-s", o.size, "Message size in bytes")
        ->capture_default_str()
        ->check(cli::Range(size_t{1}, size_t{64} << 20));
    app.add_option("-d", o.duration, "Measured duration in seconds")
        ->capture_default_str()
        ->check(cli::PositiveNumber);
    app.add_option("-P", o.pipeline, "Messages in flight per connection")
        ->capture_default_str()
        ->check(cli::Range(1, 1 << 16));
    app.add_option("--warmup", o.warmup, "Seconds of traffic before the measured window")
        ->capture_default_str()
        ->check(cli::NonNegativeNumber);
    app.add_option("--server-pid", o.server_pid, "Report this process's CPU over the window")
        ->check(cli::PositiveNumber);
    app.add_flag("--json", o.json, "Print one JSON object on stdout (progress goes to stderr)");
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "raw_client")) return *code;

    std::signal(SIGPIPE, SIG_IGN);
    if (!baseline::ensure_fds("raw_client", static_cast<size_t>(o.connections))) return 1;
    Client client(o);
    return client.run();
}
