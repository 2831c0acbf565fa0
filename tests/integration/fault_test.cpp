// Fault injection (src/driver/common/fault_plan.hpp), on both backends: the drivers are made to see
// EINTR, EAGAIN, short transfers, errors (ECONNRESET, ENOBUFS, ENOMEM), CQEs with -ECANCELED or
// handled a loop turn late, multishot recvs ended by the kernel and an empty buffer ring. Every
// public operation must either retry (the caller sees nothing) or report the injected error, and no
// byte or datagram is ever lost or duplicated. Seeded: a failure names its seed. Each test also
// checks that the faults it is about were really injected, so that it cannot pass by testing
// nothing.
#include "support/backends.hpp"
#include "support/files.hpp"
#include "support/patterns.hpp"
#include "support/pooled_echo.hpp"
#include "support/tcp_pair.hpp"

#include "driver/common/fault_plan.hpp"

#include <array>
#include <cstring>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;
namespace faults = galay::detail::faults;

namespace {

constexpr std::uint32_t bit(detail::OpCode c) {
    return 1u << static_cast<unsigned>(c);
}

/// Deterministic stream contents: byte `i` of stream `seed`.
std::byte stream_byte(std::uint64_t seed, std::uint64_t i) {
    std::uint64_t x = (seed * 0x9E3779B97F4A7C15ull) ^ (i / 8);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return static_cast<std::byte>(x >> ((i % 8) * 8));
}
void fill_stream(std::span<std::byte> out, std::uint64_t seed, std::uint64_t at) {
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = stream_byte(seed, at + i);
}
/// Index of the first byte of `got` that is not stream `seed` from `at` on, or got.size().
std::size_t first_mismatch(std::span<const std::byte> got, std::uint64_t seed, std::uint64_t at) {
    for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != stream_byte(seed, at + i)) return i;
    return got.size();
}

/// Sizes that vary (1 B to `max`), from a small generator of our own.
class Sizes {
public:
    explicit Sizes(std::uint64_t seed)
        : x_(seed * 0x9E3779B97F4A7C15ull + 1) {}
    std::size_t next(std::size_t max) {
        x_ ^= x_ << 13;
        x_ ^= x_ >> 7;
        x_ ^= x_ << 17;
        return 1 + static_cast<std::size_t>(x_ % max);
    }

private:
    std::uint64_t x_;
};

constexpr std::uint32_t kStreamOps = bit(detail::OpCode::recv) | bit(detail::OpCode::send);

} // namespace

class FaultTest : public test::BackendTest {};

// EINTR, EAGAIN and short transfers on every send and recv: send_all and recv_exact still move
// every byte, once, in order; a plain recv returns some of them and loses none.
TEST_P(FaultTest, StreamTransfersRetryInterruptsWouldBlockAndShortTransfers) {
    constexpr std::uint64_t kSeed = 11;
    constexpr std::size_t kTotal = 4 << 20;
    faults::Scope plan({.seed = kSeed,
                        .ops = kStreamOps,
                        .interrupted = 0.2,
                        .would_block = 0.2,
                        .short_transfer = 0.3});
    run([]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        auto sender = [&]() -> Task<void> {
            Sizes sizes(1);
            std::vector<std::byte> chunk(64 << 10);
            for (std::size_t off = 0; off < kTotal;) {
                const std::size_t n = std::min(sizes.next(chunk.size()), kTotal - off);
                fill_stream(std::span(chunk).first(n), kSeed, off);
                auto r = co_await c.send_all(std::span(chunk).first(n)).timeout(10s);
                CO_ASSERT(r && *r == n);
                off += n;
            }
        };
        auto receiver = [&]() -> Task<void> {
            Sizes sizes(2);
            std::vector<std::byte> buf(64 << 10);
            std::size_t got = 0;
            for (bool exact = true; got < kTotal; exact = !exact) {
                const std::size_t want = std::min(sizes.next(buf.size()), kTotal - got);
                auto r = exact ? co_await s.recv_exact(std::span(buf).first(want)).timeout(10s)
                               : co_await s.recv(std::span(buf).first(want)).timeout(10s);
                CO_ASSERT(r && *r > 0 && *r <= want);
                CO_ASSERT(!exact || *r == want);
                CO_ASSERT(first_mismatch(std::span(buf).first(*r), kSeed, got) == *r);
                got += *r;
            }
        };
        co_await when_all(sender(), receiver());
    }());
    const faults::Counts n = faults::counts();
    EXPECT_GT(n.interrupted, 0u);
    EXPECT_GT(n.would_block, 0u);
    EXPECT_GT(n.short_transfer, 0u);
}

