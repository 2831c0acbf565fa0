// UDP end to end, on every backend: real sockets on loopback ephemeral ports. Also the loss
// accounting bench_udp uses (bench/programs/common/udp_echo), against a server that drops
// datagrams.
#include "support/backends.hpp"

#include "common/udp_echo.hpp"

#include <netinet/udp.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

UdpSocket bind_loopback(UdpOptions opts = {}) {
    auto s = UdpSocket::bind(SocketAddr::loopback_v4(0), opts);
    if (!s) throw Error(s.error(), "bind");
    return std::move(*s);
}

SocketAddr addr_of(const UdpSocket& s) {
    auto a = s.local_addr();
    if (!a) throw Error(a.error(), "getsockname");
    return *a;
}

/// A client socket connected to `to`.
UdpSocket connected_to(const SocketAddr& to) {
    auto s = UdpSocket::open(to.family());
    if (!s) throw Error(s.error(), "socket");
    if (auto r = s->connect(to); !r) throw Error(r.error(), "connect");
    return std::move(*s);
}

/// Deterministic bytes for datagram `seq`.
void fill(std::span<char> buf, std::uint32_t seq) {
    std::uint64_t x = (seq + 1) * 0x9E3779B97F4A7C15ull;
    for (char& c : buf) {
        x ^= x >> 29;
        x *= 0xBF58476D1CE4E5B9ull;
        c = static_cast<char>(x >> 56);
    }
}

std::vector<char> pattern(std::size_t size, std::uint32_t seq) {
    std::vector<char> v(size);
    fill(v, seq);
    return v;
}

/// Echo `count` datagrams with recv_from/send_to.
Task<void> echo_n(UdpSocket& s, int count) {
    std::array<char, 2048> buf;
    for (int i = 0; i < count; ++i) {
        SocketAddr from;
        auto r = co_await s.recv_from(buf, &from).timeout(10s);
        CO_ASSERT(r.has_value());
        CO_ASSERT(!r->truncated);
        auto w = co_await s.send_to(std::span(buf.data(), r->size), from);
        CO_ASSERT(w.has_value());
        CO_ASSERT(*w == r->size);
    }
}

} // namespace

class UdpTest : public test::BackendTest {};

TEST_P(UdpTest, EchoWithSendToRecvFromVerified) {
    static constexpr int kCount = 200;
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback();
        UdpSocket client = bind_loopback();
        const SocketAddr server_addr = addr_of(server);
        const SocketAddr client_addr = addr_of(client);
        auto talk = [&]() -> Task<void> {
            std::array<char, 2048> in;
            for (int i = 0; i < kCount; ++i) {
                const auto out = pattern(1 + (i * 37) % 1400, i);
                auto w = co_await client.send_to(out, server_addr);
                CO_ASSERT(w && *w == out.size());
                SocketAddr from;
                auto r = co_await client.recv_from(in, &from).timeout(10s);
                CO_ASSERT(r.has_value());
                EXPECT_EQ(from, server_addr);
                EXPECT_EQ(r->size, out.size());
                EXPECT_EQ(r->datagram_size, out.size());
                EXPECT_FALSE(r->truncated);
                CO_ASSERT(std::memcmp(in.data(), out.data(), out.size()) == 0);
            }
        };
        auto serve = [&]() -> Task<void> {
            std::array<char, 2048> buf;
            for (int i = 0; i < kCount; ++i) {
                SocketAddr from;
                auto r = co_await server.recv_from(buf, &from).timeout(10s);
                CO_ASSERT(r.has_value());
                EXPECT_EQ(from, client_addr);
                CO_ASSERT(co_await server.send_to(std::span(buf.data(), r->size), from));
            }
        };
        co_await when_all(talk(), serve());
    }());
}

TEST_P(UdpTest, ConnectedSendRecvEcho) {
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback();
        UdpSocket client = connected_to(addr_of(server));
        auto talk = [&]() -> Task<void> {
            std::array<char, 512> in;
            for (std::uint32_t i = 0; i < 100; ++i) {
                const auto out = pattern(300, i);
                CO_ASSERT(co_await client.send(out));
                auto r = co_await client.recv(in).timeout(10s);
                CO_ASSERT(r && r->size == 300 && !r->truncated);
                CO_ASSERT(std::memcmp(in.data(), out.data(), 300) == 0);
            }
        };
        co_await when_all(talk(), echo_n(server, 100));
        EXPECT_EQ(*client.peer_addr(), addr_of(server));
    }());
}

