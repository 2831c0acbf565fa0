// examples/mini_redis in-process: a command handler that throws (on the connection's shard and on
// another worker's), the drain of idle connections, expiry, and the request parser's work on a
// request that arrives a byte at a time.
// The protocol against redis-server, the faults and the real clients are in tests/mini_redis/.
#include "mini_redis/flat_map.hpp"
#include "mini_redis/resp.hpp"
#include "mini_redis/server.hpp"
#include "support/backends.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>

using namespace std::chrono_literals;

namespace {

/// A blocking client socket to 127.0.0.1:`port` (the test thread is not a worker).
class Client {
public:
    explicit Client(std::uint16_t port)
        : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw std::runtime_error("connect failed");
    }
    ~Client() { ::close(fd_); }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    void send(std::string_view s) {
        while (!s.empty()) {
            const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
            if (n <= 0) throw std::runtime_error("send failed");
            s.remove_prefix(static_cast<std::size_t>(n));
        }
    }
    /// One reply line (the replies these tests expect are one line each).
    std::string line() {
        std::string out;
        char c = 0;
        while (out.size() < 2 || out.compare(out.size() - 2, 2, "\r\n") != 0) {
            if (::recv(fd_, &c, 1, 0) != 1) throw std::runtime_error("the server closed");
            out += c;
        }
        return out;
    }
    std::string call(std::string_view request) {
        send(request);
        return line();
    }

private:
    int fd_;
};

std::string request(std::initializer_list<std::string_view> args) {
    std::string r = "*" + std::to_string(args.size()) + "\r\n";
    for (std::string_view a : args)
        r += "$" + std::to_string(a.size()) + "\r\n" + std::string(a) + "\r\n";
    return r;
}

void boom(mini_redis::Store&, mini_redis::Args, mini_redis::Replies&) {
    throw std::runtime_error("the handler failed");
}

void boom_here(mini_redis::Server&, mini_redis::Args, mini_redis::Replies&) {
    throw std::runtime_error("the local handler failed");
}

class MiniRedis : public galay::test::BackendTest {};

TEST_P(MiniRedis, AHandlerThatThrowsAnswersAnErrorAndTheServerGoesOn) {
    mini_redis::Options o;
    o.port = 0;
    o.workers = 2;
    o.backend = GetParam();
    o.extra_commands = {{"boom", 2, mini_redis::Route::key, boom},
                        {"boomhere", 1, mini_redis::Route::here, nullptr, boom_here}};
    galay::Runtime rt(rt_options(2));
    auto server = std::make_shared<mini_redis::Server>(rt, std::move(o));
    auto listening = mini_redis::start(rt, server);
    ASSERT_TRUE(listening) << listening.error().message();
    // A key of each shard: whichever worker took the connection, one runs there and one on the
    // other worker (its exception comes back across).
    std::string keys[2];
    for (int i = 0; keys[0].empty() || keys[1].empty(); ++i) {
        const std::string k = "key" + std::to_string(i);
        keys[mini_redis::shard_of(k, 2)] = k;
    }
    {
        Client c(server->options.port), other(server->options.port);
        for (const std::string& k : keys) {
            EXPECT_EQ(c.call(request({"BOOM", k})), "-ERR the handler failed\r\n");
            EXPECT_EQ(c.call(request({"SET", k, "v"})), "+OK\r\n");
        }
        EXPECT_EQ(c.call(request({"boomhere"})), "-ERR the local handler failed\r\n");
        // Pipelined: the requests after the one that threw are answered, in order.
        c.send(request({"BOOM", keys[1]}) + request({"GET", keys[1]}) + request({"PING"}));
        EXPECT_EQ(c.line(), "-ERR the handler failed\r\n");
        EXPECT_EQ(c.line(), "$1\r\n");
        EXPECT_EQ(c.line(), "v\r\n");
        EXPECT_EQ(c.line(), "+PONG\r\n");
        EXPECT_EQ(other.call(request({"GET", keys[0]})), "$1\r\n");
    }
    const std::size_t cut = rt.block_on(listening->drain(std::chrono::steady_clock::now() + 5s));
    EXPECT_EQ(cut, 0u);
    rt.shutdown();
}

TEST_P(MiniRedis, TheDrainClosesConnectionsWaitingForARequestAtOnce) {
    // Each connection waits for its next request in galay::idle: the drain closes it there at
    // once and cuts none. (Without it the drain would wait a minute and then cut all three.)
    mini_redis::Options o;
    o.port = 0;
    o.workers = 2;
    o.backend = GetParam();
    galay::Runtime rt(rt_options(2));
    auto server = std::make_shared<mini_redis::Server>(rt, std::move(o));
    auto listening = mini_redis::start(rt, server);
    ASSERT_TRUE(listening) << listening.error().message();
    Client a(server->options.port), b(server->options.port), c(server->options.port);
    for (Client* x : {&a, &b, &c})
        EXPECT_EQ(x->call(request({"SET", "k", "v"})), "+OK\r\n");
    const std::size_t cut = rt.block_on(listening->drain(std::chrono::steady_clock::now() + 60s));
    EXPECT_EQ(cut, 0u);
    for (Client* x : {&a, &b, &c})
        EXPECT_THROW(x->line(), std::runtime_error) << "still open after the drain";
    rt.shutdown();
}

