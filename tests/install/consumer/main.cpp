// A program built against an installed galay-kernel (tests/install/consumers.sh): a TCP round trip
// on loopback and a file written and read back, on the backend GALAY_BACKEND names (or auto), and
// a TLS client context (OpenSSL linked through the package). Its CMake build runs the package's
// galay_check_coroutines on it, so its awaited results are bound before they are tested.
#include <galay/galay.hpp>
#include <galay/tls/context.hpp>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>

galay::Task<int> round_trip() {
    auto listener = galay::TcpListener::bind(galay::SocketAddr::loopback_v4(0));
    if (!listener) co_return 1;
    auto [accepted, connected] = co_await galay::when_all(
        galay::as_task(listener->accept()),
        galay::as_task(galay::TcpStream::connect(*listener->local_addr())));
    if (!accepted || !connected) co_return 2;
    const std::string ping = "ping";
    auto sent = co_await connected->send_all(ping); // (bound first: galay_check_coroutines)
    if (!sent) co_return 3;
    std::array<char, 4> got{};
    auto received = co_await accepted->recv_exact(got);
    if (!received) co_return 4;
    if (std::memcmp(got.data(), ping.data(), got.size()) != 0) co_return 5;

    const std::string path = "/tmp/galay-consumer." + std::to_string(::getpid());
    auto file = galay::fs::File::open(
        path,
        galay::fs::OpenOptions{.read = true, .write = true, .create = true, .truncate = true});
    if (!file) co_return 6;
    ::unlink(path.c_str());
    auto written = co_await file->write_all_at(ping, 0);
    if (!written) co_return 7;
    got = {};
    auto read = co_await file->read_exact_at(got, 0);
    if (!read) co_return 8;
    co_return std::memcmp(got.data(), ping.data(), got.size()) == 0 ? 0 : 9;
}

int main() {
    galay::Scheduler sched;
    int rc = sched.block_on(round_trip());
    try {
        (void)galay::tls::Context::client({.system_trust = false});
    } catch (const galay::Error&) {
        rc = 10;
    }
    std::printf("%s on %s\n", rc == 0 ? "ok" : "FAILED", sched.backend_name());
    return rc;
}
