// soak_local: open/use/close loops inside one galay program, to find what leaks over many
// cycles: UDP sockets (batches and single datagrams), files (buffered and O_DIRECT, closed by the
// destructor or by co_await close()), TCP connections ended every way (FIN, half-close, reset,
// closed with a pooled recv armed). Per backend: a warm-up round, then rounds for --duration
// seconds; the process's open fds must then be exactly what they were after the warm-up, its RSS
// within the stated tolerance, and the scheduler must hold no pool buffer and no kernel op.
//
//   soak_local --duration 20 [--backend all|io_uring|epoll] [--dir /var/tmp] [--rss-slack-kib N]
//
// Exit status: 0 clean, 1 a leak or an I/O error (with a message saying which), 2 bad usage.
// tests/soak/soak.py runs it (make soak).
#include "galay_cli.hpp"

#include <galay/galay.hpp>

#include "runtime/scheduler_access.hpp" // the driver's pool and op counts (src/)

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

struct Failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <class T>
T check(Result<T> r, const char* what) {
    if (!r) throw Failure(std::string(what) + ": " + r.error().message());
    if constexpr (!std::is_void_v<T>) return std::move(*r);
}

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
        ++n;
    return n - 1; // (the directory iterator's own fd)
}

std::uint64_t rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string key;
    while (f >> key) {
        if (key == "VmRSS:") {
            std::uint64_t kib = 0;
            f >> kib;
            return kib;
        }
        f.ignore(1 << 20, '\n');
    }
    return 0;
}

/// A small deterministic generator (sizes, choices).
struct Rng {
    std::uint64_t x;
    std::uint64_t next() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    }
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

void fill(std::span<std::byte> b, std::uint64_t seed) {
    for (std::size_t i = 0; i < b.size(); ++i)
        b[i] = static_cast<std::byte>((seed * 131 + i * 7 + i / 251) & 0xff);
}

// --- one round of each loop -----------------------------------------------------------------

Task<void> udp_round(Rng& rng) {
    UdpSocket a = check(UdpSocket::bind(SocketAddr::loopback_v4(0)), "udp bind");
    UdpSocket b = check(UdpSocket::bind(SocketAddr::loopback_v4(0)), "udp bind");
    const SocketAddr to = check(b.local_addr(), "udp local_addr");
    const std::size_t count = 1 + rng.below(64);
    std::vector<std::array<std::byte, 200>> out(count), in(64);
    std::vector<OutDatagram> batch;
    for (std::size_t i = 0; i < count; ++i) {
        fill(out[i], i);
        batch.emplace_back(out[i], &to);
    }
    std::size_t sent = 0;
    while (sent < count)
        sent += check(co_await a.send_batch(std::span(batch).subspan(sent)), "send_batch");
    std::vector<Datagram> slots;
    for (auto& s : in)
        slots.emplace_back(s);
    for (std::size_t got = 0; got < count;) {
        const std::size_t n = check(co_await b.recv_batch(slots).timeout(10s), "recv_batch");
        for (std::size_t i = 0; i < n; ++i, ++got)
            if (slots[i].size != 200 || std::memcmp(in[i].data(), out[got].data(), 200) != 0)
                throw Failure("udp: datagram " + std::to_string(got) + " came back wrong");
    }
    check(co_await a.send_to(std::span(out[0]), to), "send_to");
    SocketAddr from;
    check(co_await b.recv_from(std::span(in[0]), &from).timeout(10s), "recv_from");
    if (rng.below(2) == 0) check(co_await a.close(), "udp close"); // else: the destructor
}

Task<void> file_round(Rng& rng, const std::filesystem::path& dir, bool direct) {
    const auto path = dir / ("soak-" + std::to_string(rng.next() % 1000000));
    fs::OpenOptions o{.read = true, .write = true, .create = true, .truncate = true};
    o.direct = direct;
    auto opened = fs::File::open(path, o);
    if (!opened) throw Failure(fs::describe_error(path, opened.error()));
    fs::File f = std::move(*opened);
    const std::size_t blocks = 1 + rng.below(8);
    fs::AlignedBuffer out(blocks * 4096), in(blocks * 4096);
    fill(out.span(), rng.next());
    check(co_await f.write_all_at(out, 0), "write_all_at");
    if (rng.below(2) == 0) check(co_await f.fdatasync(), "fdatasync");
    check(co_await f.read_exact_at(in, 0), "read_exact_at");
    if (std::memcmp(in.data(), out.data(), out.size()) != 0)
        throw Failure("file: data read back differs");
    if (rng.below(2) == 0) check(co_await f.close(), "file close"); // else: the destructor
    std::filesystem::remove(path);
}

