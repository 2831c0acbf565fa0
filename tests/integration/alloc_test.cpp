// The request path allocates nothing: global operator new is replaced by a counting one, and an
// echo exchange in steady state (after warm-up) must not move the counter. Its own executable,
// because replacing operator new affects the whole program.
#include "runtime/timer_heap.hpp"
#include "support/backends.hpp"
#include "support/tcp_pair.hpp"
#include "support/threads.hpp"
#include "support/tls_pair.hpp"
#ifdef GALAY_HAVE_HTTP_APP
#include "http/server.hpp"
#endif

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <openssl/crypto.h>
#include <string>

#include "common/counting_new.hpp" // (bench/programs/common)
using galay::tools::g_allocations;

using namespace galay;

namespace {

constexpr int kWarmup = 200, kMeasured = 2000;

/// Why an "allocates nothing" check failed: how many exchanges were measured, and the call stack
/// of the first allocation among them.
std::string measured(const char* exchanges) {
    return "heap allocations in " + std::to_string(kMeasured) + " " + exchanges + "\n" +
           tools::first_allocation_stack();
}

/// Client and server in one scheduler; returns allocations during the measured requests.
Task<std::uint64_t> echo_allocations(bool pooled) {
    auto pair = co_await test::loopback_pair();
    TcpStream& client = pair.first;
    TcpStream& server = pair.second;
    std::uint64_t before = 0, after = 0;
    auto serve = [&]() -> Task<void> {
        std::array<char, 4096> buf;
        for (int i = 0; i < kWarmup + kMeasured; ++i) {
            if (pooled) {
                auto b = co_await server.recv_pooled();
                if (!b || b->empty()) throw std::runtime_error("recv_pooled");
                if (!co_await server.send_all(b->bytes())) throw std::runtime_error("send");
            } else {
                auto n = co_await server.recv(buf);
                if (!n || *n == 0) throw std::runtime_error("recv");
                if (!co_await server.send_all(std::span(buf.data(), *n)))
                    throw std::runtime_error("send");
            }
        }
    };
    auto drive = [&]() -> Task<void> {
        std::array<char, 256> out{}, in{};
        for (int i = 0; i < kWarmup + kMeasured; ++i) {
            if (i == kWarmup) before = tools::start_counting();
            std::memcpy(out.data(), &i, sizeof i);
            if (!co_await client.send_all(out).timeout(std::chrono::seconds(10)))
                throw std::runtime_error("client send");
            if (!co_await client.recv_exact(in).timeout(std::chrono::seconds(10)))
                throw std::runtime_error("client recv");
            if (std::memcmp(in.data(), out.data(), in.size()) != 0)
                throw std::runtime_error("mismatch");
        }
        after = tools::stop_counting();
    };
    co_await when_all(serve(), drive());
    co_return after - before;
}

/// A line protocol through io::BufReader (read_line) and io::BufWriter (write + flush): both
/// take their slow paths on every request (the server waits for each line; every flush sends),
/// whose coroutine frames must come from the reader's and writer's reused blocks.
Task<std::uint64_t> buffered_line_allocations() {
    auto pair = co_await test::loopback_pair();
    TcpStream& client = pair.first;
    TcpStream& server = pair.second;
    std::uint64_t before = 0, after = 0;
    auto serve = [&]() -> Task<void> {
        io::BufReader reader(server, 256);
        io::BufWriter writer(server, 256);
        for (int i = 0; i < kWarmup + kMeasured; ++i) {
            auto line = co_await reader.read_line().timeout(std::chrono::seconds(10));
            if (!line) throw Error(line.error(), "read_line");
            if (!co_await writer.write(*line)) throw std::runtime_error("write");
            if (!co_await writer.write(std::string_view("\n"))) throw std::runtime_error("write");
            if (!co_await writer.flush().timeout(std::chrono::seconds(10)))
                throw std::runtime_error("flush");
        }
    };
    auto drive = [&]() -> Task<void> {
        std::array<char, 17> out{}, in{};
        for (int i = 0; i < kWarmup + kMeasured; ++i) {
            if (i == kWarmup) before = tools::start_counting();
            std::snprintf(out.data(), out.size(), "line %010d", i);
            out[16] = '\n';
            if (!co_await client.send_all(out)) throw std::runtime_error("client send");
            if (!co_await client.recv_exact(in).timeout(std::chrono::seconds(10)))
                throw std::runtime_error("client recv");
            if (in != out) throw std::runtime_error("mismatch");
        }
        after = tools::stop_counting();
    };
    co_await when_all(serve(), drive());
    co_return after - before;
}

#ifdef GALAY_HAVE_HTTP_APP
/// The HTTP server (apps/http) answering keep-alive GET / requests: parser, BufReader, BufWriter,
/// the fixed answer formatted in place, one flush per request.
Task<std::uint64_t> http_allocations() {
    auto server = http::Server::create({});
    if (!server) throw Error(server.error(), "server");
    auto pair = co_await test::loopback_pair();
    TcpStream& client = pair.first;
    std::uint64_t before = 0, after = 0;
    auto drive = [&]() -> Task<void> {
        const std::string_view get = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";
        std::array<char, 4096> in{};
        std::size_t answer = 0; // the length of one answer (all are alike)
        for (int i = 0; i < kWarmup + kMeasured; ++i) {
            if (i == kWarmup) before = tools::start_counting();
            if (!co_await client.send_all(get)) throw std::runtime_error("client send");
            std::size_t got = 0;
            do {
                auto n = co_await client.recv(std::span(in).subspan(got))
                             .timeout(std::chrono::seconds(10));
                if (!n || *n == 0) throw std::runtime_error("client recv");
                got += *n;
            } while (answer == 0
                         ? std::string_view(in.data(), got).find("World!") == std::string_view::npos
                         : got < answer);
            if (answer == 0) answer = got;
            if (got != answer) throw std::runtime_error("answers differ in length");
        }
        after = tools::stop_counting();
    };
    co_await when_any(drive(), (*server)->serve_connection(std::move(pair.second)));
    co_return after - before;
}
#endif

} // namespace