TEST_P(UdpTest, BatchReceiveOfABurstInOrder) {
    static constexpr std::uint32_t kBurst = 32;
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback();
        UdpSocket client = connected_to(addr_of(server));
        // The whole burst leaves in one send_batch (one sendmmsg).
        std::vector<std::vector<char>> msgs;
        std::vector<OutDatagram> out;
        for (std::uint32_t i = 0; i < kBurst; ++i)
            msgs.push_back(pattern(100 + i * 10, i));
        for (auto& m : msgs)
            out.emplace_back(m);
        auto sent = co_await client.send_batch(out);
        CO_ASSERT(sent.has_value());
        EXPECT_EQ(*sent, kBurst);

        std::vector<std::array<char, 1024>> storage(kBurst);
        std::vector<Datagram> in;
        for (auto& b : storage)
            in.emplace_back(b);
        std::uint32_t got = 0;
        std::size_t first_batch = 0;
        const SocketAddr client_addr = addr_of(client);
        while (got < kBurst) {
            auto n = co_await server.recv_batch(std::span(in).first(kBurst - got)).timeout(10s);
            CO_ASSERT(n.has_value());
            CO_ASSERT(*n > 0);
            if (first_batch == 0) first_batch = *n;
            for (std::size_t i = 0; i < *n; ++i, ++got) {
                const Datagram& d = in[i];
                EXPECT_FALSE(d.truncated);
                EXPECT_EQ(d.from, client_addr);
                CO_ASSERT(d.size == msgs[got].size()); // in order: datagram `got` is next
                CO_ASSERT(std::memcmp(d.buffer.data(), msgs[got].data(), d.size) == 0);
            }
        }
        // Loopback delivers during sendmmsg, so one recvmmsg normally takes the whole burst; at
        // the very least it must take more than one datagram, or the batch API is not batching.
        EXPECT_GT(first_batch, 1u);
        EXPECT_EQ(got, kBurst);
    }());
}

TEST_P(UdpTest, BatchLargerThanMaxIsServedInPartsAndEchoedBack) {
    static constexpr std::size_t kCount = 150; // more than UdpSocket::max_batch (64)
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback({.recv_buffer_size = 1 << 20});
        UdpSocket client = connected_to(addr_of(server));
        (void)client.set_recv_buffer_size(1 << 20);
        std::vector<std::vector<char>> msgs;
        std::vector<OutDatagram> out;
        for (std::uint32_t i = 0; i < kCount; ++i)
            msgs.push_back(pattern(64, i));
        for (auto& m : msgs)
            out.emplace_back(m);
        std::size_t sent = 0;
        while (sent < kCount) {
            auto n = co_await client.send_batch(std::span(out).subspan(sent));
            CO_ASSERT(n && *n > 0 && *n <= UdpSocket::max_batch);
            sent += *n;
        }
        // The server echoes in batches: recv_batch of 200 slots, send_batch back to the senders.
        std::vector<std::array<char, 128>> storage(200);
        std::vector<Datagram> in;
        for (auto& b : storage)
            in.emplace_back(b);
        std::size_t echoed = 0;
        while (echoed < kCount) {
            auto n = co_await server.recv_batch(in).timeout(10s);
            CO_ASSERT(n && *n <= UdpSocket::max_batch);
            std::vector<OutDatagram> back;
            for (std::size_t i = 0; i < *n; ++i)
                back.emplace_back(in[i].data(), &in[i].from);
            auto w = co_await server.send_batch(back);
            CO_ASSERT(w && *w == *n);
            echoed += *n;
        }
        std::array<char, 128> buf;
        for (std::uint32_t i = 0; i < kCount; ++i) {
            auto r = co_await client.recv(buf).timeout(10s);
            CO_ASSERT(r && r->size == 64);
            CO_ASSERT(std::memcmp(buf.data(), msgs[i].data(), 64) == 0);
        }
    }());
}

TEST_P(UdpTest, TruncationIsReportedWithTheRealLength) {
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback();
        UdpSocket client = connected_to(addr_of(server));
        const auto big = pattern(1000, 7);
        const auto next = pattern(50, 8);
        CO_ASSERT(co_await client.send(big));
        CO_ASSERT(co_await client.send(next));
        std::array<char, 100> small;
        SocketAddr from;
        auto r = co_await server.recv_from(small, &from).timeout(10s);
        CO_ASSERT(r.has_value());
        EXPECT_TRUE(r->truncated);
        EXPECT_EQ(r->size, 100u);
        EXPECT_EQ(r->datagram_size, 1000u);
        EXPECT_EQ(std::memcmp(small.data(), big.data(), 100), 0);
        // The rest of the truncated datagram is gone; the next one arrives whole.
        auto r2 = co_await server.recv_from(small, &from).timeout(10s);
        CO_ASSERT(r2.has_value());
        EXPECT_FALSE(r2->truncated);
        EXPECT_EQ(r2->size, 50u);
        EXPECT_EQ(std::memcmp(small.data(), next.data(), 50), 0);

        // The same through recv_batch: a small slot next to a large one.
        CO_ASSERT(co_await client.send(big));
        CO_ASSERT(co_await client.send(big));
        std::array<char, 10> tiny;
        std::array<char, 2000> roomy;
        std::array<Datagram, 2> in{Datagram(tiny), Datagram(roomy)};
        std::size_t got = 0;
        while (got < 2) {
            auto n = co_await server.recv_batch(std::span(in).subspan(got)).timeout(10s);
            CO_ASSERT(n && *n > 0);
            got += *n;
        }
        EXPECT_TRUE(in[0].truncated);
        EXPECT_EQ(in[0].size, 10u);
        EXPECT_EQ(in[0].datagram_size, 1000u);
        EXPECT_FALSE(in[1].truncated);
        EXPECT_EQ(in[1].size, 1000u);
        EXPECT_EQ(std::memcmp(roomy.data(), big.data(), 1000), 0);
    }());
}

