// latency_blocking: the latency study's five benchmarks with plain blocking POSIX sockets at both
// ends, the floor the study's other implementations are measured against
// (bench/studies/latency.py).
//
//   latency_blocking server -p 9000                  iterative echo server, one connection at a
//   time latency_blocking -h 127.0.0.1 -p 9000 [-n 30] [--sample-ms 5] [--warmup-ms 200] [--json]
//
// The benchmarks, their calibration and the JSON schema are those of bench_latency and of every
// control group (bench/control/README.md). Exit 1 on any I/O error or wrong echo, 2 on bad flags.
#include "galay_cli.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct BenchDef {
    const char* name;
    std::size_t bytes;
    int round_trips;
    bool new_connection;
};

constexpr BenchDef kBenches[] = {
    {"network_latency_100B", 100, 1, true},
    {"network_latency_1000B", 1000, 1, true},
    {"connection_strategy/new_connection", 256, 1, true},
    {"connection_strategy/reuse", 256, 1, false},
    {"throughput_100_messages", 256, 100, false},
};

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "latency_blocking: %s\n", what.c_str());
    std::exit(1);
}

std::int64_t ns_since(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

void set_nodelay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool write_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

int serve(int port) {
    std::signal(SIGPIPE, SIG_IGN);
    int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 4096) != 0)
        fail("cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno));
    socklen_t len = sizeof a;
    ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    std::printf("listening on 0.0.0.0:%u (latency_blocking)\n", ntohs(a.sin_port));
    std::fflush(stdout);
    std::vector<char> buf(64 * 1024);
    for (;;) {
        int c = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        set_nodelay(c);
        for (;;) {
            ssize_t n = ::read(c, buf.data(), buf.size());
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0 || !write_all(c, buf.data(), static_cast<std::size_t>(n))) break;
        }
        ::close(c);
    }
}

struct Client {
    sockaddr_in addr{};
    std::uint64_t seq = 0;

    int connect_one() {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
            fail(std::string("connect: ") + std::strerror(errno));
        set_nodelay(fd);
        return fd;
    }

    void round_trip(int fd, std::vector<char>& out, std::vector<char>& in) {
        ++seq;
        std::memcpy(out.data(), &seq, std::min<std::size_t>(8, out.size()));
        if (!write_all(fd, out.data(), out.size()))
            fail(std::string("write: ") + std::strerror(errno));
        std::size_t got = 0;
        while (got < in.size()) {
            ssize_t n = ::read(fd, in.data() + got, in.size() - got);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) fail(std::string("read: ") + std::strerror(errno));
            if (n == 0)
                fail("the server closed the connection after " + std::to_string(got) + " of " +
                     std::to_string(in.size()) + " echoed bytes");
            got += static_cast<std::size_t>(n);
        }
        if (in != out) fail("echo mismatch");
    }

    void run(const BenchDef& d, std::uint64_t iterations, int persistent,
             std::vector<std::int64_t>* times) {
        std::vector<char> out(d.bytes), in(d.bytes);
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = static_cast<char>('a' + i % 26);
        for (std::uint64_t it = 0; it < iterations; ++it) {
            const Clock::time_point t0 = Clock::now();
            const int fd = d.new_connection ? connect_one() : persistent;
            for (int rt = 0; rt < d.round_trips; ++rt)
                round_trip(fd, out, in);
            if (d.new_connection) ::close(fd);
            if (times != nullptr) times->push_back(ns_since(t0));
        }
    }
};