// OpenSSL allocates with malloc, not operator new: its own count, through its memory hooks
// (installed before OpenSSL's first allocation: the certificates are made on first use).
std::atomic<std::uint64_t> g_openssl_allocations{0};
void* openssl_malloc(std::size_t n, const char*, int) {
    g_openssl_allocations.fetch_add(1, std::memory_order_relaxed);
    return std::malloc(n);
}
void* openssl_realloc(void* p, std::size_t n, const char*, int) {
    g_openssl_allocations.fetch_add(1, std::memory_order_relaxed);
    return std::realloc(p, n);
}
void openssl_free(void* p, const char*, int) {
    std::free(p);
}
const bool g_openssl_hooked =
    CRYPTO_set_mem_functions(openssl_malloc, openssl_realloc, openssl_free) == 1;

struct TlsAllocations {
    std::uint64_t galay = 0, openssl = 0;
};

/// TLS echo of 256-byte messages after the handshake, client and server in one scheduler.
Task<TlsAllocations> tls_echo_allocations() {
    const tls::Context sctx = test::server_context(test::pki().server());
    const tls::Context cctx = test::client_context();
    test::Handshaken h = co_await test::tls_pair(sctx, cctx);
    if (!h.client_result || !h.server_result) throw std::runtime_error("handshake");
    TlsAllocations out;
    std::uint64_t before = 0, ssl_before = 0;
    auto serve = [&]() -> Task<void> {
        std::array<char, 4096> buf;
        for (int i = 0; i < kWarmup + kMeasured; ++i) {
            std::size_t got = 0;
            while (got < 256) {
                auto n = co_await h.server.recv(std::span(buf.data() + got, 256 - got));
                if (!n || *n == 0) throw std::runtime_error("tls recv");
                got += *n;
            }
            if (!co_await h.server.send_all(std::span(buf.data(), 256)))
                throw std::runtime_error("tls send");
        }
    };
    auto drive = [&]() -> Task<void> {
        std::array<char, 256> msg{}, in{};
        for (int i = 0; i < kWarmup + kMeasured; ++i) {
            if (i == kWarmup) {
                before = tools::start_counting();
                ssl_before = g_openssl_allocations.load();
            }
            std::memcpy(msg.data(), &i, sizeof i);
            if (!co_await h.client.send_all(msg).timeout(std::chrono::seconds(10)))
                throw std::runtime_error("client send");
            std::size_t got = 0;
            while (got < in.size()) {
                auto n = co_await h.client.recv(std::span(in.data() + got, in.size() - got))
                             .timeout(std::chrono::seconds(10));
                if (!n || *n == 0) throw std::runtime_error("client recv");
                got += *n;
            }
            if (std::memcmp(in.data(), msg.data(), in.size()) != 0)
                throw std::runtime_error("mismatch");
        }
        out.galay = tools::stop_counting() - before;
        out.openssl = g_openssl_allocations.load() - ssl_before;
    };
    co_await when_all(serve(), drive());
    co_return out;
}