TEST_P(UdpTest, ReceiveTimesOutAndALaterDatagramStillArrives) {
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback();
        UdpSocket client = connected_to(addr_of(server));
        std::array<char, 64> buf;
        SocketAddr from;
        auto r = co_await server.recv_from(buf, &from).timeout(20ms);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();

        std::array<std::array<char, 64>, 4> storage;
        std::array<Datagram, 4> in{Datagram(storage[0]), Datagram(storage[1]), Datagram(storage[2]),
                                   Datagram(storage[3])};
        auto b = co_await server.recv_batch(in).timeout(20ms);
        CO_ASSERT(!b);
        EXPECT_EQ(b.error(), std::errc::timed_out) << b.error().message();

        // Neither timed-out receive left anything behind that swallows the next datagram.
        const auto msg = pattern(40, 1);
        CO_ASSERT(co_await client.send(msg));
        auto r2 = co_await server.recv_from(buf, &from).timeout(10s);
        CO_ASSERT(r2 && r2->size == 40);
        EXPECT_EQ(std::memcmp(buf.data(), msg.data(), 40), 0);
        CO_ASSERT(co_await client.send(msg));
        auto b2 = co_await server.recv_batch(in).timeout(10s);
        CO_ASSERT(b2 && *b2 == 1 && in[0].size == 40);
    }());
}

TEST_P(UdpTest, PendingBatchReceiveIsCancelledByWhenAny) {
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback();
        std::array<char, 64> storage;
        std::array<Datagram, 1> in{Datagram(storage)};
        auto r = co_await when_any(as_task(server.recv_batch(in)), sleep(10ms));
        EXPECT_EQ(r.index(), 1u);
    }());
}

TEST_P(UdpTest, Ipv6EchoAndSourceAddress) {
    auto probe = UdpSocket::bind(SocketAddr::loopback_v6(0));
    if (!probe) GTEST_SKIP() << "SKIP: no IPv6 loopback (::1): " << probe.error().message();
    run([]() -> Task<void> {
        auto s = UdpSocket::bind(SocketAddr::loopback_v6(0));
        CO_ASSERT(s.has_value());
        UdpSocket server = std::move(*s);
        UdpSocket client = connected_to(addr_of(server));
        EXPECT_EQ(client.family(), AF_INET6);
        const auto msg = pattern(700, 3);
        CO_ASSERT(co_await client.send(msg));
        std::array<char, 1024> buf;
        SocketAddr from;
        auto r = co_await server.recv_from(buf, &from).timeout(10s);
        CO_ASSERT(r && r->size == 700);
        EXPECT_TRUE(from.is_v6());
        EXPECT_EQ(from, addr_of(client));
        EXPECT_EQ(from.ip(), "::1");
        CO_ASSERT(co_await server.send_to(std::span(buf.data(), r->size), from));
        auto back = co_await client.recv(buf).timeout(10s);
        CO_ASSERT(back && back->size == 700);
        EXPECT_EQ(std::memcmp(buf.data(), msg.data(), 700), 0);

        // A batch over IPv6 (one UDP_SEGMENT run where the kernel has it), back in order.
        std::vector<char> all = pattern(8 * 120, 4);
        std::vector<OutDatagram> out;
        for (std::size_t i = 0; i < 8; ++i)
            out.emplace_back(std::span(all).subspan(i * 120, 120));
        auto sent = co_await client.send_batch(out);
        CO_ASSERT(sent && *sent == 8);
        std::vector<std::array<char, 256>> storage(8);
        std::vector<Datagram> in;
        for (auto& b : storage)
            in.emplace_back(b);
        std::size_t got = 0;
        while (got < 8) {
            auto n = co_await server.recv_batch(std::span(in).first(8 - got)).timeout(10s);
            CO_ASSERT(n && *n > 0);
            for (std::size_t i = 0; i < *n; ++i, ++got) {
                EXPECT_EQ(in[i].from, addr_of(client));
                CO_ASSERT(in[i].size == 120);
                CO_ASSERT(std::memcmp(storage[i].data(), all.data() + got * 120, 120) == 0);
            }
        }
    }());
}

