// io::send_all_zc (IORING_OP_SEND_ZC, MSG_ZEROCOPY) on every backend, over real loopback sockets.
#include "support/backends.hpp"

#include "support/loopback_pair.hpp"

#include <array>
#include <string>

using namespace galay;
using namespace std::chrono_literals;

namespace {

Task<std::string> read_exactly(TcpStream& s, std::size_t n) {
    std::string out(n, '\0');
    auto r = co_await s.recv_exact(std::span(out)).timeout(20s);
    if (!r) throw Error(r.error(), "read_exactly");
    co_return out;
}

} // namespace

class ZeroCopyTest : public test::BackendTest {
protected:
    void SetUp() override {
        test::BackendTest::SetUp();
        if (IsSkipped()) return;
        GALAY_SKIP_UNLESS(GALAY_HAVE_LINUX_SOCKETS, "MSG_ZEROCOPY");
        bool available = false;
        run([](bool& out) -> Task<void> {
            out = io::zero_copy_send_available();
            co_return;
        }(available));
        if (!available)
            GTEST_SKIP() << "SKIP: zero-copy send unavailable on " << backend_name(GetParam())
                         << " here (it would be a plain send)";
    }
};

TEST_P(ZeroCopyTest, EveryByteArrivesAndNothingIsPendingAfter) {
    run([]() -> Task<void> {
        const std::string data = test::letters(4 << 20, 1);
        auto [client, server] = co_await test::loopback_pair();
        auto [sent, got] = co_await when_all(as_task(io::send_all_zc(server, data).timeout(20s)),
                                             read_exactly(client, data.size()));
        CO_ASSERT(sent);
        EXPECT_EQ(*sent, data.size());
        EXPECT_TRUE(got == data);
        EXPECT_EQ(test::ops_in_flight(), 0u);
    }());
}

// The proof that the buffer is held: with the peer's receive window full and the peer not
// reading, a plain send_all of the same bytes completes at once (they fit the socket's send
// buffer), while send_all_zc does not complete however many loop turns pass, because the kernel
// still reads the caller's pages for the bytes it has not delivered. Once the peer reads, the
// notification comes and the awaitable completes; then the buffer is overwritten, and what the
// peer received is still the original.
TEST_P(ZeroCopyTest, TheSendDoesNotCompleteBeforeTheKernelLetsGoOfTheBuffer) {
    run([]() -> Task<void> {
        constexpr std::size_t kSize = 128 << 10;
        std::string data = test::letters(kSize, 2);
        const std::string original = data;
        for (int zero_copy = 0; zero_copy < 2; ++zero_copy) {
            auto [client, server] = co_await test::loopback_pair();
            CO_ASSERT(server.set_send_buffer_size(1 << 20)); // (capped by wmem_max; enough)
            CO_ASSERT(client.set_recv_buffer_size(16 << 10));
            bool done = false;
            auto sender = [&]() -> Task<Result<std::size_t>> {
                auto r = zero_copy ? co_await io::send_all_zc(server, data).timeout(20s)
                                   : co_await server.send_all(data).timeout(20s);
                done = true;
                co_return r;
            };
            auto reader = [&]() -> Task<std::string> {
                for (int i = 0; i < 200 && !done; ++i)
                    co_await yield_now();
                EXPECT_EQ(done, !zero_copy) << (zero_copy ? "zero-copy" : "plain");
                co_return co_await read_exactly(client, kSize);
            };
            auto [sent, got] = co_await when_all(sender(), reader());
            CO_ASSERT(sent);
            EXPECT_EQ(*sent, kSize);
            data.assign(kSize, '#'); // free to change now
            EXPECT_TRUE(got == original);
            data = original;
        }
    }());
}

// A deadline that passes while the peer does not read: the bytes already out are the kernel's
// until it delivers them, so the send ends only once the peer reads (or the connection is
// reset), with timed_out or, if the notification won the race, its real result. The bytes the
// peer got are the buffer's, in order, as many as the send says went out.
TEST_P(ZeroCopyTest, ATimeoutWaitsUntilTheKernelLetsGoThenReportsWhatLeft) {
    run([]() -> Task<void> {
        const std::string data = test::letters(8 << 20, 3);
        auto [client, server] = co_await test::loopback_pair();
        std::size_t left = 0;
        auto sender = [&]() -> Task<Result<std::size_t>> {
            auto send = io::send_all_zc(server, data).timeout(50ms);
            auto r = co_await send;
            left = send.transferred();
            CO_ASSERT(server.shutdown(Shutdown::write));
            co_return r;
        };
        auto reader = [&]() -> Task<std::string> {
            // (The outcome is checked either way; the pause only makes the deadline likely to
            // pass while the peer is not reading.)
            (void)co_await sleep(200ms);
            std::string got;
            std::array<char, 65536> buf;
            for (;;) {
                auto n = co_await client.recv(buf).timeout(20s);
                CO_ASSERT(n);
                if (*n == 0) co_return got;
                got.append(buf.data(), *n);
            }
        };
        auto [r, got] = co_await when_all(sender(), reader());
        if (r) {
            EXPECT_EQ(*r, data.size());
        } else {
            EXPECT_EQ(r.error(), std::errc::timed_out);
        }
        EXPECT_EQ(got.size(), left);
        EXPECT_TRUE(got == data.substr(0, got.size()));
        EXPECT_EQ(test::ops_in_flight(), 0u);
    }());
}

TEST_P(ZeroCopyTest, APeerGoneIsAnErrorNotSigpipe) {
    run([]() -> Task<void> {
        const std::string data = test::letters(4 << 20, 4);
        auto [client, server] = co_await test::loopback_pair();
        CO_ASSERT(client.set_linger_reset());
        CO_ASSERT(co_await client.close());
        auto r = co_await io::send_all_zc(server, data).timeout(10s);
        for (int i = 0; i < 3 && r; ++i)
            r = co_await io::send_all_zc(server, data).timeout(10s);
        CO_ASSERT(!r);
        EXPECT_TRUE(r.error() == std::errc::broken_pipe || r.error() == std::errc::connection_reset)
            << r.error().message();
    }());
}

GALAY_INSTANTIATE_BACKENDS(ZeroCopyTest);