// An error injected into a transfer (nothing moved by that attempt) is what the caller gets; the
// peer receives exactly the bytes that went before it, and a receiver that goes on after an error
// of its own misses nothing.
class StreamErrorTest : public test::BackendTest {};

TEST_P(StreamErrorTest, InjectedErrorsAreReportedAndNothingIsLostOrDuplicated) {
    for (const int error : {ECONNRESET, ENOBUFS, ENOMEM}) {
        SCOPED_TRACE(std::strerror(error));
        const std::uint64_t seed = 20 + static_cast<std::uint64_t>(error);
        faults::Scope plan(
            {.seed = seed, .ops = kStreamOps, .short_transfer = 0.3, .fail = 0.01, .error = error});
        std::size_t confirmed = 0; // bytes of send_all calls that succeeded
        std::size_t failed_chunk = 0;
        std::size_t received = 0;
        int receiver_errors = 0;
        run([&]() -> Task<void> {
            auto [c, s] = co_await test::loopback_pair();
            auto sender = [&]() -> Task<void> {
                Sizes sizes(seed);
                std::vector<std::byte> chunk(32 << 10);
                for (;;) {
                    const std::size_t n = sizes.next(chunk.size());
                    fill_stream(std::span(chunk).first(n), seed, confirmed);
                    auto r = co_await c.send_all(std::span(chunk).first(n));
                    if (!r) {
                        EXPECT_EQ(r.error(), std::error_code(error, std::system_category()));
                        failed_chunk = n;
                        break;
                    }
                    confirmed += n;
                }
                CO_ASSERT(c.shutdown(Shutdown::write)); // the peer reads up to here, then EOF
            };
            auto receiver = [&]() -> Task<void> {
                std::vector<std::byte> buf(16 << 10);
                for (;;) {
                    auto r = co_await s.recv(buf).timeout(10s);
                    if (!r) { // this attempt moved nothing: go on
                        CO_ASSERT(r.error() == std::error_code(error, std::system_category()));
                        ++receiver_errors;
                        continue;
                    }
                    if (*r == 0) break;
                    CO_ASSERT(first_mismatch(std::span(buf).first(*r), seed, received) == *r);
                    received += *r;
                }
            };
            co_await when_all(sender(), receiver());
        }());
        // The failed send_all may have sent part of its chunk before the error.
        EXPECT_GE(received, confirmed);
        EXPECT_LE(received, confirmed + failed_chunk);
        EXPECT_GT(failed_chunk, 0u);
        EXPECT_GT(faults::counts().fail, 0u);
    }
}

// recv_pooled on a small pool whose buffers are kept out of it for a loop turn now and then (the
// io_uring buffer ring runs dry: ENOBUFS ends the multishot recv), with multishot recvs ended by
// the kernel and interrupted system calls: an echo server still returns every byte.
TEST_P(FaultTest, PooledRecvSurvivesAnEmptyRingAndEndedMultishots) {
    faults::Scope plan({.seed = 31,
                        .interrupted = 0.1,
                        .short_transfer = 0.1,
                        .end_multishot = 0.2,
                        .starve_ring = 0.5});
    Scheduler sched({.backend = GetParam(), .pool_buffers = 8, .pool_buffer_size = 512});
    const std::uint64_t ok = sched.block_on([]() -> Task<std::uint64_t> {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        if (!l) throw Error(l.error(), "bind");
        co_return co_await test::pooled_echo_round_trips(
            *l, 16, 100, [](std::span<std::byte> out, int id, int m) {
                fill_stream(out, 100 + id, static_cast<std::uint64_t>(m) * out.size());
            });
    }());
    EXPECT_EQ(ok, 16u * 100u);
    const faults::Counts n = faults::counts();
    EXPECT_GT(n.starve_ring, 0u);
    if (GetParam() == Backend::io_uring) {
        EXPECT_GT(n.end_multishot, 0u);
        EXPECT_GT(n.ring_empty, 0u);
    }
}