class AllocationTest : public test::BackendTest {};

#ifdef GALAY_HAVE_HTTP_APP
TEST_P(AllocationTest, HttpKeepAliveRequestsAllocateNothing) {
    EXPECT_EQ(run(http_allocations()), 0u) << measured("requests");
}
#endif

TEST_P(AllocationTest, BufferedReadLineAndFlushAllocateNothing) {
    EXPECT_EQ(run(buffered_line_allocations()), 0u) << measured("requests");
}

TEST_P(AllocationTest, EchoRequestsAllocateNothingWithPooledBuffers) {
    EXPECT_EQ(run(echo_allocations(true)), 0u) << measured("requests");
}

TEST_P(AllocationTest, EchoRequestsAllocateNothingWithCallerBuffers) {
    EXPECT_EQ(run(echo_allocations(false)), 0u) << measured("requests");
}

namespace {
Task<int> one() {
    co_return 1;
}
} // namespace

TEST_P(AllocationTest, ASpawnAllocatesOneFrameBesidesTheTasks) {
    // The JoinHandle's shared state lives in a small wrapper frame: nothing else is allocated,
    // locally or on another worker, once the cross-thread queues are warm.
    run([]() -> Task<void> {
        for (int i = 0; i < 100; ++i) { // warm-up
            co_await spawn(one());
        }
        Task<int> t = one();
        const std::uint64_t before = g_allocations.load();
        JoinHandle<int> h = spawn(std::move(t));
        EXPECT_EQ(g_allocations.load() - before, 1u);
        EXPECT_EQ(co_await h, 1);
    }());
    RuntimeOptions o;
    o.workers = 2;
    o.scheduler = options();
    Runtime rt(o);
    static constexpr int kRounds = 2000;
    const auto per_round = rt.spawn_on(0,
                                       [](Runtime& rt) -> Task<std::uint64_t> {
                                           for (int i = 0; i < 200; ++i) // warm-up
                                               co_await rt.spawn_on(1, one());
                                           const std::uint64_t before = g_allocations.load();
                                           int sum = 0;
                                           for (int i = 0; i < kRounds; ++i)
                                               sum += co_await rt.spawn_on(1, one());
                                           const std::uint64_t n = g_allocations.load() - before;
                                           EXPECT_EQ(sum, kRounds);
                                           co_return n;
                                       }(rt))
                               .join();
    EXPECT_EQ(per_round, 2u * kRounds) << "the task frame and the wrapper frame, nothing else";
}

Task<std::uint64_t> invoke_allocations(Runtime& rt, unsigned target) {
    for (int i = 0; i < kWarmup; ++i) // warm-up: the frame cache and the cross-thread queues
        (void)co_await rt.invoke_on(target, [i] { return i; });
    const std::uint64_t before = tools::start_counting();
    long sum = 0;
    for (int i = 0; i < kMeasured; ++i)
        sum += co_await rt.invoke_on(target, [i] { return i; });
    const std::uint64_t n = tools::stop_counting() - before;
    CO_ASSERT(sum == static_cast<long>(kMeasured) * (kMeasured - 1) / 2);
    co_return n;
}

TEST_P(AllocationTest, InvokeOnAllocatesNothingWhenWarm) {
    // A call's state is a coroutine frame from the caller's per-thread cache, freed back there
    // when the caller takes the result: nothing per call, across workers or on the caller's own.
    RuntimeOptions o;
    o.workers = 2;
    o.scheduler = options();
    Runtime rt(o);
    EXPECT_EQ(rt.spawn_on(0, invoke_allocations(rt, 1)).join(), 0u) << measured("invoke_on calls");
    EXPECT_EQ(rt.spawn_on(0, invoke_allocations(rt, 0)).join(), 0u)
        << measured("invoke_on calls on the caller's own worker");
}

TEST_P(AllocationTest, TheCounterSeesAllocations) { // the test above can fail
    std::uint64_t before = g_allocations.load();
    int* volatile p = new int(3); // volatile: an optimised build may not elide the pair
    delete p;
    EXPECT_EQ(g_allocations.load() - before, 1u);
}

