// A TCP echo server on a thread of its own (its own scheduler and backend), on 127.0.0.1 and a
// free port: what the tool tests run bench_client against.
#pragma once

#include <galay/galay.hpp>

#include <array>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace galay::test {

class EchoServerThread {
public:
    explicit EchoServerThread(Backend backend) {
        auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
        if (!listener) throw std::system_error(listener.error(), "echo server bind");
        port_ = listener->local_addr()->port();
        std::promise<void> started;
        auto ready = started.get_future();
        thread_ = std::thread([this, backend, l = std::move(*listener), &started]() mutable {
            Scheduler sched({.backend = backend});
            {
                std::lock_guard lock(mutex_);
                sched_ = &sched;
            }
            started.set_value();
            sched.block_on(with_cancel(stop_, serve(std::move(l))));
            std::lock_guard lock(mutex_);
            sched_ = nullptr;
        });
        ready.get();
    }
    EchoServerThread(const EchoServerThread&) = delete;
    EchoServerThread& operator=(const EchoServerThread&) = delete;
    ~EchoServerThread() {
        Task<void> stopper = cancel(stop_);
        {
            std::lock_guard lock(mutex_);
            if (sched_ != nullptr) sched_->post(stopper.handle());
        }
        thread_.join();
    }

    std::uint16_t port() const noexcept { return port_; }

private:
    static Task<void> echo(TcpStream conn) {
        std::array<char, 65536> buf;
        for (;;) {
            auto n = co_await conn.recv(buf);
            if (!n || *n == 0) co_return;
            auto w = co_await conn.send_all(std::span(buf.data(), *n));
            if (!w) co_return;
        }
    }
    /// Until cancelled; the connections are detached tasks, destroyed with the scheduler.
    static Task<void> serve(TcpListener l) {
        for (;;) {
            auto c = co_await l.accept();
            if (!c) co_return;
            spawn(echo(std::move(*c)));
        }
    }
    static Task<void> cancel(CancelSource& s) {
        s.cancel();
        co_return;
    }

    std::uint16_t port_ = 0;
    CancelSource stop_;
    std::mutex mutex_;
    Scheduler* sched_ = nullptr;
    std::thread thread_;
};

} // namespace galay::test