// Completions handled a loop turn late, after the deadline of their recv fired (its cancel then
// finds nothing to cancel), and CQEs that say -ECANCELED though nobody cancelled: a timed-out or
// cancelled recv consumed nothing, a late one delivers what it got, and the stream arrives whole.
TEST_P(FaultTest, LateAndSpuriouslyCancelledCompletionsLoseNoByte) {
    constexpr std::uint64_t kSeed = 41;
    constexpr std::size_t kTotal = 1 << 20;
    faults::Scope plan(
        {.seed = kSeed, .ops = kStreamOps, .short_transfer = 0.2, .canceled = 0.1, .late = 0.5});
    int timeouts = 0, cancels = 0;
    run([&]() -> Task<void> {
        auto [c, s] = co_await test::loopback_pair();
        auto sender = [&]() -> Task<void> {
            Sizes sizes(3);
            std::vector<std::byte> chunk(16 << 10);
            for (std::size_t off = 0; off < kTotal;) {
                const std::size_t n = std::min(sizes.next(chunk.size()), kTotal - off);
                fill_stream(std::span(chunk).first(n), kSeed, off);
                auto r = co_await c.send(std::span(chunk).first(n)); // a plain send: retryable
                if (!r) {
                    CO_ASSERT(r.error() == std::errc::operation_canceled);
                    continue; // nothing was sent: the same bytes again
                }
                off += *r;
                if (sizes.next(4) == 1) (void)co_await sleep(50us); // let receives time out
            }
        };
        auto receiver = [&]() -> Task<void> {
            std::vector<std::byte> buf(8 << 10);
            std::size_t got = 0;
            while (got < kTotal) {
                auto r = co_await s.recv(buf).timeout(20us);
                if (!r) {
                    if (r.error() == std::errc::timed_out) {
                        ++timeouts;
                    } else {
                        CO_ASSERT(r.error() == std::errc::operation_canceled);
                        ++cancels;
                    }
                    continue;
                }
                CO_ASSERT(*r > 0);
                CO_ASSERT(first_mismatch(std::span(buf).first(*r), kSeed, got) == *r);
                got += *r;
            }
        };
        co_await when_all(sender(), receiver());
    }());
    if (GetParam() == Backend::io_uring) {
        const faults::Counts n = faults::counts();
        EXPECT_GT(n.late, 0u);
        EXPECT_GT(n.canceled, 0u);
        EXPECT_GT(cancels, 0);
    }
    EXPECT_GT(timeouts, 0); // (the deadlines did fire: the late path was taken around them)
}

// Files: write_all_at and read_exact_at through EINTR, EAGAIN (epoll: RWF_NOWAIT refused, redone
// on the pool) and short transfers, on buffered and (where the filesystem allows) O_DIRECT files.
TEST_P(FaultTest, FileTransfersRetryInterruptsWouldBlockAndShortTransfers) {
    constexpr std::uint64_t kSeed = 51;
    std::vector<std::pair<std::filesystem::path, bool>> places{
        {test::TempDir::default_base(), false}};
    if (auto d = test::direct_io_dir()) places.emplace_back(*d, true);
    for (const auto& [where, direct] : places) {
        SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
        test::TempDir dir(where);
        faults::Scope plan({.seed = kSeed + direct,
                            .interrupted = 0.2,
                            .would_block = 0.3,
                            .short_transfer = 0.3});
        run([&]() -> Task<void> {
            fs::File f =
                test::open_or_throw(dir / "data", direct ? test::kCreateRwDirect : test::kCreateRw);
            constexpr std::size_t kBlock = 64 << 10, kBlocks = 32; // 2 MiB
            fs::AlignedBuffer buf(kBlock, 4096);
            for (std::size_t b = 0; b < kBlocks; ++b) {
                fill_stream(buf.span(), kSeed, b * kBlock);
                auto w = co_await f.write_all_at(buf, b * kBlock);
                CO_ASSERT(w && *w == kBlock);
            }
            Sizes sizes(5);
            for (std::size_t at = 0; at < kBlocks * kBlock;) {
                // O_DIRECT: whole aligned blocks; buffered: any size at any offset.
                const std::size_t n =
                    direct ? kBlock : std::min(sizes.next(kBlock), kBlocks * kBlock - at);
                std::span<std::byte> part(buf.data(), n);
                auto r = co_await f.read_exact_at(part, at);
                CO_ASSERT(r && *r == n);
                CO_ASSERT(first_mismatch(part, kSeed, at) == n);
                at += n;
            }
        }());
        const faults::Counts n = faults::counts();
        EXPECT_GT(n.interrupted + n.would_block + n.short_transfer, 0u);
        if (!direct) {
            EXPECT_GT(n.short_transfer, 0u);
        }
    }
}

