// bench_latency: the five latency benchmarks of the io_uring latency study, a galay
// client against an echo server on the other core, with the study's criterion-style statistics;
// plus the server itself and a connection-churn client.
//
//   bench_latency [--backend io_uring|epoll] [-n 30] [--sample-ms 5] [--idle-spin US] [--json]
//                 (starts `bench_latency server` on CPU 0 and runs the client on CPU 1)
//   bench_latency -h 127.0.0.1 -p 9000 ...       against any echo server
//   bench_latency server [-p 9000] [--backend ...] [--cpu 0] [--idle-spin US]
//   bench_latency churn -h 127.0.0.1 -p 9000 -c 50 -d 2 [-n 1000000] [--server-pid PID] [--json]
//
// Benchmarks (each iteration is timed; a sample times enough iterations to last --sample-ms):
//   network_latency_100B / _1000B        connect, send N bytes, read them back, close
//   connection_strategy/new_connection   the same with 256 B: one round trip on a new connection
//   connection_strategy/reuse            one 256 B round trip on a persistent connection
//   throughput_100_messages              100 round trips of 256 B on a persistent connection
// Every echoed byte is compared with what was sent. A server that closes early, echoes other
// bytes or stays silent for 5 s ends the run with a message naming it and exit status 1.
//
// --idle-spin US sets SchedulerOptions::idle_spin on the client's scheduler and on the server it
// starts (the server subcommand takes it too): the loop polls for up to US microseconds before
// it sleeps.
//
// --json prints one object in the schema every control group (bench/control/) writes, raw
// samples and per-iteration times included, so that bench/studies/latency.py computes every
// statistic with one piece of code (bench/harness/latstats.py).
//
// churn: clients that connect, do one round trip (256 B by default) and close, as fast as they
// can: connections/s, connect+echo+close latency percentiles, the client's own CPU per connection,
// server CPU per connection and the server's open fds before and after (--server-pid), every
// echoed byte verified.
#include "common/tool_support.hpp"
#include "measure/histogram.hpp"
#include "measure/latency_stats.hpp"

#include <galay/galay.hpp>

#include <nlohmann/json.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace galay;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kOpTimeout = 5s;

struct BenchDef {
    const char* name;
    std::size_t bytes;
    int round_trips;     // per iteration
    bool new_connection; // connect and close in every iteration
};

constexpr BenchDef kBenches[] = {
    {"network_latency_100B", 100, 1, true},
    {"network_latency_1000B", 1000, 1, true},
    {"connection_strategy/new_connection", 256, 1, true},
    {"connection_strategy/reuse", 256, 1, false},
    {"throughput_100_messages", 256, 100, false},
};