Task<void> tcp_round(Rng& rng) {
    auto l = check(TcpListener::bind(SocketAddr::loopback_v4(0)), "tcp bind");
    const SocketAddr addr = SocketAddr::loopback_v4(check(l.local_addr(), "local_addr").port());
    auto [c, s] = co_await when_all(as_task(TcpStream::connect(addr)), as_task(l.accept()));
    TcpStream client = check(std::move(c), "connect");
    TcpStream server = check(std::move(s), "accept");
    std::vector<std::byte> msg(1 + rng.below(100'000)), back(msg.size());
    fill(msg, rng.next());
    // The server side echoes through pooled buffers (a multishot recv on io_uring).
    auto echo = [&]() -> Task<void> {
        for (std::size_t n = 0; n < msg.size();) {
            auto b = check(co_await server.recv_pooled().timeout(10s), "recv_pooled");
            if (b.empty()) throw Failure("tcp: early EOF");
            check(co_await server.send_all(b.bytes()), "echo send_all");
            n += b.size();
        }
    };
    auto talk = [&]() -> Task<void> {
        check(co_await client.send_all(msg), "send_all");
        check(co_await client.recv_exact(back).timeout(10s), "recv_exact");
    };
    co_await when_all(talk(), echo());
    if (back != msg) throw Failure("tcp: echo came back wrong");
    switch (rng.below(4)) {
    case 0: // both sides closed by their destructors
        break;
    case 1: { // half-close: the server sees EOF, then closes
        check(client.shutdown(Shutdown::write), "shutdown");
        auto eof = check(co_await server.recv_pooled().timeout(10s), "recv_pooled");
        if (!eof.empty()) throw Failure("tcp: data after the echo");
        check(co_await server.close(), "tcp close");
        break;
    }
    case 2: { // reset by the client; the server's armed recv sees it
        check(client.set_linger_reset(), "linger");
        { TcpStream gone = std::move(client); }
        auto r = co_await server.recv_pooled().timeout(10s);
        if (r && !r->empty()) throw Failure("tcp: data after a reset");
        break;
    }
    default: // the server closes first with its recv armed; the client sees the FIN
    {
        TcpStream gone = std::move(server);
    }
        std::array<std::byte, 16> buf;
        if (check(co_await client.recv(buf).timeout(10s), "recv after close") != 0)
            throw Failure("tcp: data after the peer's close");
        break;
    }
}

Task<std::uint64_t> rounds(std::chrono::steady_clock::time_point until,
                           const std::filesystem::path& dir,
                           std::optional<std::filesystem::path> direct_dir, std::uint64_t seed) {
    Rng rng{seed};
    std::uint64_t n = 0;
    do {
        co_await udp_round(rng);
        co_await file_round(rng, dir, false);
        if (direct_dir) co_await file_round(rng, *direct_dir, true);
        co_await tcp_round(rng);
        ++n;
    } while (std::chrono::steady_clock::now() < until);
    co_return n;
}

bool direct_io_works(const std::filesystem::path& dir) {
    const auto probe = dir / "soak-direct-probe";
    const int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
    std::filesystem::remove(probe);
    return true;
}

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    double duration = 0;
    std::string backend = "all";
    std::string dir_text = "/var/tmp";
    std::uint64_t slack_kib = 2048;
    cli::App app{"The soak's in-process part: UDP sockets, files and TCP connections opened, used "
                 "and closed in a loop, with descriptors and memory checked.",
                 "soak_local"};
    app.add_option("--duration", duration, "seconds")
        ->required()
        ->check(tools::seconds(0.001, 86399));
    app.add_option("--backend", backend, "all, io_uring or epoll")
        ->check(cli::IsMember({"all", "io_uring", "epoll"}))
        ->capture_default_str();
    app.add_option("--dir", dir_text, "a directory for the files")
        ->check(tools::non_empty())
        ->check(cli::ExistingDirectory)
        ->capture_default_str();
    app.add_option("--rss-slack-kib", slack_kib, "RSS growth allowed, KiB")->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "soak_local")) return *code;
    const std::filesystem::path dir = dir_text;

    std::vector<Backend> backends;
    if (backend != "epoll") {
        if (probe_io_uring().usable)
            backends.push_back(Backend::io_uring);
        else if (backend == "io_uring") {
            std::fprintf(stderr, "soak_local: io_uring unavailable: %s\n",
                         probe_io_uring().reason.c_str());
            return 1;
        } else
            std::printf("soak_local: SKIP io_uring (%s)\n", probe_io_uring().reason.c_str());
    }
    if (backend != "io_uring") backends.push_back(Backend::epoll);
    const auto direct_dir = direct_io_works(dir) ? std::optional(dir) : std::nullopt;
    if (!direct_dir)
        std::printf("soak_local: O_DIRECT refused in %s: buffered files only\n", dir.c_str());

    bool ok = true;
    const double per_backend = duration / static_cast<double>(backends.size());
    for (Backend b : backends) {
        const char* name = backend_name(b);
        try {
            Scheduler sched({.backend = b});
            // Warm-up (a fifth of the time, 1 to 10 s): lazily created state (the epoll file
            // engine's threads and AIO context, fd tables) and the pool buffers the load keeps
            // in rotation (each costs the pages a receive wrote) exist before the baseline.
            auto after = [](double seconds) {
                return std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(seconds));
            };
            const double warmup = std::clamp(per_backend / 5, 1.0, 10.0);
            sched.block_on(rounds(after(warmup), dir, direct_dir, 1));
            const std::size_t fds0 = open_fds();
            const std::uint64_t rss0 = rss_kib();
            const auto until = after(per_backend - warmup);
            const std::uint64_t n = sched.block_on(rounds(until, dir, direct_dir, 2));
            // One more loop turn that waits: completions of the last round's closes (a cancelled
            // multishot accept, say) are reaped, as they would be by a running server.
            (void)sched.block_on(sleep(10ms));
            const std::size_t fds1 = open_fds();
            const std::uint64_t rss1 = rss_kib();
            const std::size_t buffers =
                detail::SchedulerAccess::driver(sched).pool_buffers_in_use();
            const std::size_t in_flight = detail::SchedulerAccess::driver(sched).in_flight();
            const bool fds_ok = fds1 == fds0;
            const bool rss_ok = rss1 <= rss0 + slack_kib;
            std::printf("soak_local %s: %llu rounds (UDP + file%s + TCP each), fds %zu -> %zu, "
                        "RSS %.1f -> %.1f MiB (limit +%.1f), pool buffers held %zu, ops in "
                        "flight %zu: %s\n",
                        name, static_cast<unsigned long long>(n), direct_dir ? "s" : "", fds0, fds1,
                        rss0 / 1024.0, rss1 / 1024.0, slack_kib / 1024.0, buffers, in_flight,
                        fds_ok && rss_ok && buffers == 0 && in_flight == 0 ? "ok" : "LEAK");
            if (!fds_ok)
                std::fprintf(stderr, "soak_local %s: %zd fds leaked\n", name,
                             static_cast<ssize_t>(fds1 - fds0));
            if (!rss_ok)
                std::fprintf(stderr, "soak_local %s: RSS grew by %llu KiB (more than %llu)\n", name,
                             static_cast<unsigned long long>(rss1 - rss0),
                             static_cast<unsigned long long>(slack_kib));
            if (buffers != 0)
                std::fprintf(stderr, "soak_local %s: %zu pool buffers never given back\n", name,
                             buffers);
            if (in_flight != 0)
                std::fprintf(stderr, "soak_local %s: %zu operations still in the kernel\n", name,
                             in_flight);
            ok = ok && fds_ok && rss_ok && buffers == 0 && in_flight == 0;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "soak_local %s: %s\n", name, e.what());
            ok = false;
        }
    }
    return ok ? 0 : 1;
}