TEST_P(MiniRedis, KeysExpireLazilyAndPeriodicallyOnThePausedClock) {
    // The worker's clock stands still while it works and jumps to the next timer (the periodic
    // expiry's tick) whenever it is idle: a minute of deadlines passes without a minute of real
    // time, and nothing here depends on how fast the machine is.
    mini_redis::Options o;
    o.port = 0;
    o.backend = GetParam();
    galay::RuntimeOptions ro = rt_options(1);
    ro.scheduler.paused_clock = true;
    galay::Runtime rt(ro);
    auto server = std::make_shared<mini_redis::Server>(rt, std::move(o));
    auto listening = mini_redis::start(rt, server);
    ASSERT_TRUE(listening) << listening.error().message();
    {
        Client c(server->options.port);
        EXPECT_EQ(c.call(request({"SET", "read", "v", "PX", "60000"})), "+OK\r\n");
        EXPECT_EQ(c.call(request({"SET", "unread", "v", "EX", "60"})), "+OK\r\n");
        EXPECT_EQ(c.call(request({"SET", "kept", "v"})), "+OK\r\n");
        // PTTL counts down as the clock jumps; past its deadline the key is gone.
        long long last = 60001;
        for (int i = 0; i < 1'000'000 && last >= 0; ++i) {
            const std::string r = c.call(request({"PTTL", "read"}));
            ASSERT_EQ(r[0], ':') << r;
            const long long ttl = std::stoll(r.substr(1));
            ASSERT_LE(ttl, last) << "a deadline moved back";
            last = ttl;
        }
        EXPECT_EQ(last, -2);
        EXPECT_EQ(c.call(request({"GET", "read"})), "$-1\r\n");
        // Periodic: "unread" is never looked up; the expiry ticks delete it (DBSIZE counts keys
        // past their deadline that nobody has deleted yet, as Redis's does).
        std::string size;
        for (int i = 0; i < 1'000'000 && size != ":1\r\n"; ++i)
            size = c.call(request({"DBSIZE"}));
        EXPECT_EQ(size, ":1\r\n");
        EXPECT_EQ(c.call(request({"EXISTS", "kept", "unread"})), ":1\r\n");
    }
    (void)rt.block_on(listening->drain(std::chrono::steady_clock::now() + 5s));
    rt.shutdown();
}

GALAY_INSTANTIATE_BACKENDS(MiniRedis);

TEST(MiniRedisParser, ARequestArrivingAByteAtATimeIsScannedOnce) {
    // Every prefix of the request is given to parse() as it grows, as a connection does while
    // bytes arrive: the bytes scanned stay within twice the request, not its square.
    const std::string value(5000, 'x');
    const std::string inline_request = "ECHO " + std::string(20000, 'y') + "\r\n";
    for (const std::string& wire : {request({"SET", std::string("k\0\r\n", 4), value}),
                                    inline_request, request({"MSET", "a", "1", "b", "2"})}) {
        mini_redis::RequestParser p;
        mini_redis::RequestParser::Status st = mini_redis::RequestParser::Status::incomplete;
        std::size_t given = 0;
        while (st == mini_redis::RequestParser::Status::incomplete && given < wire.size())
            st = p.parse(std::string_view(wire).substr(0, ++given));
        ASSERT_EQ(st, mini_redis::RequestParser::Status::complete);
        EXPECT_EQ(p.size(), wire.size());
        EXPECT_LE(p.bytes_scanned(), 2 * wire.size()) << wire.substr(0, 20);
    }
}

TEST(MiniRedisParser, ABulkLengthOverTheLimitIsRefusedFromItsLine) {
    mini_redis::RequestParser p;
    EXPECT_EQ(p.parse("*2\r\n$3\r\nSET\r\n$1073741824\r\n"),
              mini_redis::RequestParser::Status::error);
    EXPECT_EQ(p.error(), "ERR Protocol error: invalid bulk length");
}

} // namespace

TEST(MiniRedisFlatMap, AgreesWithUnorderedMapThroughInsertsErasesAndGrowth) {
    // Random inserts, updates and erases over few keys, short and long (long probe runs, erases
    // in the middle of them, the array growing) give the same contents as std::unordered_map after
    // every step.
    mini_redis::FlatMap<int> map;
    std::unordered_map<std::string, int> expected;
    std::minstd_rand rng(7);
    for (int step = 0; step < 200'000; ++step) {
        // Short keys (kept in the slot) and long ones (a block of their own).
        const std::string key = (rng() % 2 ? "k" : "a key longer than the slot keeps:") +
                                std::to_string(rng() % (step < 100'000 ? 3'000 : 50));
        switch (rng() % 3) {
        case 0:
        case 1: {
            auto [v, made] = map.try_emplace(key);
            ASSERT_EQ(made, !expected.contains(key)) << key;
            *v = step;
            expected[key] = step;
            break;
        }
        default:
            ASSERT_EQ(map.erase(key), expected.erase(key) == 1) << key;
        }
        ASSERT_EQ(map.size(), expected.size());
        if (step % 997 == 0)
            for (const auto& [k, v] : expected) {
                const int* got = map.find(k);
                ASSERT_NE(got, nullptr) << k;
                ASSERT_EQ(*got, v) << k;
            }
        ASSERT_EQ(map.find("absent") == nullptr, true);
    }
    map.clear();
    EXPECT_EQ(map.size(), 0u);
    EXPECT_EQ(map.find("k1"), nullptr);
}