std::int64_t ns_since(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

/// Message `seq`: its first 8 bytes are the sequence number, the rest a fixed pattern, so that a
/// stale, shifted or foreign echo differs from what is expected.
void fill_message(std::vector<char>& buf, std::uint64_t seq) {
    std::memcpy(buf.data(), &seq, std::min<std::size_t>(8, buf.size()));
}
void init_pattern(std::vector<char>& buf) {
    for (std::size_t i = 0; i < buf.size(); ++i)
        buf[i] = static_cast<char>('a' + i % 26);
}

std::string describe_mismatch(const std::vector<char>& want, const std::vector<char>& got) {
    std::size_t i = 0;
    while (i < want.size() && want[i] == got[i])
        ++i;
    char line[160];
    std::snprintf(
        line, sizeof line, "echo mismatch: byte %zu of %zu came back as 0x%02x, 0x%02x was sent", i,
        want.size(), static_cast<unsigned char>(got[i]), static_cast<unsigned char>(want[i]));
    return line;
}

/// The client side: runs iterations of one benchmark, timing each.
struct Client {
    SocketAddr addr;
    std::string error; // set when an iteration failed
    std::uint64_t seq = 0;

    /// One round trip of `out` on `s`; false with `error` set on any failure.
    Task<bool> run(const BenchDef& d, std::uint64_t iterations, TcpStream* persistent,
                   std::vector<std::int64_t>* times) {
        std::vector<char> out(d.bytes), in(d.bytes);
        init_pattern(out);
        for (std::uint64_t it = 0; it < iterations; ++it) {
            const Clock::time_point t0 = Clock::now();
            TcpStream fresh;
            if (d.new_connection) {
                auto c = co_await TcpStream::connect(addr).timeout(kOpTimeout);
                if (!c) {
                    error = "connect to " + addr.to_string() + ": " + c.error().message();
                    co_return false;
                }
                fresh = std::move(*c);
            }
            TcpStream& s = d.new_connection ? fresh : *persistent;
            for (int rt = 0; rt < d.round_trips; ++rt) {
                fill_message(out, ++seq);
                auto w = co_await s.send_all(out).timeout(kOpTimeout);
                if (!w) {
                    error = "send: " + w.error().message();
                    co_return false;
                }
                std::size_t got = 0;
                while (got < in.size()) {
                    auto n = co_await s.recv(std::span(in).subspan(got)).timeout(kOpTimeout);
                    if (!n || *n == 0) {
                        error = !n ? (n.error() == std::errc::timed_out
                                          ? "no echo within 5 s"
                                          : "recv: " + n.error().message())
                                   : "the server closed the connection";
                        error += " after " + std::to_string(got) + " of " +
                                 std::to_string(in.size()) + " echoed bytes";
                        co_return false;
                    }
                    got += *n;
                }
                if (std::memcmp(in.data(), out.data(), in.size()) != 0) {
                    error = describe_mismatch(out, in);
                    co_return false;
                }
            }
            if (times != nullptr) times->push_back(ns_since(t0)); // (fresh closes below)
        }
        co_return true;
    }
};

struct BenchResult {
    const BenchDef* def;
    std::vector<std::uint64_t> sample_iterations;
    std::vector<std::int64_t> sample_ns;
    std::vector<std::int64_t> iteration_ns;
};

struct RunOptions {
    int samples = 30;
    double sample_ms = 5;
    double warmup_ms = 200;
};

Task<std::optional<std::string>> measure(Client& c, const RunOptions& o, const BenchDef& d,
                                         BenchResult& r) {
    r.def = &d;
    TcpStream persistent;
    if (!d.new_connection) {
        auto s = co_await TcpStream::connect(c.addr).timeout(kOpTimeout);
        if (!s) co_return "connect to " + c.addr.to_string() + ": " + s.error().message();
        persistent = std::move(*s);
    }
    // Warm-up, which also estimates the time of one iteration.
    const Clock::time_point w0 = Clock::now();
    std::uint64_t warm = 0;
    do {
        const bool ok = co_await c.run(d, 1, &persistent, nullptr);
        if (!ok) co_return c.error;
        ++warm;
    } while (ns_since(w0) < static_cast<std::int64_t>(o.warmup_ms * 1e6));
    const double per_iteration = static_cast<double>(ns_since(w0)) / static_cast<double>(warm);
    const auto iterations =
        static_cast<std::uint64_t>(std::max(1.0, std::ceil(o.sample_ms * 1e6 / per_iteration)));
    r.iteration_ns.reserve(iterations * static_cast<std::size_t>(o.samples));
    for (int i = 0; i < o.samples; ++i) {
        const Clock::time_point t0 = Clock::now();
        const bool ok = co_await c.run(d, iterations, &persistent, &r.iteration_ns);
        if (!ok) co_return c.error;
        r.sample_ns.push_back(ns_since(t0));
        r.sample_iterations.push_back(iterations);
    }
    co_return std::nullopt;
}

std::vector<double> per_iteration_times(const BenchResult& r) {
    std::vector<double> v;
    for (std::size_t i = 0; i < r.sample_ns.size(); ++i)
        v.push_back(static_cast<double>(r.sample_ns[i]) /
                    static_cast<double>(r.sample_iterations[i]));
    return v;
}

void print_table(const std::vector<BenchResult>& results) {
    std::printf("\n%s%s%s%s%s%s\n", tools::pad_right("benchmark", 37).c_str(),
                tools::pad_right("time", 21).c_str(), tools::pad_right("95% CI", 26).c_str(),
                tools::pad_right("median", 12).c_str(), tools::pad_right("p99", 12).c_str(),
                "outliers");
    for (const BenchResult& r : results) {
        const std::vector<double> t = per_iteration_times(r);
        const tools::Summary s = tools::summarize(t);
        std::vector<double> each(r.iteration_ns.begin(), r.iteration_ns.end());
        const double p99 = tools::quantile(std::move(each), 0.99);
        char spread[32];
        std::snprintf(spread, sizeof spread, "±%.2f%%", s.spread_pct);
        const std::string time = tools::human_time_ns(s.mean) + " " + spread;
        const std::string ci =
            "[" + tools::human_time_ns(s.ci.low) + " " + tools::human_time_ns(s.ci.high) + "]";
        std::printf("%s%s%s%s%s%d of %d (%d mild, %d severe)\n",
                    tools::pad_right(r.def->name, 37).c_str(), tools::pad_right(time, 21).c_str(),
                    tools::pad_right(ci, 26).c_str(),
                    tools::pad_right(tools::human_time_ns(s.median), 12).c_str(),
                    tools::pad_right(tools::human_time_ns(p99), 12).c_str(), s.outliers.total(),
                    s.samples, s.outliers.mild(), s.outliers.severe());
    }
}

nlohmann::json to_json(const std::vector<BenchResult>& results) {
    nlohmann::json list = nlohmann::json::array();
    for (const BenchResult& r : results)
        list.push_back({{"name", r.def->name},
                        {"message_bytes", r.def->bytes},
                        {"round_trips_per_iteration", r.def->round_trips},
                        {"new_connection", r.def->new_connection},
                        {"sample_iterations", r.sample_iterations},
                        {"sample_ns", r.sample_ns},
                        {"iteration_ns", r.iteration_ns}});
    return list;
}

bool pin_to_cpu(int cpu, const char* who) {
    if (cpu < 0) return true;
    if (cpu >= static_cast<int>(std::thread::hardware_concurrency())) {
        std::fprintf(stderr, "bench_latency: %s not pinned: CPU %d does not exist\n", who, cpu);
        return true;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) {
        std::fprintf(stderr, "bench_latency: pinning the %s to CPU %d: %s\n", who, cpu,
                     std::strerror(errno));
        return false;
    }
    return true;
}

// --- the echo server ----------------------------------------------------------------------

Task<void> echo_pooled(TcpStream conn) {
    for (;;) {
        auto b = co_await conn.recv_pooled();
        if (!b || b->empty()) co_return;
        auto sent = co_await conn.send_all(b->bytes());
        if (!sent) co_return;
    }
}

Task<void> echo_copy(TcpStream conn) {
    std::array<char, 4096> buf;
    for (;;) {
        auto n = co_await conn.recv(buf);
        if (!n || *n == 0) co_return;
        auto sent = co_await conn.send_all(std::span(buf.data(), *n));
        if (!sent) co_return;
    }
}

Task<void> accept_loop(TcpListener listener, bool pooled) {
    for (;;) {
        auto conn = co_await listener.accept();
        if (conn) {
            spawn(pooled ? echo_pooled(std::move(*conn)) : echo_copy(std::move(*conn)));
        } else if (conn.error() == std::errc::too_many_files_open) {
            std::fprintf(stderr, "bench_latency server: accept: %s (raise ulimit -n)\n",
                         conn.error().message().c_str());
            co_await sleep(10ms);
        } else if (conn.error() != std::errc::operation_canceled) {
            std::fprintf(stderr, "bench_latency server: accept: %s\n",
                         conn.error().message().c_str());
        }
    }
}

int run_server(std::uint16_t port, Backend backend, int cpu, bool pooled, unsigned spin_us) {
    if (!pin_to_cpu(cpu, "server")) return 1;
    tools::raise_fd_limit_to_max();
    std::signal(SIGPIPE, SIG_IGN);
    auto l = TcpListener::bind(SocketAddr::any_v4(port));
    if (!l) {
        std::fprintf(stderr, "bench_latency server: cannot listen on port %u: %s\n", port,
                     l.error().message().c_str());
        return 1;
    }
    // Accepted sockets inherit TCP_NODELAY from the listener: no setsockopt per connection.
    int one = 1;
    ::setsockopt(l->fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    try {
        Scheduler sched({.backend = backend, .idle_spin = std::chrono::microseconds(spin_us)});
        std::printf("listening on 0.0.0.0:%u (bench_latency server, %s, idle spin %u us)\n",
                    l->local_addr()->port(), sched.backend_name(), spin_us);
        std::fflush(stdout);
        sched.block_on(accept_loop(std::move(*l), pooled));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_latency server: %s\n", e.what());
        return 1;
    }
    return 0;
}

/// `bench_latency server` as a child process; reads its port from the line it prints.
struct ChildServer {
    pid_t pid = -1;
    std::uint16_t port = 0;
    std::string error;

    ChildServer(Backend backend, int cpu, bool pooled, unsigned spin_us) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) {
            error = std::string("pipe: ") + std::strerror(errno);
            return;
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
        std::vector<std::string> args{"bench_latency", "server",
                                      "--port",        "0",
                                      "--backend",     backend_name(backend),
                                      "--cpu",         std::to_string(cpu),
                                      "--recv",        pooled ? "pooled" : "copy",
                                      "--idle-spin",   std::to_string(spin_us)};
        std::vector<char*> argv;
        for (std::string& a : args)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        const int rc = ::posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        ::close(fds[1]);
        if (rc != 0) {
            error = std::string("starting the server: ") + std::strerror(rc);
            pid = -1;
            ::close(fds[0]);
            return;
        }
        std::string line;
        char ch;
        while (::read(fds[0], &ch, 1) == 1 && ch != '\n')
            line += ch;
        ::close(fds[0]);
        const auto colon = line.rfind(':', line.find(' ', line.find("0.0.0.0")));
        if (line.rfind("listening on ", 0) != 0 || colon == std::string::npos) {
            error = "the server did not start (see its message above)";
            return;
        }
        port = static_cast<std::uint16_t>(std::atoi(line.c_str() + colon + 1));
    }
    ~ChildServer() {
        if (pid <= 0) return;
        ::kill(pid, SIGTERM);
        int status;
        ::waitpid(pid, &status, 0);
    }
};

int run_client(const std::string& host, std::uint16_t port, Backend backend, const RunOptions& o,
               const std::vector<std::string>& only, bool json, int server_cpu, int client_cpu,
               bool pooled, unsigned spin_us) {
    std::signal(SIGPIPE, SIG_IGN);
    std::optional<ChildServer> child;
    std::string server_desc;
    if (port == 0) {
        child.emplace(backend, server_cpu, pooled, spin_us);
        if (!child->error.empty()) {
            std::fprintf(stderr, "bench_latency: %s\n", child->error.c_str());
            return 1;
        }
        port = child->port;
        server_desc = std::string("bench_latency server (") + (pooled ? "recv_pooled" : "recv") +
                      ") on CPU " + std::to_string(server_cpu);
        if (!pin_to_cpu(client_cpu, "client")) return 1;
    } else {
        server_desc = "the server at " + host + ":" + std::to_string(port);
        if (client_cpu >= 0 && !pin_to_cpu(client_cpu, "client")) return 1;
    }
    auto addr = SocketAddr::from_ip(host, port);
    if (!addr) {
        std::fprintf(stderr, "bench_latency: -h %s is not a numeric IP address\n", host.c_str());
        return 2;
    }
    std::vector<BenchResult> results;
    std::string failure;
    std::string backend_used;
    try {
        Scheduler sched({.backend = backend, .idle_spin = std::chrono::microseconds(spin_us)});
        backend_used = sched.backend_name();
        if (spin_us > 0) server_desc += ", idle spin " + std::to_string(spin_us) + " us";
        if (!json)
            std::printf("bench_latency: galay %s client against %s; %d samples of ~%g ms after "
                        "%g ms warm-up per benchmark\n",
                        backend_used.c_str(), server_desc.c_str(), o.samples, o.sample_ms,
                        o.warmup_ms);
        sched.block_on([&]() -> Task<void> {
            Client c;
            c.addr = *addr;
            for (const BenchDef& d : kBenches) {
                if (!only.empty() && std::find(only.begin(), only.end(), d.name) == only.end())
                    continue;
                BenchResult r;
                auto err = co_await measure(c, o, d, r);
                if (err) {
                    failure = std::string(d.name) + ": " + *err;
                    co_return;
                }
                results.push_back(std::move(r));
            }
        }());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_latency: %s\n", e.what());
        return 1;
    }
    if (!failure.empty()) {
        std::fprintf(stderr, "bench_latency: %s\n", failure.c_str());
        return 1;
    }
    if (json) {
        nlohmann::json j = {
            {"schema", "galay-latency/1"},
            {"implementation", "galay-" + backend_used + (spin_us > 0 ? "-spin" : "")},
            {"idle_spin_us", spin_us},
            {"server", server_desc},
            {"samples", o.samples},
            {"sample_ms", o.sample_ms},
            {"warmup_ms", o.warmup_ms},
            {"benchmarks", to_json(results)}};
        std::printf("%s\n", j.dump().c_str());
    } else {
        print_table(results);
        std::printf("\n(time: mean per iteration ± the 95%% bootstrap CI's half-width; p99 of the "
                    "single iterations; outliers by Tukey's fences)\n");
    }
    return 0;
}

// --- churn ------------------------------------------------------------------------------------

int count_fds(int pid) {
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return -1;
    int n = 0;
    while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.') ++n;
    ::closedir(d);
    return n;
}

struct ChurnOptions {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    unsigned clients = 50;
    double duration = 2, warmup = 0.5;
    std::uint64_t total = 0; // > 0: this many connections, no warm-up
    std::size_t size = 256;
    int server_pid = 0;
    bool json = false;
    Backend backend = Backend::automatic;
};

struct ChurnState {
    tools::LatencyHistogram hist;
    std::uint64_t started = 0, done = 0, errors = 0;
    std::string first_error;
    bool measuring = false, stop = false;
};

Task<void> churn_client(ChurnState& st, const ChurnOptions& o, SocketAddr addr) {
    std::vector<char> out(o.size), in(o.size);
    init_pattern(out);
    std::uint64_t seq = 0;
    auto fail = [&](std::string what) {
        ++st.errors;
        if (st.first_error.empty()) st.first_error = std::move(what);
    };
    while (!st.stop && (o.total == 0 || st.started < o.total)) {
        ++st.started;
        const Clock::time_point t0 = Clock::now();
        {
            auto c = co_await TcpStream::connect(addr).timeout(kOpTimeout);
            if (!c) {
                fail("connect: " + c.error().message());
                co_await sleep(1ms); // (a refused or exhausted connect would spin)
                continue;
            }
            fill_message(out, ++seq);
            auto w = co_await c->send_all(out).timeout(kOpTimeout);
            if (!w) {
                fail("send: " + w.error().message());
                continue;
            }
            auto n = co_await c->recv_exact(in).timeout(kOpTimeout);
            if (!n) {
                fail("recv: " + n.error().message());
                continue;
            }
            if (in != out) {
                fail(describe_mismatch(out, in));
                continue;
            }
        }
        if (st.measuring || o.total > 0) {
            st.hist.record(static_cast<std::uint64_t>(ns_since(t0)));
            ++st.done;
        }
    }
}

/// This process's CPU time, to the nanosecond (the scheduler's own account, not ticks).
double own_cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::chrono::nanoseconds seconds_to_ns(double s) {
    return std::chrono::nanoseconds(static_cast<std::int64_t>(s * 1e9));
}

int run_churn(const ChurnOptions& o) {
    std::signal(SIGPIPE, SIG_IGN);
    tools::raise_fd_limit_to_max();
    auto addr = SocketAddr::from_ip(o.host, o.port);
    if (!addr) {
        std::fprintf(stderr, "bench_latency churn: -h %s is not a numeric IP address\n",
                     o.host.c_str());
        return 2;
    }
    ChurnState st;
    const int fds_before = o.server_pid > 0 ? count_fds(o.server_pid) : -1;
    if (o.server_pid > 0 && fds_before < 0) {
        std::fprintf(stderr, "bench_latency churn: cannot read /proc/%d/fd\n", o.server_pid);
        return 1;
    }
    std::optional<double> cpu0, cpu1, own0, own1;
    double seconds = 0;
    std::string backend_used;
    try {
        Scheduler sched({.backend = o.backend});
        backend_used = sched.backend_name();
        sched.block_on([&]() -> Task<void> {
            auto timer = [&]() -> Task<void> {
                if (o.total == 0) co_await sleep(seconds_to_ns(o.warmup));
                st.measuring = true;
                own0 = own_cpu_seconds();
                if (o.server_pid > 0) cpu0 = tools::process_cpu_seconds(o.server_pid);
                const Clock::time_point t0 = Clock::now();
                if (o.total == 0) {
                    co_await sleep(seconds_to_ns(o.duration));
                    st.stop = true;
                    seconds = static_cast<double>(ns_since(t0)) / 1e9;
                    own1 = own_cpu_seconds();
                    if (o.server_pid > 0) cpu1 = tools::process_cpu_seconds(o.server_pid);
                } else {
                    while (st.started < o.total || st.done + st.errors < o.total)
                        co_await sleep(1ms);
                    seconds = static_cast<double>(ns_since(t0)) / 1e9;
                    own1 = own_cpu_seconds();
                    if (o.server_pid > 0) cpu1 = tools::process_cpu_seconds(o.server_pid);
                }
            };
            std::vector<Task<void>> tasks;
            tasks.push_back(timer());
            for (unsigned i = 0; i < o.clients; ++i)
                tasks.push_back(churn_client(st, o, *addr));
            co_await when_all(std::move(tasks));
        }());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_latency churn: %s\n", e.what());
        return 1;
    }
    // The server closes its side after ours: give it a moment to get back to where it started.
    int fds_after = -1;
    if (o.server_pid > 0) {
        const Clock::time_point t0 = Clock::now();
        do {
            fds_after = count_fds(o.server_pid);
            if (fds_after <= fds_before) break;
            std::this_thread::sleep_for(10ms);
        } while (Clock::now() - t0 < 5s);
    }
    const int leaked = o.server_pid > 0 ? std::max(0, fds_after - fds_before) : 0;
    const double rate = seconds > 0 ? static_cast<double>(st.done) / seconds : 0;
    std::optional<double> cpu_us;
    if (cpu0 && cpu1 && st.done > 0) cpu_us = (*cpu1 - *cpu0) * 1e6 / static_cast<double>(st.done);
    std::optional<double> own_us;
    if (own0 && own1 && st.done > 0) own_us = (*own1 - *own0) * 1e6 / static_cast<double>(st.done);
    auto us = [&](double q) { return static_cast<double>(st.hist.percentile_ns(q)) / 1e3; };
    if (o.json) {
        nlohmann::json j = {{"mode", "churn"},
                            {"backend", backend_used},
                            {"clients", o.clients},
                            {"message_bytes", o.size},
                            {"seconds", seconds},
                            {"connections", st.done},
                            {"conns_per_sec", rate},
                            {"errors", st.errors},
                            {"first_error", st.first_error},
                            {"latency_us",
                             {{"mean", st.hist.mean_ns() / 1e3},
                              {"p50", us(0.50)},
                              {"p90", us(0.90)},
                              {"p99", us(0.99)},
                              {"p99.9", us(0.999)},
                              {"max", static_cast<double>(st.hist.max_ns()) / 1e3}}}};
        if (cpu_us) j["server_cpu_us_per_conn"] = *cpu_us;
        if (own_us) j["client_cpu_us_per_conn"] = *own_us;
        if (o.server_pid > 0) {
            j["server_fds_before"] = fds_before;
            j["server_fds_after"] = fds_after;
            j["leaked_fds"] = leaked;
        }
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("churn: %zu B round trip per connection, %u clients (galay %s) -> %s:%u\n",
                    o.size, o.clients, backend_used.c_str(), o.host.c_str(), o.port);
        std::printf("connections: %s in %.2f s = %s/s, errors: %s\n",
                    tools::with_commas(st.done).c_str(), seconds,
                    tools::with_commas(static_cast<std::uint64_t>(rate)).c_str(),
                    tools::with_commas(st.errors).c_str());
        std::printf("connect+echo+close: mean %.1f us, p50 %.1f us, p90 %.1f us, p99 %.1f us, "
                    "p99.9 %.1f us, max %.1f us\n",
                    st.hist.mean_ns() / 1e3, us(0.5), us(0.9), us(0.99), us(0.999),
                    static_cast<double>(st.hist.max_ns()) / 1e3);
        if (own_us) std::printf("client CPU per connection: %.2f us\n", *own_us);
        if (cpu_us) std::printf("server CPU per connection: %.2f us\n", *cpu_us);
        if (o.server_pid > 0)
            std::printf("server open fds: %d before, %d after (%d leaked)\n", fds_before, fds_after,
                        leaked);
    }
    if (st.errors > 0)
        std::fprintf(stderr, "bench_latency churn: %s errors; the first: %s\n",
                     tools::with_commas(st.errors).c_str(), st.first_error.c_str());
    if (leaked > 0)
        std::fprintf(stderr, "bench_latency churn: the server has %d more open fds than before\n",
                     leaked);
    if (st.done == 0) std::fprintf(stderr, "bench_latency churn: no connection completed\n");
    return st.errors > 0 || leaked > 0 || st.done == 0 ? 1 : 0;
}

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at <= s.size() && !s.empty()) {
        const std::size_t comma = s.find(',', at);
        out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return out;
}

} // namespace