TEST_P(UdpTest, LocalAddressOfEachDatagramIsReported) {
    run([]() -> Task<void> {
        auto s = UdpSocket::bind(SocketAddr::any_v4(0), {.local_address = true});
        CO_ASSERT(s.has_value());
        UdpSocket server = std::move(*s);
        const std::uint16_t port = addr_of(server).port();
        UdpSocket client = connected_to(SocketAddr::loopback_v4(port));
        std::array<char, 16> buf{};
        CO_ASSERT(co_await client.send(buf));
        SocketAddr from, local;
        auto r = co_await server.recv_from(buf, &from, &local).timeout(10s);
        CO_ASSERT(r.has_value());
        EXPECT_EQ(local, SocketAddr::loopback_v4(port)) << local.to_string();

        CO_ASSERT(co_await client.send(buf));
        std::array<Datagram, 1> in{Datagram(buf)};
        auto n = co_await server.recv_batch(in).timeout(10s);
        CO_ASSERT(n && *n == 1);
        EXPECT_EQ(in[0].local, SocketAddr::loopback_v4(port)) << in[0].local.to_string();
    }());
}

TEST_P(UdpTest, BadAddressesAreErrors) {
    EXPECT_FALSE(SocketAddr::parse("not-an-address:53"));
    EXPECT_FALSE(SocketAddr::parse("127.0.0.1"));
    EXPECT_EQ(UdpSocket::bind(SocketAddr{}).error(), std::errc::address_family_not_supported);
    run([]() -> Task<void> {
        UdpSocket v4 = bind_loopback();
        std::array<char, 8> buf{};
        // Unspecified: must not silently mean "the connected peer".
        auto a = co_await v4.send_to(buf, SocketAddr{});
        CO_ASSERT(!a);
        EXPECT_EQ(a.error(), std::errc::address_family_not_supported) << a.error().message();
        // An IPv6 destination for an IPv4 socket.
        auto b = co_await v4.send_to(buf, SocketAddr::loopback_v6(9));
        CO_ASSERT(!b);
        EXPECT_EQ(b.error(), std::errc::address_family_not_supported) << b.error().message();
        EXPECT_FALSE(v4.connect(SocketAddr{}));
        EXPECT_FALSE(v4.connect(SocketAddr::loopback_v6(9)));
        // No peer: send() has nowhere to go.
        auto c = co_await v4.send(buf);
        CO_ASSERT(!c);
        EXPECT_EQ(c.error(), std::errc::destination_address_required) << c.error().message();

        // In a batch, the datagrams before the bad address are sent and counted; the next call
        // starts at the bad one and fails.
        UdpSocket sink = bind_loopback();
        const SocketAddr good = addr_of(sink);
        const SocketAddr bad{};
        std::array<OutDatagram, 4> out{OutDatagram(buf, &good), OutDatagram(buf, &good),
                                       OutDatagram(buf, &bad), OutDatagram(buf, &good)};
        auto n = co_await v4.send_batch(out);
        CO_ASSERT(n.has_value());
        EXPECT_EQ(*n, 2u);
        auto m = co_await v4.send_batch(std::span(out).subspan(2));
        CO_ASSERT(!m);
        EXPECT_EQ(m.error(), std::errc::address_family_not_supported);
    }());
}

TEST_P(UdpTest, ConnectedSocketSeesRefusalWhenNobodyListens) {
    run([]() -> Task<void> {
        SocketAddr gone;
        {
            UdpSocket tmp = bind_loopback();
            gone = addr_of(tmp);
        } // closed: the port now answers with ICMP port unreachable
        UdpSocket client = connected_to(gone);
        std::array<char, 8> buf{};
        CO_ASSERT(co_await client.send(buf));
        auto r = co_await client.recv(buf).timeout(10s);
        CO_ASSERT(!r);
        EXPECT_EQ(r.error(), std::errc::connection_refused) << r.error().message();
    }());
}

/// Skip loudly when the kernel lacks UDP_SEGMENT / UDP_GRO (Linux < 4.18 / 5.0), or the build
/// does not use them (the POSIX profile).
#define REQUIRE_OFFLOADS(sender, receiver)                                                         \
    do {                                                                                           \
        if (!GALAY_HAVE_MMSG)                                                                      \
            throw std::runtime_error(                                                              \
                "SKIP: UDP_SEGMENT/UDP_GRO: Linux-only, not in the POSIX profile");                \
        if (!(sender).segmentation_offload() || !(receiver).receive_offload())                     \
            throw std::runtime_error("SKIP: the kernel lacks UDP_SEGMENT or UDP_GRO");             \
    } while (0)

