// examples/curl's CurlMulti on every backend, against a small HTTP/1.1 server this test runs on
// the same scheduler (keep-alive, a fixed body, a 404, and a path that stalls in the middle of
// its body): many transfers at once, headers and status, a refused port, libcurl's per-transfer
// timeout, and cancellation of one transfer (CancelToken, galay::timeout) while the others go
// on and the multi handle stays usable. curl_fetch_test.py runs the example against nginx.
#include "curl/curl_multi.hpp"
#include "support/backends.hpp"

#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

class CurlMultiTest : public test::BackendTest {
protected:
    static void SetUpTestSuite() { global_ = std::make_unique<galay_curl::CurlGlobal>(); }
    static void TearDownTestSuite() { global_.reset(); }
    void SetUp() override {
        test::BackendTest::SetUp();
        ASSERT_TRUE(global_->ok());
    }
    static inline std::unique_ptr<galay_curl::CurlGlobal> global_;
};

std::string body_of(std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i)
        s[i] = static_cast<char>('a' + i % 26);
    return s;
}

/// The test's server: GET /ok/N answers N bytes (body_of), /close/N the same and then closes
/// the connection, /stall sends 10 of the 1000 bytes it announces and then holds the
/// connection, anything else is a 404.
struct Server {
    TaskGroup group;
    std::uint16_t port = 0;
    Event stalled; // set once a /stall response has sent its 10 bytes

    Task<void> connection(TcpStream s) {
        std::string in;
        char buf[4096];
        for (;;) {
            std::size_t end;
            while ((end = in.find("\r\n\r\n")) == std::string::npos) {
                auto n = co_await s.recv(std::span(buf, sizeof buf));
                if (!n || *n == 0) co_return;
                in.append(buf, *n);
            }
            const std::string head = in.substr(0, end);
            in.erase(0, end + 4);
            const std::string path = head.substr(4, head.find(' ', 4) - 4);
            std::string out;
            const bool close = path.starts_with("/close/");
            if (path.starts_with("/ok/") || close) {
                const std::string body = body_of(std::stoul(path.substr(close ? 7 : 4)));
                out = "HTTP/1.1 200 OK\r\nX-Test: yes\r\nContent-Length: " +
                      std::to_string(body.size()) + (close ? "\r\nConnection: close" : "") +
                      "\r\n\r\n" + body;
            } else if (path == "/stall") {
                out = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + body_of(10);
            } else {
                out = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
            }
            if (!co_await s.send_all(out) || close) co_return;
            if (path == "/stall") {
                stalled.set();
                while (true) { // hold it until the client goes away
                    auto n = co_await s.recv(std::span(buf, sizeof buf));
                    if (!n || *n == 0) co_return;
                }
            }
        }
    }

    Task<void> accept_loop(TcpListener l) {
        for (;;) {
            auto c = co_await l.accept();
            if (!c) co_return;
            group.spawn(connection(std::move(*c)));
        }
    }

    /// Listens on a loopback port and serves until stop().
    void start() {
        auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
        if (!l) throw std::runtime_error("bind: " + l.error().message());
        port = l->local_addr()->port();
        group.spawn(accept_loop(std::move(*l)));
    }
    Task<void> stop() {
        group.cancel();
        (void)co_await group.wait();
    }
    std::string url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(port) + path;
    }
};

/// Every fetch must have ended before the CurlMulti goes: the tests keep it in the task.
Task<galay_curl::FetchResult> get(galay_curl::CurlMulti& m, std::string url,
                                  std::chrono::milliseconds timeout = 30s) {
    galay_curl::FetchOptions o;
    o.timeout = timeout;
    co_return co_await m.fetch(std::move(url), std::move(o));
}

/// Runs `body(server, multi)` with the test's server listening, then stops the server once the
/// multi handle (and every fetch of the body) is gone.
template <class Body>
Task<void> with_server(Body body) {
    Server srv;
    srv.start();
    {
        galay_curl::CurlMulti m;
        co_await body(srv, m);
    }
    co_await srv.stop();
}

} // namespace

TEST_P(CurlMultiTest, ManyTransfersHeadersStatusAndRefused) {
    run(with_server([](Server& srv, galay_curl::CurlMulti& m) -> Task<void> {
        std::vector<Task<galay_curl::FetchResult>> all;
        for (int i = 0; i < 100; ++i)
            all.push_back(get(m, srv.url("/ok/" + std::to_string(i * 331))));
        auto results = co_await when_all(std::move(all));
        for (int i = 0; i < 100; ++i) {
            CO_ASSERT(results[i].has_value());
            EXPECT_EQ(results[i]->status, 200);
            EXPECT_EQ(results[i]->body, body_of(i * 331));
            EXPECT_EQ(results[i]->body_bytes, static_cast<std::uint64_t>(i * 331));
            EXPECT_EQ(results[i]->header("x-test"), "yes");
        }
        EXPECT_LE(m.connections_opened(), 100u); // reused ones count 0
        auto missing = co_await get(m, srv.url("/missing"));
        CO_ASSERT(missing.has_value()); // a 404 is a response
        EXPECT_EQ(missing->status, 404);
        auto refused = co_await get(m, "http://127.0.0.1:1/");
        CO_ASSERT(!refused.has_value());
        EXPECT_EQ(refused.error().code, CURLE_COULDNT_CONNECT);
        EXPECT_NE(refused.error().message.find("127.0.0.1"), std::string::npos)
            << refused.error().message;
        EXPECT_EQ(m.in_flight(), 0u);
    }));
}