int main(int argc, char** argv) {
    cli::App app{"The latency benchmarks of the io_uring latency study on galay-kernel",
                 "bench_latency"};
    app.set_help_flag("--help", "Print this help and exit"); // -h is the host
    app.require_subcommand(0, 1);
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    Backend backend = Backend::automatic;
    RunOptions ro;
    bool json = false;
    std::string only;
    int server_cpu = 0, client_cpu = 1;
    std::string recv_mode = "pooled";
    unsigned spin_us = 0;
    app.add_option("-h,--host", host, "echo server address (with -p)")->capture_default_str();
    app.add_option("-p,--port", port, "echo server port; 0 = start bench_latency server")
        ->capture_default_str();
    app.add_option("-n,--samples", ro.samples, "samples per benchmark")
        ->check(cli::Range(2, 100000))
        ->capture_default_str();
    app.add_option("--sample-ms", ro.sample_ms, "target duration of one sample")
        ->check(tools::finite_range(0.01, 10000.0))
        ->capture_default_str();
    app.add_option("--warmup-ms", ro.warmup_ms, "warm-up per benchmark")
        ->check(tools::finite_range(0.0, 600000.0))
        ->capture_default_str();
    app.add_option("--bench", only, "comma-separated benchmark names (default: all five)");
    app.add_option("--server-cpu", server_cpu, "CPU of the server it starts (-1: not pinned)")
        ->capture_default_str();
    app.add_option("--client-cpu", client_cpu,
                   "CPU of the client when it starts the server (-1: not pinned)")
        ->capture_default_str();
    app.add_option("--recv", recv_mode, "the started server's receive: pooled or copy")
        ->check(cli::IsMember({"pooled", "copy"}))
        ->capture_default_str();
    tools::add_idle_spin_flag(app, &spin_us, "the client and the server it starts");
    app.add_flag("--json", json, "print one JSON object with the raw samples");
    tools::add_backend_flag(app, &backend);

    cli::App* server = app.add_subcommand("server", "the echo server the benchmarks run against");
    std::uint16_t server_port = 9000;
    int cpu = -1;
    Backend server_backend = Backend::automatic;
    std::string server_recv = "pooled";
    unsigned server_spin_us = 0;
    server->add_option("-p,--port", server_port, "port (0: any free port)")->capture_default_str();
    server->add_option("--cpu", cpu, "pin to this CPU (-1: not pinned)")->capture_default_str();
    server->add_option("--recv", server_recv, "pooled (recv_pooled) or copy (recv into a buffer)")
        ->check(cli::IsMember({"pooled", "copy"}))
        ->capture_default_str();
    tools::add_idle_spin_flag(*server, &server_spin_us, "the server");
    tools::add_backend_flag(*server, &server_backend);

    cli::App* churn = app.add_subcommand("churn", "connection churn: connect, one round trip, "
                                                  "close, as fast as possible");
    churn->set_help_flag("--help", "Print this help and exit");
    ChurnOptions co;
    churn->add_option("-h,--host", co.host, "server address")->capture_default_str();
    churn->add_option("-p,--port", co.port, "server port")->required();
    churn->add_option("-c,--clients", co.clients, "concurrent clients")
        ->check(cli::Range(1u, 100000u))
        ->capture_default_str();
    churn->add_option("-d,--duration", co.duration, "measured seconds")
        ->check(tools::seconds(0.01, 86400.0))
        ->capture_default_str();
    churn->add_option("--warmup", co.warmup, "seconds before measuring")
        ->check(tools::seconds(0.0, 3600.0))
        ->capture_default_str();
    churn->add_option("-n,--connections", co.total,
                      "make exactly this many connections (no warm-up) instead of -d");
    churn->add_option("-s,--size", co.size, "bytes of the round trip")
        ->check(cli::Range(std::size_t{1}, std::size_t{1} << 20))
        ->capture_default_str();
    churn->add_option("--server-pid", co.server_pid,
                      "server process: CPU per connection and open fds before/after");
    churn->add_flag("--json", co.json, "print one JSON object");
    tools::add_backend_flag(*churn, &co.backend);

    // Help: 0; usage errors: one line and 2, as every tool (bench/programs/common/cli.hpp).
    if (auto e = tools::parse_args(app, tools::args_from(argc, argv), "bench_latency"))
        return tools::print_exit(*e);
    if (*server)
        return run_server(server_port, server_backend, cpu, server_recv == "pooled",
                          server_spin_us);
    if (*churn) return run_churn(co);
    std::vector<std::string> names = split_commas(only);
    for (const std::string& n : names) {
        bool known = false;
        for (const BenchDef& d : kBenches)
            known |= n == d.name;
        if (!known) {
            std::fprintf(stderr, "bench_latency: unknown benchmark '%s'\n", n.c_str());
            return 2;
        }
    }
    return run_client(host, port, backend, ro, names, json, server_cpu, port == 0 ? client_cpu : -1,
                      recv_mode == "pooled", spin_us);
}