bool skipped(const std::runtime_error& e) {
    return std::string(e.what()).starts_with("SKIP");
}

TEST_P(UdpTest, CoalescedRunsArriveAsSeparateDatagramsInOrder) {
    static constexpr std::uint32_t kCount = 41; // 40 of 300 bytes, then a shorter one
    try {
        run([]() -> Task<void> {
            UdpSocket server = bind_loopback();
            UdpSocket client = connected_to(addr_of(server));
            REQUIRE_OFFLOADS(client, server);
            std::vector<std::vector<char>> msgs;
            for (std::uint32_t i = 0; i < kCount; ++i)
                msgs.push_back(pattern(i + 1 < kCount ? 300 : 100, i));
            std::vector<OutDatagram> out;
            for (auto& m : msgs)
                out.emplace_back(m);
            auto sent = co_await client.send_batch(out); // one UDP_SEGMENT message
            CO_ASSERT(sent && *sent == kCount);
            EXPECT_TRUE(client.segmentation_offload());

            std::vector<std::array<char, 512>> storage(UdpSocket::max_batch);
            std::vector<Datagram> in;
            for (auto& b : storage)
                in.emplace_back(b);
            const SocketAddr from = addr_of(client);
            std::uint32_t got = 0;
            while (got < kCount) {
                auto n = co_await server.recv_batch(in).timeout(10s);
                CO_ASSERT(n && *n > 0);
                for (std::size_t i = 0; i < *n; ++i, ++got) {
                    EXPECT_EQ(in[i].from, from);
                    EXPECT_FALSE(in[i].truncated);
                    CO_ASSERT(in[i].size == msgs[got].size());
                    CO_ASSERT(std::memcmp(storage[i].data(), msgs[got].data(), in[i].size) == 0);
                }
            }
        }());
    } catch (const std::runtime_error& e) {
        if (!skipped(e)) throw;
        GTEST_SKIP() << e.what();
    }
}

TEST_P(UdpTest, BackToBackMessagesInOneBufferArriveSeparately) {
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback();
        UdpSocket client = connected_to(addr_of(server));
        // 12 of 100 bytes back to back, then 3 of 100 elsewhere, then 2 more back to back: runs
        // with merged and unmerged iovecs.
        std::vector<char> a = pattern(1400, 1), b = pattern(300, 2);
        std::vector<std::span<const char>> parts;
        for (std::size_t i = 0; i < 12; ++i)
            parts.push_back(std::span(a).subspan(i * 100, 100));
        for (std::size_t i = 0; i < 3; ++i)
            parts.push_back(std::span(b).subspan(i * 100, 100));
        for (std::size_t i = 12; i < 14; ++i)
            parts.push_back(std::span(a).subspan(i * 100, 100));
        std::vector<OutDatagram> out;
        for (auto p : parts)
            out.emplace_back(p);
        auto sent = co_await client.send_batch(out);
        CO_ASSERT(sent && *sent == parts.size());
        std::array<char, 200> buf;
        for (auto p : parts) {
            auto r = co_await server.recv(buf).timeout(10s);
            CO_ASSERT(r && r->size == 100);
            CO_ASSERT(std::memcmp(buf.data(), p.data(), 100) == 0);
        }
    }());
}

TEST_P(UdpTest, LeftoversOfACoalescedReceiveGoToTheNextReceivesInOrder) {
    static constexpr std::uint32_t kCount = 20;
    try {
        run([]() -> Task<void> {
            UdpSocket server = bind_loopback({.local_address = true});
            UdpSocket client = connected_to(addr_of(server));
            REQUIRE_OFFLOADS(client, server);
            std::vector<std::vector<char>> msgs;
            for (std::uint32_t i = 0; i < kCount; ++i)
                msgs.push_back(pattern(200, 100 + i));
            std::vector<OutDatagram> out;
            for (auto& m : msgs)
                out.emplace_back(m);
            CO_ASSERT(co_await client.send_batch(out));

            // Three slots, then a single recv_from with a buffer too small, then the rest.
            std::array<std::array<char, 256>, 3> three;
            std::array<Datagram, 3> in{Datagram(three[0]), Datagram(three[1]), Datagram(three[2])};
            std::uint32_t got = 0;
            auto n = co_await server.recv_batch(in).timeout(10s);
            CO_ASSERT(n && *n >= 1);
            for (std::size_t i = 0; i < *n; ++i, ++got) {
                CO_ASSERT(in[i].size == 200);
                CO_ASSERT(std::memcmp(three[i].data(), msgs[got].data(), 200) == 0);
                EXPECT_EQ(in[i].local, addr_of(server));
            }
            std::array<char, 50> small;
            SocketAddr from, local;
            auto r = co_await server.recv_from(small, &from, &local).timeout(10s);
            CO_ASSERT(r.has_value());
            EXPECT_TRUE(r->truncated);
            EXPECT_EQ(r->size, 50u);
            EXPECT_EQ(r->datagram_size, 200u);
            EXPECT_EQ(from, addr_of(client));
            EXPECT_EQ(local, addr_of(server));
            CO_ASSERT(std::memcmp(small.data(), msgs[got].data(), 50) == 0);
            ++got;
            std::array<char, 256> one;
            while (got < kCount) {
                auto d = co_await server.recv(one).timeout(10s);
                CO_ASSERT(d && d->size == 200);
                CO_ASSERT(std::memcmp(one.data(), msgs[got].data(), 200) == 0);
                ++got;
            }
            // Nothing is left over: the next receive waits for the kernel and times out.
            auto none = co_await server.recv(one).timeout(20ms);
            CO_ASSERT(!none);
            EXPECT_EQ(none.error(), std::errc::timed_out);
        }());
    } catch (const std::runtime_error& e) {
        if (!skipped(e)) throw;
        GTEST_SKIP() << e.what();
    }
}