TEST_P(AllocationTest, TimersAllocateNothingUpToTheReservedCount) {
    // How many deadlines are armed together depends on timing (an epoll op arms one only when it
    // waits), so a first growth of the timer heap could fall on any request: up to kReserved
    // armed together, in any order of arming and disarming, never allocate.
    constexpr std::size_t kN = detail::TimerHeap::kReserved;
    std::array<detail::TimerNode, kN> nodes{};
    std::uint64_t state = 12345; // (a fixed linear congruential sequence: deterministic)
    auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
    const std::uint64_t before = tools::start_counting();
    {
        detail::TimerHeap heap;
        for (int round = 0; round < 20000; ++round) {
            detail::TimerNode& n = nodes[(next() >> 33) % kN];
            if (n.armed()) {
                heap.remove(n);
            } else {
                n.deadline_ns = static_cast<std::int64_t>(next() >> 20);
                heap.push(n);
            }
            if (round % 7 == 0 && !heap.empty()) heap.pop();
        }
        for (auto& n : nodes) // all armed together at the end
            if (!n.armed()) heap.push(n);
        EXPECT_EQ(heap.size(), kN);
        heap.clear();
    }
    const std::uint64_t after = tools::stop_counting();
    EXPECT_EQ(after - before, 2u) << "the two arrays' reservations only\n"
                                  << tools::first_allocation_stack();
}

TEST_P(AllocationTest, AFailureNamesWhereTheFirstAllocationCameFrom) {
    const std::uint64_t before = tools::start_counting();
    int* volatile p = new int(3);
    delete p;
    const std::uint64_t after = tools::stop_counting();
    EXPECT_EQ(after - before, 1u);
    const std::string stack = tools::first_allocation_stack();
    EXPECT_NE(stack.find("alloc_tests"), std::string::npos) << stack; // (this program's frames)
    // Nothing is recorded when nothing allocated while counting, nor once counting stopped.
    (void)tools::start_counting();
    (void)tools::stop_counting();
    int* volatile q = new int(4);
    delete q;
    EXPECT_EQ(tools::first_allocation_stack(), "");
}

TEST_P(AllocationTest, ChannelMessagesAcrossThreadsAllocateNothing) {
    // Two schedulers on two threads: a ping-pong (every message wakes the other thread) and
    // bursts that fill a channel (its sender waits, the receiver hands it a free cell). After a
    // warm-up of the same traffic (each thread's first post creates its slot in the other
    // scheduler's queue), no message allocates.
    Channel<std::uint64_t> there(16), back(16);
    std::uint64_t before = 0, after = 0;
    auto traffic = [&]() -> Task<void> {
        for (int i = 0; i < kWarmup + kMeasured; ++i) {
            if (i == kWarmup) before = tools::start_counting();
            CO_ASSERT(co_await there.send(i));
            auto v = co_await back.recv();
            CO_ASSERT(v && *v == static_cast<std::uint64_t>(i));
            if (i % 50 == 0) {
                // A burst of 24: the echoes fill `back` (16) and the echoing side waits to send
                // until this side receives (more than 32 would deadlock both).
                for (int k = 0; k < 24; ++k)
                    CO_ASSERT(co_await there.send(k));
                for (int k = 0; k < 24; ++k)
                    CO_ASSERT(co_await back.recv());
            }
        }
    };
    test::run_on_threads(
        options(),
        [&]() -> Task<void> {
            for (;;) {
                auto v = co_await there.recv();
                if (!v) co_return;
                CO_ASSERT(co_await back.send(*v));
            }
        }(),
        [&]() -> Task<void> {
            co_await traffic();
            after = tools::stop_counting();
            there.close();
        }());
    EXPECT_EQ(after - before, 0u) << measured("round trips");
}

TEST_P(AllocationTest, TlsEchoAfterTheHandshakeAllocatesNothingOnGalaysSide) {
    ASSERT_TRUE(g_openssl_hooked) << "OpenSSL allocated before its hooks were installed";
    const TlsAllocations a = run(tls_echo_allocations());
    EXPECT_EQ(a.galay, 0u) << measured("TLS echoes");
    // What OpenSSL itself allocates per record, reported (docs/guide/tls.md cites it).
    std::printf("OpenSSL allocations in %d TLS echoes (256 B each way): %llu\n", kMeasured,
                static_cast<unsigned long long>(a.openssl));
    RecordProperty("openssl_allocations", static_cast<int>(a.openssl));
}

GALAY_INSTANTIATE_BACKENDS(AllocationTest);
