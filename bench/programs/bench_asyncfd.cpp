// bench_asyncfd: the price of readiness over completion. A socketpair ping-pong between two
// threads (one scheduler each), driven through galay::AsyncFd + read(2)/write(2) (what a
// foreign library's descriptor gets) against galay's native recv/send on a UnixStream pair, in
// one run, alternating.
//   bench_asyncfd --backend io_uring --pairs 5 --rounds 50000 --pin
//
// Each side tries its read or write first and waits (AsyncFd::readable/writable) only on EAGAIN,
// the pattern docs/guide/async-fd.md recommends; the native side's recv_exact/send_all do the
// same inside the driver (epoll) or as one io_uring operation. A run reports the process CPU
// time per round trip (both threads) and round trips per second; runs alternate native /
// asyncfd (A B A B ..., each on fresh sockets and schedulers), and the verdict is the median
// ratio asyncfd / native with its min-max spread over the pairs.
#include "common/tool_support.hpp"

#include <galay/galay.hpp>
#include <nlohmann/json.hpp>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace galay;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMessage = 64;

enum class Mode { native, asyncfd };

double cpu_seconds() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
}

/// Read exactly buf.size() bytes: read(2) first, AsyncFd::readable() on EAGAIN.
Task<bool> read_exact(AsyncFd& afd, std::span<char> buf) {
    std::size_t got = 0;
    while (got < buf.size()) {
        const ssize_t n = ::read(afd.fd(), buf.data() + got, buf.size() - got);
        if (n > 0) {
            got += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EAGAIN) {
            auto ready = co_await afd.readable();
            if (!ready) co_return false;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            co_return false;
        }
    }
    co_return true;
}

/// Write all of buf: write(2) first, AsyncFd::writable() on EAGAIN.
Task<bool> write_all(AsyncFd& afd, std::span<const char> buf) {
    std::size_t put = 0;
    while (put < buf.size()) {
        const ssize_t n = ::write(afd.fd(), buf.data() + put, buf.size() - put);
        if (n > 0) {
            put += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EAGAIN) {
            auto ready = co_await afd.writable();
            if (!ready) co_return false;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            co_return false;
        }
    }
    co_return true;
}

/// One side's `rounds` exchanges; the initiator sends first. Throws on a failed transfer.
Task<void> foreign_side(int fd, bool initiator, int rounds) {
    auto afd = AsyncFd::borrow(fd);
    if (!afd) throw Error(afd.error(), "AsyncFd::borrow");
    std::array<char, kMessage> buf{};
    for (int i = 0; i < rounds; ++i) {
        if (initiator) {
            const bool sent = co_await write_all(*afd, buf);
            if (!sent) throw std::runtime_error("write");
        }
        const bool got = co_await read_exact(*afd, buf);
        if (!got) throw std::runtime_error("read");
        if (!initiator) {
            const bool sent = co_await write_all(*afd, buf);
            if (!sent) throw std::runtime_error("write");
        }
    }
    afd->reset(); // (borrowed: the socket stays open, closed by run_once)
}

Task<void> native_side(UnixStream& s, bool initiator, int rounds) {
    std::array<char, kMessage> buf{};
    for (int i = 0; i < rounds; ++i) {
        if (initiator) {
            auto sent = co_await s.send_all(buf);
            if (!sent) throw std::runtime_error("send_all");
        }
        auto got = co_await s.recv_exact(buf);
        if (!got) throw std::runtime_error("recv_exact");
        if (!initiator) {
            auto sent = co_await s.send_all(buf);
            if (!sent) throw std::runtime_error("send_all");
        }
    }
}

struct RunResult {
    double cpu_us = 0;        // process CPU per round trip
    double round_trips_s = 0; // round trips per second of wall time
};