TEST_P(UdpTest, ABatchDoesNotSplitASendersRunWhenTheNextCallCanTakeItWhole) {
    try {
        run([]() -> Task<void> {
            UdpSocket server = bind_loopback();
            UdpSocket a = connected_to(addr_of(server));
            UdpSocket b = connected_to(addr_of(server));
            REQUIRE_OFFLOADS(a, server);
            std::vector<char> pa = pattern(5 * 100, 1), pb = pattern(5 * 100, 2);
            std::vector<OutDatagram> outa, outb;
            for (std::size_t i = 0; i < 5; ++i) {
                outa.emplace_back(std::span(pa).subspan(i * 100, 100));
                outb.emplace_back(std::span(pb).subspan(i * 100, 100));
            }
            CO_ASSERT(co_await a.send_batch(outa)); // one run of 5 from a
            CO_ASSERT(co_await b.send_batch(outb)); // then one of 5 from b
            std::vector<std::array<char, 128>> storage(8);
            std::vector<Datagram> in;
            for (auto& s : storage)
                in.emplace_back(s);
            // 8 slots: all of a's run, and not 3 of b's (those would leave as a second send).
            auto n = co_await server.recv_batch(in).timeout(10s);
            CO_ASSERT(n.has_value());
            EXPECT_EQ(*n, 5u);
            for (std::size_t i = 0; i < *n; ++i)
                EXPECT_EQ(in[i].from, addr_of(a));
            auto m = co_await server.recv_batch(in).timeout(10s);
            CO_ASSERT(m.has_value());
            EXPECT_EQ(*m, 5u);
            for (std::size_t i = 0; i < *m; ++i) {
                EXPECT_EQ(in[i].from, addr_of(b));
                EXPECT_EQ(std::memcmp(storage[i].data(), pb.data() + i * 100, 100), 0);
            }
        }());
    } catch (const std::runtime_error& e) {
        if (!skipped(e)) throw;
        GTEST_SKIP() << e.what();
    }
}

TEST_P(UdpTest, SegmentationFallsBackWhenTheKernelRefusesIt) {
    GALAY_SKIP_UNLESS(GALAY_HAVE_MMSG, "UDP_SEGMENT");
    run([]() -> Task<void> {
        UdpSocket server = bind_loopback();
        UdpSocket client = connected_to(addr_of(server));
        if (!client.segmentation_offload()) {
            ADD_FAILURE() << "SKIP: the kernel lacks UDP_SEGMENT";
            co_return;
        }
        // SO_NO_CHECK makes the kernel refuse UDP_SEGMENT sends (EINVAL).
        int one = 1;
        CO_ASSERT(::setsockopt(client.fd(), SOL_SOCKET, SO_NO_CHECK, &one, sizeof one) == 0);
        // Back to back in one buffer: prepare() merges them into one iovec, which the fallback
        // has to undo.
        std::vector<char> all = pattern(10 * 128, 200);
        std::vector<OutDatagram> out;
        for (std::uint32_t i = 0; i < 10; ++i)
            out.emplace_back(std::span(all).subspan(i * 128, 128));
        auto sent = co_await client.send_batch(out);
        CO_ASSERT(sent.has_value());
        EXPECT_EQ(*sent, 10u);
        EXPECT_FALSE(client.segmentation_offload()); // plain sends from now on
        std::array<char, 256> buf;
        for (std::uint32_t i = 0; i < 10; ++i) {
            auto r = co_await server.recv(buf).timeout(10s);
            CO_ASSERT(r && r->size == 128);
            CO_ASSERT(std::memcmp(buf.data(), all.data() + i * 128, 128) == 0);
        }
    }());
}

