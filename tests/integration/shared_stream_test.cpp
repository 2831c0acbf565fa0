// One task receiving while another sends on the same stream (both on the stream's worker): TCP
// with 4 MiB each way at once through an echo, UDP with a receiver and a sender on one socket.
// Bytes arrive whole and in order; neither direction waits for the other.
#include "support/backends.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

class SharedStreamTest : public test::BackendTest {};

constexpr std::size_t kBytes = 4 << 20;
constexpr int kDatagrams = 200;

std::uint8_t pattern(std::size_t i) {
    return static_cast<std::uint8_t>((i * 131 + 7) % 251);
}

} // namespace

TEST_P(SharedStreamTest, OneTaskReceivesWhileAnotherSendsOnTheSameTcpStream) {
    run([&]() -> Task<void> {
        auto listener = TcpListener::bind(SocketAddr::loopback_v4(0));
        CO_ASSERT(listener);
        auto addr = listener->local_addr();
        CO_ASSERT(addr);
        auto client = co_await TcpStream::connect(*addr).timeout(5s);
        CO_ASSERT(client);
        auto server = co_await listener->accept().timeout(5s);
        CO_ASSERT(server);
        // The peer echoes what it reads; its own recv and send are one task, so the echo only
        // keeps flowing if the client's two tasks really run at once (4 MiB exceeds the
        // socket buffers both ways).
        auto echo = [](TcpStream& s) -> Task<void> {
            std::array<char, 65536> buf;
            for (;;) {
                auto n = co_await s.recv(buf).timeout(20s);
                CO_ASSERT(n);
                if (*n == 0) co_return;
                auto sent = co_await s.send_all(std::span(buf.data(), *n)).timeout(20s);
                CO_ASSERT(sent);
            }
        };
        std::vector<char> out(kBytes);
        for (std::size_t i = 0; i < kBytes; ++i)
            out[i] = static_cast<char>(pattern(i));
        auto sender = [](TcpStream& s, std::vector<char>& out) -> Task<void> {
            auto sent = co_await s.send_all(out).timeout(20s);
            CO_ASSERT(sent);
            auto down = s.shutdown(); // the write side only: EOF to the peer
            CO_ASSERT(down);
        };
        auto receiver = [](TcpStream& s) -> Task<std::size_t> {
            std::vector<char> in(kBytes);
            auto got = co_await s.recv_exact(in).timeout(20s);
            CO_ASSERT(got);
            for (std::size_t i = 0; i < kBytes; ++i)
                if (static_cast<std::uint8_t>(in[i]) != pattern(i)) co_return i;
            co_return kBytes;
        };
        auto [a, b, matched] =
            co_await when_all(echo(*server), sender(*client, out), receiver(*client));
        EXPECT_EQ(matched, kBytes);
    }());
}

TEST_P(SharedStreamTest, OneTaskReceivesWhileAnotherSendsOnTheSameUdpSocket) {
    run([&]() -> Task<void> {
        auto a = UdpSocket::bind(SocketAddr::loopback_v4(0));
        auto b = UdpSocket::bind(SocketAddr::loopback_v4(0));
        CO_ASSERT(a && b);
        auto a_addr = a->local_addr();
        auto b_addr = b->local_addr();
        CO_ASSERT(a_addr && b_addr);
        // `b` reflects every datagram; `a` sends from one task and receives in another.
        auto reflector = [](UdpSocket& s) -> Task<void> {
            std::array<char, 64> buf;
            for (int i = 0; i < kDatagrams; ++i) {
                SocketAddr from;
                auto r = co_await s.recv_from(buf, &from).timeout(10s);
                CO_ASSERT(r);
                auto sent = co_await s.send_to(std::span(buf.data(), r->size), from);
                CO_ASSERT(sent);
            }
        };
        auto sender = [](UdpSocket& s, SocketAddr to) -> Task<void> {
            for (int i = 0; i < kDatagrams; ++i) {
                std::array<char, 4> msg{};
                std::memcpy(msg.data(), &i, sizeof i);
                auto sent = co_await s.send_to(msg, to);
                CO_ASSERT(sent);
                if (i % 16 == 15) co_await yield_now(); // (loopback drops what overflows)
            }
        };
        auto receiver = [](UdpSocket& s) -> Task<int> {
            std::array<char, 64> buf;
            int in_order = 0;
            for (int i = 0; i < kDatagrams; ++i) {
                SocketAddr from;
                auto r = co_await s.recv_from(buf, &from).timeout(10s);
                CO_ASSERT(r && r->size == 4);
                int v;
                std::memcpy(&v, buf.data(), sizeof v);
                if (v == i) ++in_order;
            }
            co_return in_order;
        };
        auto [x, y, got] = co_await when_all(reflector(*b), sender(*a, *b_addr), receiver(*a));
        EXPECT_EQ(got, kDatagrams);
    }());
}

GALAY_INSTANTIATE_BACKENDS(SharedStreamTest);