// Every connection closed after one response: libcurl opens a socket per transfer and the
// numbers come back at once for new sockets, while other transfers' sockets stay open. Each
// number's record is parked at REMOVE and taken again by the next socket: no wait of an old
// socket may wake or starve a new one, and every body arrives whole.
TEST_P(CurlMultiTest, DescriptorNumbersReusedForNewSockets) {
    run(with_server([](Server& srv, galay_curl::CurlMulti& m) -> Task<void> {
        auto worker = [](Server& srv, galay_curl::CurlMulti& m, int w) -> Task<int> {
            int ok = 0;
            for (int i = 0; i < 40; ++i) {
                const std::size_t n = 100 + static_cast<std::size_t>((w * 40 + i) * 97 % 20000);
                auto r =
                    co_await get(m, srv.url((i % 2 ? "/close/" : "/ok/") + std::to_string(n)), 10s);
                ok += r && r->status == 200 && r->body == body_of(n);
            }
            co_return ok;
        };
        std::vector<Task<int>> workers;
        for (int w = 0; w < 8; ++w)
            workers.push_back(worker(srv, m, w));
        auto oks = co_await when_all(std::move(workers));
        for (int ok : oks)
            EXPECT_EQ(ok, 40);
        EXPECT_GE(m.connections_opened(), 160u); // every /close/ transfer opened one
        EXPECT_EQ(m.in_flight(), 0u);
    }));
}

TEST_P(CurlMultiTest, TimeoutEndsAStalledBodyOthersFinish) {
    run(with_server([](Server& srv, galay_curl::CurlMulti& m) -> Task<void> {
        std::vector<Task<galay_curl::FetchResult>> all;
        all.push_back(get(m, srv.url("/stall"), 200ms));
        for (int i = 0; i < 10; ++i)
            all.push_back(get(m, srv.url("/ok/5000")));
        auto results = co_await when_all(std::move(all));
        CO_ASSERT(!results[0].has_value());
        EXPECT_EQ(results[0].error().code, CURLE_OPERATION_TIMEDOUT);
        EXPECT_NE(results[0].error().message.find("imed out"), std::string::npos);
        for (int i = 1; i <= 10; ++i) {
            CO_ASSERT(results[i].has_value());
            EXPECT_EQ(results[i]->body.size(), 5000u);
        }
    }));
}

TEST_P(CurlMultiTest, CancelOneWhileOthersGoOn) {
    run(with_server([](Server& srv, galay_curl::CurlMulti& m) -> Task<void> {
        CancelToken token;
        auto canceller = [](Server& s, CancelToken& t) -> Task<void> {
            (void)co_await s.stalled.wait(); // the stalled transfer is mid-body
            t.cancel();
        };
        auto [stalled, others, _] = co_await when_all(
            with_cancel(token, get(m, srv.url("/stall"))),
            [](galay_curl::CurlMulti& m, Server& s) -> Task<int> {
                int ok = 0;
                for (int i = 0; i < 20; ++i) {
                    auto r = co_await get(m, s.url("/ok/700"));
                    ok += r && r->body == body_of(700);
                }
                co_return ok;
            }(m, srv),
            canceller(srv, token));
        CO_ASSERT(!stalled.has_value());
        EXPECT_TRUE(stalled.error().cancelled()) << stalled.error().message;
        EXPECT_EQ(stalled.error().message, "cancelled");
        EXPECT_EQ(others, 20);
        EXPECT_EQ(m.in_flight(), 0u);

        // galay::timeout cancels the same way; the multi handle is usable after both.
        srv.stalled.reset();
        auto timed = co_await galay::timeout(100ms, get(m, srv.url("/stall")));
        CO_ASSERT(!timed.has_value());
        EXPECT_EQ(timed.error(), std::errc::timed_out);
        auto after = co_await get(m, srv.url("/ok/10"));
        CO_ASSERT(after.has_value());
        EXPECT_EQ(after->body, body_of(10));
        EXPECT_EQ(m.in_flight(), 0u);
    }));
}

GALAY_INSTANTIATE_BACKENDS(CurlMultiTest);