TEST_P(UdpTest, EchoWithoutOffloadsToo) {
    run([]() -> Task<void> {
        const UdpOptions plain{.segmentation_offload = false, .receive_offload = false};
        auto s = UdpSocket::bind(SocketAddr::loopback_v4(0), plain);
        CO_ASSERT(s.has_value());
        UdpSocket server = std::move(*s);
        auto c = UdpSocket::open(AF_INET, plain);
        CO_ASSERT(c && c->connect(addr_of(server)));
        UdpSocket client = std::move(*c);
        EXPECT_FALSE(server.receive_offload());
        EXPECT_FALSE(client.segmentation_offload());
        std::vector<std::vector<char>> msgs;
        for (std::uint32_t i = 0; i < 16; ++i)
            msgs.push_back(pattern(256, 300 + i));
        std::vector<OutDatagram> out;
        for (auto& m : msgs)
            out.emplace_back(m);
        CO_ASSERT(co_await client.send_batch(out));
        std::vector<std::array<char, 512>> storage(16);
        std::vector<Datagram> in;
        for (auto& b : storage)
            in.emplace_back(b);
        std::uint32_t got = 0;
        while (got < 16) {
            auto n = co_await server.recv_batch(std::span(in).first(16 - got)).timeout(10s);
            CO_ASSERT(n && *n > 0);
            for (std::size_t i = 0; i < *n; ++i, ++got)
                CO_ASSERT(in[i].size == 256 &&
                          std::memcmp(storage[i].data(), msgs[got].data(), 256) == 0);
        }
    }());
}

/// A server that echoes like bench_udp's but deliberately drops every 10th datagram it receives.
Task<void> dropping_server(UdpSocket& s, std::uint64_t& received, std::uint64_t& dropped) {
    std::vector<std::array<char, 512>> storage(UdpSocket::max_batch);
    std::vector<Datagram> in;
    for (auto& b : storage)
        in.emplace_back(b);
    for (;;) {
        auto n = co_await s.recv_batch(in);
        if (!n) co_return; // cancelled: the test is over
        std::vector<OutDatagram> back;
        for (std::size_t i = 0; i < *n; ++i)
            if (++received % 10 == 0)
                ++dropped;
            else
                back.emplace_back(in[i].data(), &in[i].from);
        for (std::size_t done = 0; done < back.size();) {
            auto w = co_await s.send_batch(std::span(back).subspan(done));
            if (!w) co_return;
            done += *w;
        }
    }
}

TEST_P(UdpTest, LossAccountingReportsExactlyTheDroppedTenPercent) {
    constexpr unsigned kClients = 10, kMessages = 100;
    auto [report, received, dropped] =
        run([]() -> Task<std::tuple<tools::udp::ClientReport, std::uint64_t, std::uint64_t>> {
            UdpSocket server = bind_loopback({.recv_buffer_size = 1 << 20});
            std::uint64_t received = 0, dropped = 0;
            tools::udp::ClientConfig cfg;
            cfg.server = addr_of(server);
            cfg.clients = kClients;
            cfg.messages = kMessages;
            cfg.size = 64;
            cfg.pipeline = 4;
            cfg.stall_timeout = 20ms; // a window full of dropped datagrams is given up quickly
            cfg.drain_timeout = 2s;   // generous: an echo later than this would count as lost
            CancelSource stop;
            auto clients = [&]() -> Task<tools::udp::ClientReport> {
                auto r = co_await tools::udp::run_echo_clients(cfg);
                stop.cancel();
                co_return r;
            };
            auto [rep, _] = co_await when_all(
                clients(), with_cancel(stop, dropping_server(server, received, dropped)));
            co_return std::tuple{rep, received, dropped};
        }());
    EXPECT_EQ(report.io_errors, 0u);
    EXPECT_EQ(report.wrong_payload, 0u);
    EXPECT_EQ(report.counts.sent, kClients * kMessages);
    EXPECT_EQ(received, kClients * kMessages); // loopback itself lost nothing
    EXPECT_EQ(dropped, kClients * kMessages / 10);
    EXPECT_EQ(report.counts.lost(), dropped);
    EXPECT_EQ(report.counts.duplicates, 0u);
    EXPECT_DOUBLE_EQ(report.counts.loss_percent(), 10.0);
}