template <class T>
std::string json_list(const std::vector<T>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i != 0) s += ',';
        s += std::to_string(v[i]);
    }
    return s + "]";
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string host = "127.0.0.1";
    int port = -1, server_port = 9000, samples = 30;
    double sample_ms = 5, warmup_ms = 200;
    bool json = false;
    cli::App app{"The latency study's floor: blocking POSIX sockets at both ends (a client, or "
                 "with `server` the echo server).",
                 "latency_blocking"};
    app.set_help_flag("--help", "Print this help message and exit"); // (-h is the host)
    cli::App* server = app.add_subcommand("server", "serve (one thread per connection)");
    server->add_option("-p,--port", server_port, "TCP port")
        ->check(tools::whole(1, 65535))
        ->capture_default_str();
    app.add_option("-h,--host", host, "server IPv4 address")->capture_default_str();
    app.add_option("-p,--port", port, "server port (required)")->check(tools::whole(1, 65535));
    app.add_option("-n,--samples", samples, "samples per benchmark")
        ->check(tools::whole(2, 1000000))
        ->capture_default_str();
    app.add_option("--sample-ms", sample_ms, "milliseconds per sample")
        ->check(tools::finite_range(0.001, 3.6e6))
        ->capture_default_str();
    app.add_option("--warmup-ms", warmup_ms, "milliseconds of warm-up")
        ->check(tools::finite_range(0, 3.6e6))
        ->capture_default_str();
    app.add_flag("--json", json, "print JSON (default: a table)");
    if (auto code = tools::parse_command_line(app, argc, argv, "latency_blocking")) return *code;
    if (server->parsed()) return serve(server_port);
    if (port < 0)
        return tools::print_exit(tools::usage_error("latency_blocking", "--port: is required"));
    std::signal(SIGPIPE, SIG_IGN);
    Client c;
    c.addr.sin_family = AF_INET;
    c.addr.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &c.addr.sin_addr) != 1)
        return tools::print_exit(tools::usage_error(
            "latency_blocking", "--host: '" + host + "' is not an IPv4 address"));

    std::string out = "{\"schema\":\"galay-latency/1\",\"implementation\":\"blocking-sockets\","
                      "\"server\":\"latency_blocking server\",\"samples\":" +
                      std::to_string(samples) + ",\"sample_ms\":" + std::to_string(sample_ms) +
                      ",\"warmup_ms\":" + std::to_string(warmup_ms) + ",\"benchmarks\":[";
    bool first = true;
    for (const BenchDef& d : kBenches) {
        const int persistent = d.new_connection ? -1 : c.connect_one();
        const Clock::time_point w0 = Clock::now();
        std::uint64_t warm = 0;
        do {
            c.run(d, 1, persistent, nullptr);
            ++warm;
        } while (ns_since(w0) < static_cast<std::int64_t>(warmup_ms * 1e6));
        const double per = static_cast<double>(ns_since(w0)) / static_cast<double>(warm);
        const auto iterations =
            static_cast<std::uint64_t>(std::max(1.0, std::ceil(sample_ms * 1e6 / per)));
        std::vector<std::int64_t> sample_ns, iteration_ns;
        std::vector<std::uint64_t> sample_iterations;
        for (int s = 0; s < samples; ++s) {
            const Clock::time_point t0 = Clock::now();
            c.run(d, iterations, persistent, &iteration_ns);
            sample_ns.push_back(ns_since(t0));
            sample_iterations.push_back(iterations);
        }
        if (persistent >= 0) ::close(persistent);
        if (!json) { // (the full statistics come from bench/harness/latstats.py: use --json)
            double per_iteration = 0;
            for (std::size_t s = 0; s < sample_ns.size(); ++s)
                per_iteration +=
                    static_cast<double>(sample_ns[s]) / static_cast<double>(sample_iterations[s]);
            std::printf("%-36s %10.3f us per iteration (mean of %d samples)\n", d.name,
                        per_iteration / static_cast<double>(samples) / 1e3, samples);
        }
        if (!first) out += ",";
        first = false;
        out += "{\"name\":\"";
        out += d.name;
        out += "\",\"message_bytes\":" + std::to_string(d.bytes);
        out += ",\"round_trips_per_iteration\":" + std::to_string(d.round_trips);
        out += ",\"new_connection\":";
        out += d.new_connection ? "true" : "false";
        out += ",\"sample_iterations\":" + json_list(sample_iterations);
        out += ",\"sample_ns\":" + json_list(sample_ns);
        out += ",\"iteration_ns\":" + json_list(iteration_ns) + "}";
    }
    out += "]}";
    if (json) std::printf("%s\n", out.c_str());
    return 0;
}
