// fs::File::send_to (sendfile from a file to a TcpStream) on every backend, over real loopback
// sockets and real files in a temp dir.
#include "support/backends.hpp"
#include "support/files.hpp"

#include "support/loopback_pair.hpp"

#include <array>
#include <fstream>
#include <string>

using namespace galay;
using namespace std::chrono_literals;

namespace {

/// Reads until EOF (or until `limit` bytes, when given).
Task<std::string> read_to_eof(TcpStream& s, std::size_t limit = SIZE_MAX) {
    std::string out;
    std::array<char, 16384> buf;
    while (out.size() < limit) {
        const std::size_t want = std::min(buf.size(), limit - out.size());
        auto n = co_await s.recv(std::span(buf).first(want)).timeout(20s);
        if (!n) throw Error(n.error(), "read_to_eof");
        if (*n == 0) co_return out;
        out.append(buf.data(), *n);
    }
    co_return out;
}

struct FileOf {
    test::TempDir dir;
    std::filesystem::path path;
    fs::File file;
    explicit FileOf(const std::string& content)
        : path(dir / "data.bin") {
        std::ofstream(path, std::ios::binary) << content;
        auto f = fs::File::open(path);
        if (!f) throw Error(f.error(), "open");
        file = std::move(*f);
    }
};

} // namespace

class SendToTest : public test::BackendTest {};

TEST_P(SendToTest, AWholeFileArrivesByteForByte) {
    run([]() -> Task<void> {
        const std::string content = test::letters(3 << 20, 1);
        FileOf f(content);
        auto [client, server] = co_await test::loopback_pair();
        auto sender = [&]() -> Task<Result<std::size_t>> {
            auto n = co_await f.file.send_to(server, 0, content.size()).timeout(20s);
            CO_ASSERT(server.shutdown(Shutdown::write));
            co_return n;
        };
        auto [sent, got] = co_await when_all(sender(), read_to_eof(client));
        CO_ASSERT(sent);
        EXPECT_EQ(*sent, content.size());
        EXPECT_TRUE(got == content);
        EXPECT_EQ(test::ops_in_flight(), 0u);
    }());
}

TEST_P(SendToTest, ARangeIsSentAndOnePastTheEndStopsAtTheEnd) {
    run([]() -> Task<void> {
        const std::string content = test::letters(200000, 2);
        FileOf f(content);
        auto [client, server] = co_await test::loopback_pair();
        auto sender = [&]() -> Task<std::array<std::size_t, 3>> {
            auto middle = co_await f.file.send_to(server, 12345, 70000).timeout(10s);
            auto tail = co_await f.file.send_to(server, content.size() - 100, 1000).timeout(10s);
            auto past = co_await f.file.send_to(server, content.size() + 5, 10).timeout(10s);
            CO_ASSERT(middle && tail && past);
            CO_ASSERT(server.shutdown(Shutdown::write));
            co_return std::array{*middle, *tail, *past};
        };
        auto [sent, got] = co_await when_all(sender(), read_to_eof(client));
        EXPECT_EQ(sent[0], 70000u);
        EXPECT_EQ(sent[1], 100u); // the file ends first
        EXPECT_EQ(sent[2], 0u);
        EXPECT_TRUE(got == content.substr(12345, 70000) + content.substr(content.size() - 100));
    }());
}

TEST_P(SendToTest, AFileTruncatedWhileBeingSentEndsShortWithoutAHang) {
    run([]() -> Task<void> {
        const std::string content = test::letters(8 << 20, 3);
        FileOf f(content);
        auto [client, server] = co_await test::loopback_pair();
        // Small socket buffers: the sender is blocked on a full socket long before 1 MiB.
        CO_ASSERT(server.set_send_buffer_size(32 << 10));
        CO_ASSERT(client.set_recv_buffer_size(32 << 10));
        auto sender = [&]() -> Task<Result<std::size_t>> {
            auto n = co_await f.file.send_to(server, 0, content.size()).timeout(20s);
            CO_ASSERT(server.shutdown(Shutdown::write));
            co_return n;
        };
        auto reader = [&]() -> Task<std::string> {
            std::string got = co_await read_to_eof(client, 16 << 10); // the send has started
            std::filesystem::resize_file(f.path, 1 << 20);
            got += co_await read_to_eof(client);
            co_return got;
        };
        auto [sent, got] = co_await when_all(sender(), reader());
        CO_ASSERT(sent);
        EXPECT_EQ(*sent, std::size_t{1} << 20); // short: what the file held once truncated
        EXPECT_EQ(got.size(), *sent);
        EXPECT_TRUE(got == content.substr(0, got.size()));
    }());
}

TEST_P(SendToTest, APeerGoneIsAnErrorNotSigpipe) {
    run([]() -> Task<void> {
        const std::string content = test::letters(4 << 20, 4);
        FileOf f(content);
        auto [client, server] = co_await test::loopback_pair();
        CO_ASSERT(client.set_linger_reset());
        CO_ASSERT(co_await client.close());
        // (A send may still be taken before the reset is seen: a few tries.)
        Result<std::size_t> n = co_await f.file.send_to(server, 0, content.size()).timeout(10s);
        for (int i = 0; i < 3 && n; ++i)
            n = co_await f.file.send_to(server, 0, content.size()).timeout(10s);
        CO_ASSERT(!n);
        EXPECT_TRUE(n.error() == std::errc::broken_pipe || n.error() == std::errc::connection_reset)
            << n.error().message();
    }());
}

TEST_P(SendToTest, ATimeoutOnAFullSocketEndsItAndLeavesNothingPending) {
    run([]() -> Task<void> {
        const std::string content = test::letters(8 << 20, 5);
        FileOf f(content);
        auto [client, server] = co_await test::loopback_pair(); // the client never reads
        auto n = co_await f.file.send_to(server, 0, content.size()).timeout(50ms);
        CO_ASSERT(!n);
        EXPECT_EQ(n.error(), std::errc::timed_out);
        EXPECT_EQ(test::ops_in_flight(), 0u);
    }());
}

TEST_P(SendToTest, BadArgumentsFailBeforeAnyIo) {
    run([]() -> Task<void> {
        FileOf f("abc");
        auto [client, server] = co_await test::loopback_pair();
        auto big = co_await f.file.send_to(server, 0, std::uint64_t{3} << 30);
        CO_ASSERT(!big);
        EXPECT_EQ(big.error(), errc::transfer_too_large);
        auto none = co_await f.file.send_to(server, 0, 0);
        CO_ASSERT(none);
        EXPECT_EQ(*none, 0u);
        fs::File closed;
        auto bad = co_await closed.send_to(server, 0, 3);
        CO_ASSERT(!bad);
        EXPECT_EQ(bad.error(), std::errc::bad_file_descriptor);
    }());
}

GALAY_INSTANTIATE_BACKENDS(SendToTest);