// bind_group: N sockets share one port with SO_REUSEPORT, every datagram reaches exactly one of
// them, and nobody else gets into the group with a plain bind or a second group.
TEST_P(UdpTest, BindGroupSharesAPortAmongItsOwnSockets) {
    run([]() -> Task<void> {
        auto group = UdpSocket::bind_group(SocketAddr::loopback_v4(0), 3);
        CO_ASSERT(group.has_value());
        CO_ASSERT(group->size() == 3);
        const SocketAddr at = addr_of((*group)[0]);
        CO_ASSERT(at.port() != 0);
        for (const UdpSocket& s : *group)
            CO_ASSERT(addr_of(s) == at);
        // 64 senders (64 source ports, so the kernel's hash spreads them), one datagram each.
        // Loopback delivers during the send, so afterwards every datagram waits in some queue.
        for (int i = 0; i < 64; ++i) {
            UdpSocket c = connected_to(at);
            auto sent = co_await c.send(std::string_view("x"));
            CO_ASSERT(sent.has_value());
        }
        std::size_t received = 0;
        for (UdpSocket& s : *group) {
            for (;;) {
                std::array<char, 16> buf;
                auto r = co_await s.recv_from(buf, nullptr).timeout(5ms);
                if (!r) {
                    CO_ASSERT(r.error() == std::errc::timed_out);
                    break;
                }
                ++received;
            }
        }
        EXPECT_EQ(received, 64u);
        auto plain = UdpSocket::bind(at);
        CO_ASSERT(!plain);
        EXPECT_EQ(plain.error(), std::errc::address_in_use);
        auto second = UdpSocket::bind_group(at, 2);
        CO_ASSERT(!second);
        EXPECT_EQ(second.error(), std::errc::address_in_use);
    }());
}

// A socket another process left on the port with SO_REUSEPORT (same user) would silently share
// it with a new server's sockets, so bind_group refuses the port.
TEST_P(UdpTest, BindGroupRefusesAPortAnotherSocketHoldsEvenWithReusePort) {
    auto leftover = UdpSocket::bind(SocketAddr::loopback_v4(0), {.reuse_port = true});
    ASSERT_TRUE(leftover.has_value());
    const SocketAddr at = addr_of(*leftover);
    auto group = UdpSocket::bind_group(at, 2);
    ASSERT_FALSE(group.has_value());
    EXPECT_EQ(group.error(), std::errc::address_in_use);
    // The wildcard address overlaps it too.
    auto wide = UdpSocket::bind_group(SocketAddr::any_v4(at.port()), 2);
    ASSERT_FALSE(wide.has_value());
    EXPECT_EQ(wide.error(), std::errc::address_in_use);
    EXPECT_FALSE(UdpSocket::bind_group(SocketAddr::loopback_v4(0), 0)); // no sockets: EINVAL
}

GALAY_INSTANTIATE_BACKENDS(UdpTest);

// --- the accounting unit on its own ------------------------------------------------------------

TEST(UdpLossLedger, CountsFreshLateDuplicateAndBogusEchoes) {
    tools::udp::LossLedger l;
    for (int i = 0; i < 5; ++i)
        EXPECT_EQ(l.send(), std::uint64_t(i));
    EXPECT_EQ(l.in_flight(), 5u);
    using E = tools::udp::LossLedger::Echo;
    EXPECT_EQ(l.echo(1), E::fresh);
    EXPECT_EQ(l.echo(1), E::duplicate);
    EXPECT_EQ(l.echo(9), E::never_sent);
    l.give_up_in_flight(); // 0, 2, 3, 4 given up: the window is free again
    EXPECT_EQ(l.in_flight(), 0u);
    EXPECT_EQ(l.echo(3), E::late); // still counts as received
    EXPECT_EQ(l.send(), 5u);
    EXPECT_EQ(l.echo(5), E::fresh);
    const auto c = l.counts();
    EXPECT_EQ(c.sent, 6u);
    EXPECT_EQ(c.received, 3u);
    EXPECT_EQ(c.duplicates, 1u);
    EXPECT_EQ(c.lost(), 3u);
    EXPECT_DOUBLE_EQ(c.loss_percent(), 50.0);
}

TEST(UdpEchoMessage, StampAndCheckCatchCorruptionAndStrangers) {
    std::vector<std::byte> m(256);
    tools::udp::stamp(m, 7, 123456789);
    std::uint64_t seq = 0;
    using tools::udp::Check;
    EXPECT_EQ(tools::udp::check(m, 256, 7, &seq), Check::ok);
    EXPECT_EQ(seq, 123456789u);
    EXPECT_EQ(tools::udp::check(m, 256, 8, &seq), Check::wrong_client);
    EXPECT_EQ(tools::udp::check(std::span(m).first(255), 256, 7, &seq), Check::wrong_size);
    m[200] ^= std::byte{1};
    EXPECT_EQ(tools::udp::check(m, 256, 7, &seq), Check::corrupt);
    std::vector<std::byte> odd(21); // a tail shorter than a word is checked too
    tools::udp::stamp(odd, 1, 2);
    EXPECT_EQ(tools::udp::check(odd, 21, 1, &seq), Check::ok);
    odd[20] ^= std::byte{0x80};
    EXPECT_EQ(tools::udp::check(odd, 21, 1, &seq), Check::corrupt);
}
