// bench_server [port]: a TCP echo server on galay-kernel, for bench_client and the harness.
//   bench_server 8080 --backend io_uring --threads 1
// With --threads N, N schedulers (one per thread) each accept on their own SO_REUSEPORT listener.
#include "common/tool_support.hpp"

#include <galay/galay.hpp>

#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

using namespace galay;

/// Echo through a per-connection buffer (`--recv copy`).
galay::Task<void> echo_copy(TcpStream conn, std::size_t buffer_size) {
    (void)conn.set_nodelay(true);
    std::vector<char> buf(buffer_size);
    for (;;) {
        auto n = co_await conn.recv(buf);
        if (!n || *n == 0) co_return;
        if (!co_await conn.send_all(std::span(buf.data(), *n))) co_return;
    }
}

/// Echo through buffers lent by the scheduler (`--recv pooled`, the default): on io_uring one
/// multishot recv per connection over a provided-buffer ring; idle connections hold no buffer.
galay::Task<void> echo_pooled(TcpStream conn) {
    (void)conn.set_nodelay(true);
    for (;;) {
        auto b = co_await conn.recv_pooled();
        if (!b || b->empty()) co_return;
        if (!co_await conn.send_all(b->bytes())) co_return;
    }
}

galay::Task<void> accept_loop(TcpListener listener, bool pooled, std::size_t buffer_size) {
    for (;;) {
        auto conn = co_await listener.accept();
        if (conn) {
            spawn(pooled ? echo_pooled(std::move(*conn))
                         : echo_copy(std::move(*conn), buffer_size));
        } else if (conn.error() == std::errc::too_many_files_open) {
            std::fprintf(stderr, "bench_server: accept: %s (raise ulimit -n)\n",
                         conn.error().message().c_str());
            co_await sleep(std::chrono::milliseconds(10));
        } else if (conn.error() != std::errc::operation_canceled) {
            std::fprintf(stderr, "bench_server: accept: %s\n", conn.error().message().c_str());
        }
    }
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"TCP echo server on galay-kernel"};
    std::uint16_t port = 8080;
    unsigned threads = 1;
    std::size_t buffer_size = 64 * 1024;
    std::string bind_ip = "0.0.0.0";
    Backend backend = Backend::automatic;
    app.add_option("port", port, "TCP port to listen on")->capture_default_str();
    app.add_option("-t,--threads", threads, "scheduler threads (SO_REUSEPORT listeners)")
        ->check(CLI::Range(1u, 256u))
        ->capture_default_str();
    app.add_option("--bind", bind_ip, "address to bind")->capture_default_str();
    std::string recv_mode = "pooled";
    app.add_option("--recv", recv_mode,
                   "pooled: buffers lent by the scheduler (io_uring: multishot recv + buffer "
                   "ring); copy: one buffer per connection")
        ->check(CLI::IsMember({"pooled", "copy"}))
        ->capture_default_str();
    app.add_option("--buffer", buffer_size, "receive buffer per connection with --recv copy")
        ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24))
        ->capture_default_str();
    bool no_register_files = false;
    app.add_flag("--no-register-files", no_register_files,
                 "io_uring: keep connections out of the ring's registered-file table (to measure "
                 "what it buys)");
    tools::add_backend_flag(app, &backend);
    CLI11_PARSE(app, argc, argv);

    auto addr = SocketAddr::from_ip(bind_ip, port);
    if (!addr) {
        std::fprintf(stderr, "bench_server: --bind %s is not a numeric IP address\n",
                     bind_ip.c_str());
        return 2;
    }
    tools::raise_fd_limit_to_max();
    std::signal(SIGPIPE, SIG_IGN);

    // Bind every listener before any thread starts, so a busy port is one clear error.
    std::vector<TcpListener> listeners;
    for (unsigned i = 0; i < threads; ++i) {
        auto l = TcpListener::bind(*addr, {.backlog = 4096, .reuse_port = threads > 1});
        if (!l) {
            std::fprintf(stderr, "bench_server: cannot listen on %s: %s\n",
                         addr->to_string().c_str(), l.error().message().c_str());
            return 1;
        }
        listeners.push_back(std::move(*l));
    }

    auto run = [&](unsigned i, bool announce) {
        try {
            Scheduler sched({.backend = backend, .register_files = !no_register_files});
            if (announce) {
                std::printf("listening on %s (bench_server, %s, %u thread%s)\n",
                            addr->to_string().c_str(), sched.backend_name(), threads,
                            threads == 1 ? "" : "s");
                std::fflush(stdout);
            }
            sched.block_on(
                accept_loop(std::move(listeners[i]), recv_mode == "pooled", buffer_size));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_server: %s\n", e.what());
            std::exit(1);
        }
    };
    std::vector<std::thread> workers;
    for (unsigned i = 1; i < threads; ++i)
        workers.emplace_back(run, i, false);
    run(0, true);
    for (auto& w : workers)
        w.join();
    return 0;
}