// An error injected into a file operation is reported (nothing was moved); the same call again
// succeeds and the data is right.
TEST_P(FaultTest, FileErrorsAreReported) {
    constexpr std::uint64_t kSeed = 61;
    test::TempDir dir;
    faults::Scope plan({.seed = kSeed, .fail = 0.3, .error = ENOMEM});
    int errors = 0;
    run([&]() -> Task<void> {
        fs::File f = test::open_or_throw(dir / "data", test::kCreateRw);
        std::vector<std::byte> out(20'000), in(out.size());
        for (std::uint64_t block = 0; block < 20; ++block) {
            const std::uint64_t at = block * out.size();
            fill_stream(out, kSeed, at);
            for (int attempt = 0;; ++attempt) {
                CO_ASSERT(attempt < 100);
                auto w = co_await f.write_all_at(out, at);
                if (w) break;
                CO_ASSERT(w.error() == std::errc::not_enough_memory);
                ++errors;
            }
            for (int attempt = 0;; ++attempt) {
                CO_ASSERT(attempt < 100);
                auto r = co_await f.read_exact_at(in, at);
                if (r) break;
                CO_ASSERT(r.error() == std::errc::not_enough_memory);
                ++errors;
            }
            CO_ASSERT(in == out);
        }
    }());
    EXPECT_GT(errors, 0);
}

// UDP batches through EINTR, EAGAIN, partial sendmmsg/recvmmsg and ENOBUFS: each datagram arrives
// exactly once and in order (the sender sends again what an error stopped; the receiver goes on).
TEST_P(FaultTest, UdpBatchesDeliverEveryDatagramOnceThroughFaults) {
    constexpr std::uint32_t kCount = 4000, kWindow = 256;
    faults::Scope plan({.seed = 71,
                        .ops = bit(detail::OpCode::recvmmsg) | bit(detail::OpCode::sendmmsg),
                        .interrupted = 0.2,
                        .would_block = 0.2,
                        .short_transfer = 0.3,
                        .fail = 0.05,
                        .error = ENOBUFS});
    int send_errors = 0, recv_errors = 0;
    run([&]() -> Task<void> {
        auto server = UdpSocket::bind(SocketAddr::loopback_v4(0), {.recv_buffer_size = 1 << 20});
        CO_ASSERT(server);
        auto client = UdpSocket::open(AF_INET);
        CO_ASSERT(client);
        CO_ASSERT(client->connect(*server->local_addr()));
        std::uint32_t sent = 0, received = 0;
        auto sender = [&]() -> Task<void> {
            std::vector<std::array<char, 100>> msgs(64);
            while (sent < kCount) {
                while (sent - received >= kWindow) // (the socket buffer must not overflow)
                    co_await yield_now();
                const std::uint32_t n = std::min<std::uint32_t>(64, kCount - sent);
                std::vector<OutDatagram> out;
                for (std::uint32_t i = 0; i < n; ++i) {
                    const std::uint32_t seq = sent + i;
                    msgs[i].fill(static_cast<char>(seq));
                    std::memcpy(msgs[i].data(), &seq, sizeof seq);
                    out.emplace_back(msgs[i]);
                }
                auto r = co_await client->send_batch(out);
                if (!r) {
                    CO_ASSERT(r.error() == std::errc::no_buffer_space);
                    ++send_errors;
                    continue;
                }
                CO_ASSERT(*r > 0 && *r <= n);
                sent += static_cast<std::uint32_t>(*r);
            }
        };
        auto receiver = [&]() -> Task<void> {
            std::vector<std::array<char, 128>> storage(64);
            std::vector<Datagram> in;
            for (auto& b : storage)
                in.emplace_back(b);
            while (received < kCount) {
                auto r = co_await server->recv_batch(in).timeout(10s);
                if (!r) {
                    CO_ASSERT(r.error() == std::errc::no_buffer_space);
                    ++recv_errors;
                    continue;
                }
                for (std::size_t i = 0; i < *r; ++i) {
                    CO_ASSERT(in[i].size == 100);
                    std::uint32_t seq;
                    std::memcpy(&seq, in[i].buffer.data(), sizeof seq);
                    CO_ASSERT(seq == received); // exactly once, in order
                    ++received;
                }
            }
        };
        co_await when_all(sender(), receiver());
        EXPECT_EQ(received, kCount);
    }());
    const faults::Counts n = faults::counts();
    EXPECT_GT(n.interrupted, 0u);
    EXPECT_GT(n.would_block, 0u);
    EXPECT_GT(n.short_transfer, 0u);
    EXPECT_GT(send_errors, 0);
    EXPECT_GT(recv_errors, 0);
}

GALAY_INSTANTIATE_BACKENDS(FaultTest);
GALAY_INSTANTIATE_BACKENDS(StreamErrorTest);