RunResult run_once(Mode mode, Backend backend, bool pin, int warmup, int rounds) {
    const int total = warmup + rounds;
    // The native side's galay streams, or the foreign side's raw socketpair (galay never owns
    // a descriptor an AsyncFd watches).
    auto pair = UnixStream::pair();
    if (!pair) throw Error(pair.error(), "socketpair");
    int raw[2] = {-1, -1};
    if (mode == Mode::asyncfd && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, raw) != 0)
        throw Error(errno_code(errno), "socketpair");
    std::exception_ptr failed[2];
    double cpu0 = 0, cpu1 = 0;
    Clock::time_point t0, t1;
    // The responder runs on CPU 1, the initiator (which times the run) on CPU 0. Warm-up round
    // trips go before the timed ones in the same loop; the initiator reads the clock and the
    // CPU time when they are done.
    auto side = [&](int index) {
        try {
            if (pin) pin_to(index);
            Scheduler sched({.backend = backend});
            const bool initiator = index == 0;
            UnixStream& s = index == 0 ? pair->first : pair->second;
            auto body = [&]() -> Task<void> {
                if (initiator) {
                    if (mode == Mode::native) {
                        co_await native_side(s, true, warmup);
                    } else {
                        co_await foreign_side(raw[0], true, warmup);
                    }
                    cpu0 = cpu_seconds();
                    t0 = Clock::now();
                    if (mode == Mode::native) {
                        co_await native_side(s, true, rounds);
                    } else {
                        co_await foreign_side(raw[0], true, rounds);
                    }
                    t1 = Clock::now();
                    cpu1 = cpu_seconds();
                } else if (mode == Mode::native) {
                    co_await native_side(s, false, total);
                } else {
                    co_await foreign_side(raw[1], false, total);
                }
            };
            sched.block_on(body());
        } catch (...) {
            failed[index] = std::current_exception();
        }
    };
    std::thread responder(side, 1);
    side(0);
    responder.join();
    for (int fd : raw)
        if (fd >= 0) ::close(fd);
    for (auto& e : failed)
        if (e) std::rethrow_exception(e);
    RunResult r;
    r.cpu_us = (cpu1 - cpu0) * 1e6 / double(rounds);
    r.round_trips_s = double(rounds) / std::chrono::duration<double>(t1 - t0).count();
    return r;
}

} // namespace

int main(int argc, char** argv) {
    cli::App app{"AsyncFd + read/write against native recv/send: a socketpair ping-pong"};
    tools::PairedRuns runs{.pairs = 5, .rounds = 50000, .warmup = 5000};
    Backend backend = Backend::automatic;
    tools::add_paired_run_flags(app, &runs, "alternating native / asyncfd runs",
                                "initiator on CPU 0, responder on CPU 1");
    tools::add_backend_flag(app, &backend);
    if (auto e = tools::parse_args(app, tools::args_from(argc, argv), "bench_asyncfd"))
        return tools::print_exit(*e);

    nlohmann::json out;
    std::vector<double> ratios_cpu, ratios_rate;
    try {
        auto resolved = resolve_backend(backend);
        if (!resolved) throw Error(resolved.error(), "backend");
        backend = *resolved;
        for (int p = 0; p < runs.pairs; ++p) {
            const RunResult a = run_once(Mode::native, backend, runs.pin, runs.warmup, runs.rounds);
            const RunResult b =
                run_once(Mode::asyncfd, backend, runs.pin, runs.warmup, runs.rounds);
            ratios_cpu.push_back(b.cpu_us / a.cpu_us);
            ratios_rate.push_back(b.round_trips_s / a.round_trips_s);
            out["runs"].push_back(
                {{"pair", p},
                 {"native", {{"cpu_us", a.cpu_us}, {"round_trips_s", a.round_trips_s}}},
                 {"asyncfd", {{"cpu_us", b.cpu_us}, {"round_trips_s", b.round_trips_s}}}});
            if (!runs.json)
                std::printf("pair %d  CPU per round trip (us), round trips/s:  native %.2f "
                            "%.0f   asyncfd %.2f %.0f\n",
                            p, a.cpu_us, a.round_trips_s, b.cpu_us, b.round_trips_s);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_asyncfd: %s\n", e.what());
        return 1;
    }
    out["backend"] = backend_name(backend);
    out["rounds"] = runs.rounds;
    out["pairs"] = runs.pairs;
    out["message_bytes"] = kMessage;
    out["ratio_asyncfd_over_native"] = {{"cpu", tools::spread_of(ratios_cpu)},
                                        {"round_trips_s", tools::spread_of(ratios_rate)}};
    if (runs.json) {
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        auto line = [](const char* what, const nlohmann::json& s) {
            std::printf("asyncfd / native, %-22s %.3fx [%.3f-%.3f]\n", what,
                        s["median"].get<double>(), s["min"].get<double>(), s["max"].get<double>());
        };
        std::printf("backend %s, %d pairs of %d round trips (%zu-byte messages)\n",
                    backend_name(backend), runs.pairs, runs.rounds, kMessage);
        line("CPU per round trip:", out["ratio_asyncfd_over_native"]["cpu"]);
        line("round trips/s:", out["ratio_asyncfd_over_native"]["round_trips_s"]);
    }
    return 0;
}
