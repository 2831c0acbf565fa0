// The HTTP/1.1 server (apps/http/server.hpp) end to end, in-process on every backend:
// a real listener on a loopback ephemeral port, real clients, files in a temp dir.
#include "http/server.hpp"
#include "support/backends.hpp"
#include "support/process.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace galay;
using namespace std::chrono_literals;

namespace {

struct Response {
    int status = 0;
    std::map<std::string, std::string> headers; // names lower-cased
    std::string body;
    std::string header(const std::string& name) const {
        auto it = headers.find(name);
        return it == headers.end() ? "" : it->second;
    }
};

std::string lower(std::string s) {
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

/// A client connection reading answers with io::BufReader.
struct Client {
    TcpStream conn;
    io::BufReader<TcpStream> reader;

    explicit Client(TcpStream s)
        : conn(std::move(s))
        , reader(conn, 1 << 16) {}
    Client(Client&&) = delete;

    Task<void> send(std::string_view bytes) {
        auto r = co_await conn.send_all(bytes).timeout(10s);
        if (!r) throw Error(r.error(), "client send");
    }
    /// One answer; `head_only`: the answer to HEAD (a Content-Length but no body).
    Task<Response> read(bool head_only = false) {
        auto head = co_await reader.read_until("\r\n\r\n").timeout(10s);
        if (!head) throw Error(head.error(), "client: reading an answer's head");
        Response resp;
        std::string text(*head);
        std::size_t eol = text.find("\r\n");
        const std::string status_line = text.substr(0, eol);
        if (status_line.rfind("HTTP/1.1 ", 0) != 0)
            throw std::runtime_error("bad status line: " + status_line);
        resp.status = std::stoi(status_line.substr(9, 3));
        for (std::size_t at = eol + 2; at < text.size();) {
            std::size_t end = text.find("\r\n", at);
            if (end == at) break;
            std::string line = text.substr(at, end - at);
            std::size_t colon = line.find(':');
            resp.headers[lower(line.substr(0, colon))] = line.substr(colon + 2);
            at = end + 2;
        }
        if (!head_only && !resp.header("content-length").empty()) {
            resp.body.resize(std::stoul(resp.header("content-length")));
            if (!resp.body.empty()) {
                auto n = co_await reader.read_exact(std::span(resp.body)).timeout(10s);
                if (!n) throw Error(n.error(), "client: reading a body");
            }
        }
        co_return resp;
    }
    /// True when the server closed the connection (EOF, or a reset after it did).
    Task<bool> closed_by_server(std::chrono::milliseconds within = 10s) {
        reader.consume(reader.buffered().size());
        auto n = co_await reader.fill().timeout(within);
        if (n) co_return *n == 0;
        co_return n.error() == std::errc::connection_reset;
    }
};

/// A temp dir of static files, removed at the end.
struct WebRoot {
    std::filesystem::path dir;
    WebRoot() {
        char tmpl[] = "/tmp/galay-http-test-XXXXXX";
        dir = ::mkdtemp(tmpl);
        std::filesystem::create_directories(dir / "www" / "sub");
        write("www/hello.txt", "static hello\n");
        write("www/sub/index.html", "<p>index</p>");
        write("secret.txt", "outside the root");
        std::string big(300000, '\0');
        for (std::size_t i = 0; i < big.size(); ++i)
            big[i] = static_cast<char>('A' + i * 7 % 26);
        write("www/big.bin", big);
        std::filesystem::create_symlink(dir / "secret.txt", dir / "www" / "escape.txt");
    }
    ~WebRoot() { std::filesystem::remove_all(dir); }
    void write(const std::string& rel, const std::string& content) {
        std::ofstream(dir / rel, std::ios::binary) << content;
    }
    std::string read(const std::string& rel) {
        std::ifstream f(dir / rel, std::ios::binary);
        return {std::istreambuf_iterator<char>(f), {}};
    }
    std::string root() const { return (dir / "www").string(); }
};

class HttpServerTest : public test::BackendTest {
protected:
    /// Run `body(server, port)` against a server with `config`, serving on this scheduler.
    template <class F>
    void with_server(http::ServerConfig config, F body) {
        auto server = http::Server::create(std::move(config));
        ASSERT_TRUE(server) << server.error().message();
        run([](std::shared_ptr<http::Server> s, F f) -> Task<void> {
            auto l = TcpListener::bind(SocketAddr::loopback_v4(0));
            if (!l) throw Error(l.error(), "bind");
            const std::uint16_t port = l->local_addr()->port();
            auto client = [](F& fn, http::Server& srv, std::uint16_t p) -> Task<void> {
                co_await fn(srv, p);
            };
            // The accept loop is cancelled when the client side finishes.
            (void)co_await when_any(client(f, *s, port), s->accept_loop(*l));
        }(std::move(*server), std::move(body)));
    }
};

Task<std::unique_ptr<Client>> connect(std::uint16_t port) {
    auto s = co_await TcpStream::connect(SocketAddr::loopback_v4(port)).timeout(10s);
    if (!s) throw Error(s.error(), "connect");
    co_return std::make_unique<Client>(std::move(*s));
}

constexpr std::string_view kGet = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";

} // namespace

TEST_P(HttpServerTest, FixedBodyWithDateAndKeepAlive) {
    with_server({}, [](http::Server& srv, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        for (int i = 0; i < 3; ++i) { // three requests, one connection
            co_await c->send(kGet);
            Response r = co_await c->read();
            EXPECT_EQ(r.status, 200);
            EXPECT_EQ(r.body, "Hello, World!");
            EXPECT_EQ(r.header("content-length"), "13");
            EXPECT_EQ(r.header("date").size(), 29u);
            EXPECT_TRUE(r.header("date").ends_with(" GMT"));
            EXPECT_EQ(r.header("connection"), "");
        }
        EXPECT_EQ(srv.stats().connections, 1u);
        EXPECT_EQ(srv.stats().requests, 3u);
    });
}

TEST_P(HttpServerTest, DateHeaderFormat) {
    EXPECT_EQ(http::format_http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
    EXPECT_EQ(http::format_http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
}

TEST_P(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
    WebRoot web;
    with_server({.root = web.root()}, [&](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        std::string batch;
        for (int i = 0; i < 60; ++i) {
            if (i % 3 == 0) batch += kGet;
            if (i % 3 == 1) batch += "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n";
            if (i % 3 == 2) batch += "HEAD /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n";
        }
        co_await c->send(batch); // all at once: answered in one stream, in order
        for (int i = 0; i < 60; ++i) {
            Response r = co_await c->read(i % 3 == 2);
            CO_ASSERT(r.status == 200);
            if (i % 3 == 0) {
                EXPECT_EQ(r.body, "Hello, World!");
            } else if (i % 3 == 1) {
                EXPECT_EQ(r.body, "static hello\n");
            } else {
                EXPECT_EQ(r.header("content-length"), "13"); // the file's length
                EXPECT_EQ(r.body, "");
            }
        }
    });
}

TEST_P(HttpServerTest, APipelinedBurstLargerThanTheReadBufferIsAnsweredInOrder) {
    // ~60 KB of requests in one send, against a 4 KiB read buffer: the requests are parsed where
    // they were received (a buffer of the scheduler's pool), several receives' worth, with file
    // answers (which suspend) among them, and every answer comes back in order.
    WebRoot web;
    with_server({.root = web.root(), .read_buffer = 4096},
                [&](http::Server& srv, std::uint16_t port) -> Task<void> {
                    auto c = co_await connect(port);
                    constexpr int kRequests = 2000;
                    std::string batch;
                    for (int i = 0; i < kRequests; ++i) {
                        if (i % 4 == 0) batch += kGet;
                        if (i % 4 == 1) batch += "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n";
                        if (i % 4 == 2) batch += "GET /none HTTP/1.1\r\nHost: t\r\n\r\n";
                        if (i % 4 == 3) batch += "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n";
                    }
                    CO_ASSERT(batch.size() > 50000);
                    co_await c->send(batch);
                    for (int i = 0; i < kRequests; ++i) {
                        Response r = co_await c->read(i % 4 == 3);
                        if (i % 4 == 0) {
                            CO_ASSERT(r.status == 200 && r.body == "Hello, World!");
                        } else if (i % 4 == 1) {
                            CO_ASSERT(r.status == 200 && r.body == "static hello\n");
                        } else if (i % 4 == 2) {
                            CO_ASSERT(r.status == 404);
                        } else {
                            CO_ASSERT(r.status == 200 && r.header("content-length") == "13");
                        }
                    }
                    co_await c->send(kGet); // and the connection goes on
                    EXPECT_EQ((co_await c->read()).body, "Hello, World!");
                    EXPECT_EQ(srv.stats().requests, kRequests + 1u);
                });
}

TEST_P(HttpServerTest, APipelinedBurstOfAnySizeIsAnsweredWhole) {
    // 4,000 pipelined requests of many lengths (~800 KB): receives of a pool buffer's size end
    // inside heads at every offset, and the unfinished head moved into the reader must not make
    // the receive behind it (a whole pool buffer) "too large" (431). Sent once in one piece and
    // once in pieces of every size, while the answers are read; every answer counted.
    WebRoot web;
    for (const std::size_t read_buffer : {std::size_t{4096}, std::size_t{16384}}) {
        with_server(
            {.root = web.root(), .read_buffer = read_buffer},
            [&](http::Server& srv, std::uint16_t port) -> Task<void> {
                auto c = co_await connect(port);
                constexpr int kRequests = 4000;
                std::string burst;
                for (int i = 0; i < kRequests; ++i) {
                    const std::string pad(static_cast<std::size_t>(i) * 7919 % 301, 'p');
                    burst += i % 3 == 1 ? "GET /hello.txt HTTP/1.1\r\n" : "GET / HTTP/1.1\r\n";
                    burst += "Host: t\r\nX-Pad: " + pad + "\r\n\r\n";
                }
                CO_ASSERT(burst.size() > 600000);
                for (int round = 0; round < 2; ++round) {
                    auto send = [](Client& cl, const std::string& bytes, int rnd) -> Task<void> {
                        if (rnd == 0) {
                            co_await cl.send(bytes);
                            co_return;
                        }
                        std::mt19937 rng(42);
                        for (std::size_t at = 0; at < bytes.size();) {
                            const std::size_t n =
                                std::min<std::size_t>(bytes.size() - at, 1 + rng() % 70000);
                            co_await cl.send(std::string_view(bytes).substr(at, n));
                            at += n;
                        }
                    };
                    auto read = [](Client& cl) -> Task<int> {
                        int answered = 0;
                        for (int i = 0; i < kRequests; ++i) {
                            Response r = co_await cl.read();
                            const bool ok =
                                r.status == 200 &&
                                r.body == (i % 3 == 1 ? "static hello\n" : "Hello, World!");
                            if (!ok) {
                                ADD_FAILURE()
                                    << "answer " << i << ": " << r.status << " " << r.body;
                                co_return answered;
                            }
                            ++answered;
                        }
                        co_return answered;
                    };
                    auto [sent, answered] = co_await when_all(send(*c, burst, round), read(*c));
                    (void)sent;
                    EXPECT_EQ(answered, kRequests) << "round " << round;
                    if (answered != kRequests) co_return;
                }
                co_await c->send(kGet); // and the connection goes on
                Response last = co_await c->read();
                EXPECT_EQ(last.body, "Hello, World!");
                EXPECT_EQ(srv.stats().requests, 2 * kRequests + 1u);
                EXPECT_EQ(srv.stats().refused, 0u);
            });
    }
}

TEST_P(HttpServerTest, ABodyOfManyReceivesIsSkippedAndTheRequestBehindItAnswered) {
    // The body starts in the receive that brought the head and ends many receives later, with
    // the next request right behind it in the same bytes.
    with_server({}, [](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        std::string bytes = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 300000\r\n\r\n";
        for (int i = 0; i < 300000; ++i)
            bytes += static_cast<char>('a' + i % 26);
        bytes += kGet;
        co_await c->send(bytes);
        EXPECT_EQ((co_await c->read()).status, 405);
        EXPECT_EQ((co_await c->read()).body, "Hello, World!");
    });
}

TEST_P(HttpServerTest, AnUnfinishedHeadBehindEmptyLinesThatOutgrowsTheReaderIs431) {
    // Empty lines before a request line are allowed (up to max_head), and so is an unfinished
    // head (up to max_head): together they can be more than the reader holds, which is 431.
    http::ServerConfig cfg;
    cfg.read_buffer = 1024;
    cfg.limits.max_head = 1024;
    with_server(cfg, [](http::Server& srv, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        std::string bytes;
        for (int i = 0; i < 500; ++i)
            bytes += "\r\n";
        bytes += "GET / HTTP/1.1\r\nHost: t\r\nX: " + std::string(900, 'x');
        co_await c->send(bytes);
        Response r = co_await c->read();
        EXPECT_EQ(r.status, 431);
        EXPECT_TRUE(co_await c->closed_by_server());
        EXPECT_EQ(srv.stats().refused, 1u);
    });
}

TEST_P(HttpServerTest, HeadHasTheLengthButNoBody) {
    with_server({}, [](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        co_await c->send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
        Response h = co_await c->read(true);
        EXPECT_EQ(h.status, 200);
        EXPECT_EQ(h.header("content-length"), "13");
        co_await c->send(kGet); // the next answer starts right after the head: no body was sent
        Response g = co_await c->read();
        EXPECT_EQ(g.body, "Hello, World!");
    });
}

TEST_P(HttpServerTest, AFixedBodyLargerThanTheWriteBufferIsSentWhole) {
    // The fixed answer does not fit the writer (1 KiB + its head): the head is buffered and the
    // body written through. Pipelined behind a small answer, and as HEAD (the length only).
    http::ServerConfig cfg;
    cfg.write_buffer = 1024; // (the writer keeps at least 2 x 512 bytes for answer heads)
    cfg.body = std::string(100'000, 'b') + "end";
    with_server(cfg, [](http::Server& srv, std::uint16_t port) -> Task<void> {
        const std::string& body = srv.config().body;
        auto c = co_await connect(port);
        co_await c->send(std::string("GET /missing HTTP/1.1\r\nHost: t\r\n\r\n") +
                         std::string(kGet) + "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n" +
                         std::string(kGet));
        Response missing = co_await c->read();
        EXPECT_EQ(missing.status, 404);
        Response big = co_await c->read();
        EXPECT_EQ(big.status, 200);
        EXPECT_EQ(big.header("content-length"), std::to_string(body.size()));
        EXPECT_TRUE(big.body == body) << big.body.size() << " bytes";
        Response head = co_await c->read(true);
        EXPECT_EQ(head.header("content-length"), std::to_string(body.size()));
        EXPECT_EQ(head.body, "");
        Response again = co_await c->read();
        EXPECT_TRUE(again.body == body) << again.body.size() << " bytes";
    });
}

TEST_P(HttpServerTest, TwoServersOnOneThreadAnswerTheirOwnFixedBodies) {
    // The fixed answers are rendered once a second and cached per thread, keyed by server: two
    // servers on one scheduler must not answer with each other's body or length.
    http::ServerConfig second;
    second.body = "the second server";
    auto a = http::Server::create({});
    auto b = http::Server::create(std::move(second));
    ASSERT_TRUE(a && b);
    run([](std::shared_ptr<http::Server> a, std::shared_ptr<http::Server> b) -> Task<void> {
        auto la = TcpListener::bind(SocketAddr::loopback_v4(0));
        auto lb = TcpListener::bind(SocketAddr::loopback_v4(0));
        if (!la || !lb) throw Error(std::make_error_code(std::errc::address_in_use), "bind");
        auto client = [](std::uint16_t pa, std::uint16_t pb) -> Task<void> {
            auto ca = co_await connect(pa);
            auto cb = co_await connect(pb);
            for (int i = 0; i < 2; ++i) {
                co_await ca->send(kGet);
                EXPECT_EQ((co_await ca->read()).body, "Hello, World!");
                co_await cb->send(kGet);
                Response r = co_await cb->read();
                EXPECT_EQ(r.body, "the second server");
                EXPECT_EQ(r.header("content-length"), "17");
                co_await cb->send("HEAD / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                Response h = co_await cb->read(true);
                EXPECT_EQ(h.header("content-length"), "17");
                EXPECT_EQ(h.header("connection"), "close");
                EXPECT_TRUE(co_await cb->closed_by_server());
                cb = co_await connect(pb);
                co_await ca->send("HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
                Response ha = co_await ca->read(true);
                EXPECT_EQ(ha.header("content-length"), "13");
                EXPECT_EQ(ha.header("connection"), "keep-alive");
            }
        };
        (void)co_await when_any(client(la->local_addr()->port(), lb->local_addr()->port()),
                                a->accept_loop(*la), b->accept_loop(*lb));
    }(std::move(*a), std::move(*b)));
}

TEST_P(HttpServerTest, StaticFilesAnd404) {
    WebRoot web;
    with_server({.root = web.root()}, [&](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        co_await c->send("GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        Response r = co_await c->read();
        EXPECT_EQ(r.status, 200);
        EXPECT_EQ(r.body, "static hello\n");
        EXPECT_EQ(r.header("content-type"), "text/plain; charset=utf-8");
        // Larger than the server's write buffer: sent in pieces, every byte right.
        co_await c->send("GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
        Response big = co_await c->read();
        EXPECT_EQ(big.status, 200);
        EXPECT_TRUE(big.body == web.read("www/big.bin"));
        co_await c->send("GET /sub/ HTTP/1.1\r\nHost: t\r\n\r\n");
        EXPECT_EQ((co_await c->read()).body, "<p>index</p>");
        co_await c->send("GET /h%65llo.txt?q=1 HTTP/1.1\r\nHost: t\r\n\r\n"); // percent-decoded
        EXPECT_EQ((co_await c->read()).body, "static hello\n");
        for (const char* missing : {"/nope.txt", "/sub", "/../secret.txt", "/sub/../../secret.txt",
                                    "/escape.txt", "/%2e%2e/secret.txt"}) {
            co_await c->send(std::string("GET ") + missing + " HTTP/1.1\r\nHost: t\r\n\r\n");
            Response m = co_await c->read();
            EXPECT_EQ(m.status, 404) << missing;
            EXPECT_EQ(m.body.find("outside"), std::string::npos) << missing;
        }
        co_await c->send("GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n");
        EXPECT_EQ((co_await c->read()).status, 400);
        co_await c->send(kGet); // still the same connection
        EXPECT_EQ((co_await c->read()).status, 200);
    });
}

TEST_P(HttpServerTest, WithoutARootEveryOtherPathIs404) {
    with_server({}, [](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        co_await c->send("GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
        EXPECT_EQ((co_await c->read()).status, 404);
    });
}

TEST_P(HttpServerTest, ConnectionCloseAndHttp10) {
    with_server({}, [](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        co_await c->send("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        Response r = co_await c->read();
        EXPECT_EQ(r.status, 200);
        EXPECT_EQ(r.header("connection"), "close");
        EXPECT_TRUE(co_await c->closed_by_server());

        auto c10 = co_await connect(port);
        co_await c10->send("GET / HTTP/1.0\r\n\r\n");
        EXPECT_EQ((co_await c10->read()).header("connection"), "close");
        EXPECT_TRUE(co_await c10->closed_by_server());

        auto ka = co_await connect(port);
        co_await ka->send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        EXPECT_EQ((co_await ka->read()).header("connection"), "keep-alive");
        co_await ka->send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        EXPECT_EQ((co_await ka->read()).status, 200);
    });
}

TEST_P(HttpServerTest, RefusedRequestsGetTheirStatusThenTheConnectionCloses) {
    http::ServerConfig cfg;
    cfg.limits.max_request_line = 256;
    cfg.limits.max_head = 1024;
    cfg.limits.max_headers = 8;
    cfg.limits.max_body = 1000;
    with_server(cfg, [](http::Server& srv, std::uint16_t port) -> Task<void> {
        std::string many = "GET / HTTP/1.1\r\nHost: t\r\n";
        for (int i = 0; i < 9; ++i)
            many += "X-" + std::to_string(i) + ": v\r\n";
        const std::vector<std::pair<std::string, int>> cases = {
            {"GET / HTTP/1.1\r\n\r\n", 400},                           // no Host
            {"GET / HTTP/1.1\r\nHost: t\r\nBad Name: v\r\n\r\n", 400}, // space in a name
            {"\x16\x03\x01\x00\xa5\x01\x00\x00", 400},                 // TLS on a plain port
            {"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n", 413},
            {"GET /" + std::string(400, 'a') + " HTTP/1.1\r\nHost: t\r\n\r\n", 414},
            {"GET /" + std::string(400, 'a'), 414}, // before the line ends
            {many + "\r\n", 431},                   // too many fields
            {"GET / HTTP/1.1\r\nHost: t\r\nX: " + std::string(2000, 'x'), 431}, // head too large
            {"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505},
            {"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
        };
        for (const auto& [request, status] : cases) {
            auto c = co_await connect(port);
            co_await c->send(request);
            Response r = co_await c->read();
            EXPECT_EQ(r.status, status) << request.substr(0, 60);
            EXPECT_EQ(r.header("connection"), "close");
            EXPECT_TRUE(co_await c->closed_by_server()) << request.substr(0, 60);
        }
        EXPECT_EQ(srv.stats().refused, cases.size());
    });
}

TEST_P(HttpServerTest, OtherMethodsAre405AndABodyIsSkipped) {
    with_server({}, [](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        // The body arrives in two parts, the second after the answer: the server must skip
        // exactly 10 bytes and then read the next request.
        co_await c->send("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n01234");
        Response r = co_await c->read();
        EXPECT_EQ(r.status, 405);
        EXPECT_EQ(r.header("allow"), "GET, HEAD");
        co_await c->send(std::string("56789") + std::string(kGet));
        EXPECT_EQ((co_await c->read()).body, "Hello, World!");
        // Chunked bodies are not decoded: answered, then the connection is closed.
        co_await c->send("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "5\r\nhello\r\n0\r\n\r\n");
        EXPECT_EQ((co_await c->read()).header("connection"), "close");
        EXPECT_TRUE(co_await c->closed_by_server());
    });
}

TEST_P(HttpServerTest, IdleKeepAliveConnectionsAreClosed) {
    with_server(
        {.keepalive_timeout = 100ms}, [](http::Server& srv, std::uint16_t port) -> Task<void> {
            auto c = co_await connect(port);
            co_await c->send(kGet);
            EXPECT_EQ((co_await c->read()).status, 200);
            EXPECT_TRUE(co_await c->closed_by_server(20s)); // closed by the server, not by us
            EXPECT_EQ(srv.stats().timeouts, 1u);
        });
}

TEST_P(HttpServerTest, ARequestHeadTooSlowGets408) {
    with_server({.header_timeout = 100ms}, [](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        co_await c->send("GET / HTTP/1.1\r\nHo");
        Response r = co_await c->read();
        EXPECT_EQ(r.status, 408);
        EXPECT_TRUE(co_await c->closed_by_server());
    });
}

TEST_P(HttpServerTest, ARequestSentOneByteAtATimeIsServed) {
    with_server({}, [](http::Server&, std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        (void)c->conn.set_nodelay(true);
        const std::string req = "GET / HTTP/1.1\r\nHost: t\r\nUser-Agent: slow\r\n\r\n";
        for (char ch : req) {
            co_await c->send(std::string_view(&ch, 1));
            co_await yield_now();
        }
        EXPECT_EQ((co_await c->read()).body, "Hello, World!");
    });
}

TEST_P(HttpServerTest, AMalformedFloodNeitherCrashesNorHangsTheServer) {
    with_server({.header_timeout = 2s}, [](http::Server& srv, std::uint16_t port) -> Task<void> {
        // 200 connections of random bytes (some shaped like requests), all at once. Each must be
        // answered with an error or closed; none may hang (the client's 10 s timeout) and the
        // server must answer a good request afterwards.
        std::mt19937 rng(12345);
        std::vector<std::string> floods;
        const std::vector<std::string> shapes = {"GET / HTTP/1.1\r\n",
                                                 "Host: t\r\n",
                                                 "\r\n",
                                                 ": ",
                                                 " ",
                                                 "\r",
                                                 "\n",
                                                 "HTTP/9.9",
                                                 "Content-Length: 99999999999\r\n"};
        for (int i = 0; i < 200; ++i) {
            std::string f;
            const int pieces = 1 + static_cast<int>(rng() % 40);
            for (int k = 0; k < pieces; ++k) {
                if (rng() % 2)
                    f += shapes[rng() % shapes.size()];
                else
                    for (int b = static_cast<int>(rng() % 30); b > 0; --b)
                        f += static_cast<char>(rng() % 256);
            }
            floods.push_back(f + "\r\n\r\n");
        }
        auto one = [](std::uint16_t p, const std::string& bytes) -> Task<void> {
            auto c = co_await connect(p);
            co_await c->send(bytes);
            (void)c->conn.shutdown(Shutdown::write);
            // Read until the server closes: answers (valid or not) are fine, hanging is not.
            for (;;) {
                c->reader.consume(c->reader.buffered().size());
                auto n = co_await c->reader.fill().timeout(10s);
                if (!n) {
                    CO_ASSERT(n.error() == std::errc::connection_reset);
                    break;
                }
                if (*n == 0) break;
            }
        };
        std::vector<Task<void>> clients;
        for (const auto& f : floods)
            clients.push_back(one(port, f));
        co_await when_all(std::move(clients));
        EXPECT_GT(srv.stats().refused, 100u);
        auto c = co_await connect(port);
        co_await c->send(kGet);
        EXPECT_EQ((co_await c->read()).status, 200);
    });
}

// Range requests (apps/http/range.hpp): one range is 206 with Content-Range; past the end is
// 416; malformed, another unit, reversed or several ranges get the whole file (200).
TEST_P(HttpServerTest, RangeRequestsGet206Or416OrTheWholeFile) {
    WebRoot web;
    with_server({.root = web.root()}, [&](http::Server&, std::uint16_t port) -> Task<void> {
        const std::string big = web.read("www/big.bin"); // 300,000 bytes
        auto c = co_await connect(port);
        auto get = [&](std::string range) -> Task<Response> {
            co_await c->send("GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: " + range + "\r\n\r\n");
            co_return co_await c->read();
        };
        struct Partial {
            const char* range;
            std::size_t first, length;
        };
        for (Partial p :
             {Partial{"bytes=0-0", 0, 1}, Partial{"bytes=100-199", 100, 100},
              Partial{"bytes=1000-", 1000, 299000}, Partial{"bytes=299990-400000", 299990, 10},
              Partial{"bytes=-500", 299500, 500}, Partial{"bytes=-999999", 0, 300000},
              Partial{"BYTES = 20000-99999 ", 20000, 80000}, Partial{"bytes=, 5-9", 5, 5}}) {
            Response r = co_await get(p.range);
            EXPECT_EQ(r.status, 206) << p.range;
            EXPECT_EQ(r.header("content-range"), "bytes " + std::to_string(p.first) + "-" +
                                                     std::to_string(p.first + p.length - 1) +
                                                     "/300000")
                << p.range;
            EXPECT_TRUE(r.body == big.substr(p.first, p.length)) << p.range;
        }
        for (const char* unsatisfiable :
             {"bytes=300000-", "bytes=400000-500000", "bytes=-0", "bytes=300000-300001,400000-"}) {
            Response r = co_await get(unsatisfiable);
            EXPECT_EQ(r.status, 416) << unsatisfiable;
            EXPECT_EQ(r.header("content-range"), "bytes */300000") << unsatisfiable;
        }
        for (const char* ignored :
             {"bytes=9-5", "bytes=abc", "bytes=1-2-3", "bytes=--5", "bytes=+5-9",
              "bytes=", "bytes=18446744073709551616-", "items=0-5", "bytes 0-5", "bytes=0-10,5-20",
              "bytes=0-1,9-9", "bytes=0-1,400000-"}) {
            Response r = co_await get(ignored);
            EXPECT_EQ(r.status, 200) << ignored;
            EXPECT_EQ(r.header("content-range"), "") << ignored;
            EXPECT_TRUE(r.body == big) << ignored;
        }
        // HEAD and If-Range (no validator of ours can match) ignore it.
        co_await c->send("HEAD /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\n\r\n");
        Response head = co_await c->read(true);
        EXPECT_EQ(head.status, 200);
        EXPECT_EQ(head.header("content-length"), "300000");
        co_await c->send("GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\n"
                         "If-Range: \"x\"\r\n\r\n");
        EXPECT_EQ((co_await c->read()).status, 200);
        // A small file's range (copied, not sent with sendfile) and an empty file's.
        web.write("www/empty.txt", "");
        co_await c->send("GET /hello.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=7-\r\n\r\n");
        Response small = co_await c->read();
        EXPECT_EQ(small.status, 206);
        EXPECT_EQ(small.body, "hello\n");
        co_await c->send("GET /empty.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-\r\n\r\n");
        EXPECT_EQ((co_await c->read()).status, 416);
        co_await c->send("GET /empty.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        Response empty = co_await c->read();
        EXPECT_EQ(empty.status, 200);
        EXPECT_EQ(empty.header("content-length"), "0");
        co_await c->send(kGet); // still the same connection
        EXPECT_EQ((co_await c->read()).status, 200);
    });
}

TEST_P(HttpServerTest, AFileTruncatedWhileBeingSentEndsTheAnswerShortAndCloses) {
    WebRoot web;
    const std::string huge = std::string(8 << 20, 'x');
    using Mode = http::ServerConfig::FileSend;
    for (Mode mode : {Mode::sendfile, Mode::copy}) {
        web.write("www/huge.bin", huge);
        with_server(
            {.root = web.root(), .file_send = mode},
            [&](http::Server&, std::uint16_t port) -> Task<void> {
                auto c = co_await connect(port);
                CO_ASSERT(c->conn.set_recv_buffer_size(32 << 10)); // the server blocks long before
                co_await c->send("GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\n");
                auto head = co_await c->reader.read_until("\r\n\r\n").timeout(10s);
                CO_ASSERT(head);
                CO_ASSERT(head->find("Content-Length: 8388608") != std::string_view::npos);
                c->reader.consume(head->size());
                std::filesystem::resize_file(web.dir / "www/huge.bin", 1 << 20);
                // The body stops at what the file holds now, then the server closes (never a hang).
                std::size_t body = 0;
                for (;;) {
                    body += c->reader.buffered().size();
                    c->reader.consume(c->reader.buffered().size());
                    auto n = co_await c->reader.fill().timeout(10s);
                    CO_ASSERT(n || n.error() == std::errc::connection_reset);
                    if (!n || *n == 0) break;
                }
                // (What the server queued before the truncation still arrives: at most its socket
                // buffer, 4 MiB by default, plus ours.)
                EXPECT_LT(body, huge.size()) << static_cast<int>(mode);
                EXPECT_GT(body, 0u);
            });
    }
}

TEST_P(HttpServerTest, CurlFetchesAFileAndARangeOfIt) {
    if (test::run_process({"curl", "--version"}).exit_code != 0)
        GTEST_SKIP() << "SKIP: curl is not installed";
    WebRoot web;
    with_server({.root = web.root()}, [&](http::Server&, std::uint16_t port) -> Task<void> {
        const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/big.bin";
        const std::string out = (web.dir / "got.bin").string();
        // curl runs on the blocking pool: this thread keeps serving it.
        auto whole = co_await spawn_blocking([&] {
            return test::run_process({"curl", "-sS", "--fail", "-o", out, url}, 30s);
        });
        CO_ASSERT(whole);
        EXPECT_EQ(whole->exit_code, 0) << whole->err;
        EXPECT_TRUE(web.read("got.bin") == web.read("www/big.bin"));
        auto part = co_await spawn_blocking([&] {
            return test::run_process(
                {"curl", "-sS", "--fail", "-r", "1000-50999", "-w", "%{http_code}", url}, 30s);
        });
        CO_ASSERT(part);
        EXPECT_EQ(part->exit_code, 0) << part->err;
        EXPECT_TRUE(part->out == web.read("www/big.bin").substr(1000, 50000) + "206");
        auto past = co_await spawn_blocking([&] {
            return test::run_process(
                {"curl", "-sS", "-o", "/dev/null", "-r", "999999-", "-w", "%{http_code}", url},
                30s);
        });
        CO_ASSERT(past);
        EXPECT_EQ(past->out, "416");
    });
}

TEST_P(HttpServerTest, EveryFileSendModeServesTheSameBytes) {
    WebRoot web;
    using Mode = http::ServerConfig::FileSend;
    for (Mode mode : {Mode::sendfile, Mode::copy}) {
        with_server({.root = web.root(), .file_send = mode},
                    [&](http::Server&, std::uint16_t port) -> Task<void> {
                        const std::string big = web.read("www/big.bin");
                        auto c = co_await connect(port);
                        co_await c->send("GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n"
                                         "GET /big.bin HTTP/1.1\r\nHost: t\r\n"
                                         "Range: bytes=4097-204096\r\n\r\n");
                        Response whole = co_await c->read();
                        Response part = co_await c->read();
                        EXPECT_EQ(whole.status, 200);
                        EXPECT_TRUE(whole.body == big);
                        EXPECT_EQ(part.status, 206);
                        EXPECT_TRUE(part.body == big.substr(4097, 200000));
                    });
    }
}

GALAY_INSTANTIATE_BACKENDS(HttpServerTest);

#ifdef HTTP_SERVER_BIN
// The http_server program: --workers 2 (a galay::Runtime of two workers, each with its own
// SO_REUSEPORT listener) serving many connections at once, then SIGTERM: exit 0.
class HttpServerProcessTest : public test::BackendTest {};

/// http_server --workers 2 on `backend`, started: its pid and port (0: it did not say).
struct Started {
    pid_t pid = -1;
    std::uint16_t port = 0;
    std::string line; // its "listening on" line
};

Started start_server(const std::string& backend) {
    Started s;
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return s;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    const char* argv[] = {HTTP_SERVER_BIN, "0",    "--workers", "2", "--backend",
                          backend.c_str(), nullptr};
    if (::posix_spawn(&s.pid, HTTP_SERVER_BIN, &fa, nullptr, const_cast<char**>(argv), environ) !=
        0)
        s.pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    // "listening on 0.0.0.0:<port> (http_server, <backend>, 2 workers)"
    char ch;
    pollfd pfd{out[0], POLLIN, 0};
    while (s.pid > 0 && s.line.find('\n') == std::string::npos && ::poll(&pfd, 1, 10000) == 1 &&
           ::read(out[0], &ch, 1) == 1)
        s.line += ch;
    ::close(out[0]);
    const std::size_t colon = s.line.find("0.0.0.0:");
    if (colon != std::string::npos)
        s.port = static_cast<std::uint16_t>(std::stoi(s.line.substr(colon + 8)));
    return s;
}

/// SIGTERM, then its exit status (-1: it did not exit normally).
int stop_server(pid_t pid) {
    if (::kill(pid, SIGTERM) != 0) return -1;
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

TEST_P(HttpServerProcessTest, TwoWorkersServeManyConnectionsAndStopOnSigterm) {
    const std::string backend = backend_name(GetParam());
    const Started started = start_server(backend);
    ASSERT_GT(started.pid, 0);
    const pid_t pid = started.pid;
    const std::string& line = started.line;
    ASSERT_NE(started.port, 0) << "no listening line: " << line;
    const std::uint16_t port = started.port;
    EXPECT_NE(line.find("2 workers"), std::string::npos) << line;
    EXPECT_NE(line.find(backend), std::string::npos) << line;

    const std::size_t served = run([](std::uint16_t p) -> Task<std::size_t> {
        auto one = [](std::uint16_t port) -> Task<std::size_t> {
            auto c = co_await connect(port);
            std::size_t ok = 0;
            for (int i = 0; i < 20; ++i) {
                co_await c->send(kGet);
                Response r = co_await c->read();
                if (r.status == 200 && r.body == "Hello, World!") ++ok;
            }
            co_return ok;
        };
        std::vector<Task<std::size_t>> clients;
        for (int i = 0; i < 64; ++i)
            clients.push_back(one(p));
        auto counts = co_await when_all(std::move(clients));
        std::size_t total = 0;
        for (std::size_t n : counts)
            total += n;
        co_return total;
    }(port));
    EXPECT_EQ(served, 64u * 20u);
    EXPECT_EQ(stop_server(pid), 0);
}

TEST_P(HttpServerProcessTest, GetTasksAnswersATaskDumpAsTextAndJson) {
    if (test::run_process({"curl", "--version"}).exit_code != 0)
        GTEST_SKIP() << "SKIP: curl is not installed";
    const std::string backend = backend_name(GetParam());
    const Started s = start_server(backend);
    ASSERT_GT(s.pid, 0);
    ASSERT_NE(s.port, 0) << "no listening line: " << s.line;
    // A connection that sent nothing: its task waits to receive a request head.
    const int idle = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(idle, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(s.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(idle, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
    const std::string base = "http://127.0.0.1:" + std::to_string(s.port);
    // The server accepts on one of its workers at its own pace: ask until a dump shows the idle
    // connection waiting (bounded; each answer is a whole dump).
    test::ProcessResult text, json;
    for (int i = 0; i < 200; ++i) {
        text = test::run_process({"curl", "-sS", "--fail", base + "/tasks"}, 30s);
        if (text.exit_code != 0 || text.out.find("waits on recv") != std::string::npos) break;
    }
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_EQ(text.out.rfind("galay task dump: ", 0), 0u) << text.out;
    EXPECT_NE(text.out.find("worker 0 (" + backend + "): "), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("worker 1 (" + backend + "): "), std::string::npos) << text.out;
    // (a pooled receive, "recv_pooled", where the server uses the buffer pool)
    EXPECT_NE(text.out.find("waits on recv"), std::string::npos) << text.out;
    json = test::run_process({"curl", "-sS", "--fail", base + "/tasks?format=json"}, 30s);
    ASSERT_EQ(json.exit_code, 0) << json.err;
    const auto j = nlohmann::json::parse(json.out);
    ASSERT_EQ(j["workers"].size(), 2u);
    for (const auto& w : j["workers"]) {
        EXPECT_EQ(w["backend"], backend);
        EXPECT_TRUE(w["answered"].get<bool>());
    }
    bool receiving = false;
    for (const auto& t : j["tasks"])
        for (const auto& w : t["waits"])
            receiving = receiving || w["what"].get<std::string>().starts_with("recv");
    EXPECT_TRUE(receiving) << json.out;
    // The parameter is read whole, among the others: format=jsonx asks for text.
    const auto other =
        test::run_process({"curl", "-sS", "--fail", base + "/tasks?a=1&format=json&b"}, 30s);
    ASSERT_EQ(other.exit_code, 0) << other.err;
    EXPECT_EQ(other.out.rfind("{", 0), 0u) << other.out.substr(0, 200);
    const auto near =
        test::run_process({"curl", "-sS", "--fail", base + "/tasks?format=jsonx"}, 30s);
    ASSERT_EQ(near.exit_code, 0) << near.err;
    EXPECT_EQ(near.out.rfind("galay task dump: ", 0), 0u) << near.out.substr(0, 200);
    ::close(idle);
    EXPECT_EQ(stop_server(s.pid), 0);
}

TEST_P(HttpServerProcessTest, ABusyPortIsOneClearErrorAndExitOne) {
    // A listener of ours holds the port, with SO_REUSEPORT: the server's listeners would share
    // the port with it (same user) if the first of them set SO_REUSEPORT too; it must not.
    auto holder = TcpListener::bind(SocketAddr::any_v4(0), {.reuse_port = true});
    ASSERT_TRUE(holder) << holder.error().message();
    const std::string port = std::to_string(holder->local_addr()->port());
    int err[2];
    ASSERT_EQ(::pipe2(err, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
    std::string backend = backend_name(GetParam());
    const char* argv[] = {HTTP_SERVER_BIN, port.c_str(),    "--workers", "2",
                          "--backend",     backend.c_str(), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(::posix_spawn(&pid, HTTP_SERVER_BIN, &fa, nullptr, const_cast<char**>(argv), environ),
              0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(err[1]);
    // Its stderr until it exits (end of file); a server that listens instead is killed.
    std::string text;
    char buf[256];
    pollfd pfd{err[0], POLLIN, 0};
    bool ended = false;
    while (!ended && ::poll(&pfd, 1, 20000) == 1) {
        const ssize_t n = ::read(err[0], buf, sizeof buf);
        if (n > 0)
            text.append(buf, static_cast<std::size_t>(n));
        else
            ended = true;
    }
    ::close(err[0]);
    if (!ended) ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(ended) << "http_server did not exit: it shares a port another socket holds";
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 1) << text;
    EXPECT_NE(text.find("cannot listen on 0.0.0.0:" + port), std::string::npos) << text;
    EXPECT_NE(text.find("another process or socket holds the port"), std::string::npos) << text;
}

/// http_server with `args` (and --backend), started; its port once it says it is listening.
struct ServerProcess {
    test::Process p;
    std::uint16_t port = 0;
    ServerProcess(const std::string& backend, std::vector<std::string> args)
        : p([&] {
            args.insert(args.begin(), {HTTP_SERVER_BIN, "0", "--backend", backend});
            return args;
        }()) {
        if (p.wait_for("listening on") && p.wait_for("\n")) {
            const std::size_t at = p.out().find("0.0.0.0:");
            if (at != std::string::npos)
                port = static_cast<std::uint16_t>(std::stoi(p.out().substr(at + 8)));
        }
    }
    /// SIGTERM, then its exit (a server that does not stop is killed: exit_code 128 + 9).
    test::ProcessResult stop() {
        p.signal(SIGTERM);
        return p.finish(std::chrono::seconds(30));
    }
};

TEST_P(HttpServerProcessTest, AFifoInTheRootIsRefusedAndTheWorkerKeepsServing) {
    // Opening a FIFO for reading waits for a writer: done on the worker, it would freeze every
    // connection of the worker, and SIGTERM with them. The server opens without blocking, sees a
    // FIFO (fstat on what it opened) and answers 403; a socket file cannot be opened (404).
    WebRoot web;
    ASSERT_EQ(::mkfifo((web.dir / "www" / "pipe").c_str(), 0644), 0) << std::strerror(errno);
    ServerProcess server(backend_name(GetParam()), {"--root", web.root()});
    ASSERT_NE(server.port, 0) << server.p.err();
    run([](std::uint16_t port) -> Task<void> {
        auto c = co_await connect(port);
        for (int i = 0; i < 2; ++i) {
            co_await c->send("GET /pipe HTTP/1.1\r\nHost: t\r\n\r\n");
            Response r = co_await c->read();
            EXPECT_EQ(r.status, 403);
            co_await c->send("GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
            Response file = co_await c->read();
            EXPECT_EQ(file.body, "static hello\n");
        }
        auto other = co_await connect(port); // another connection on the same (only) worker
        co_await other->send("HEAD /pipe HTTP/1.1\r\nHost: t\r\n\r\n"); // (a length, no body)
        Response fifo = co_await other->read(true);
        EXPECT_EQ(fifo.status, 403);
        co_await other->send("HEAD /none HTTP/1.1\r\nHost: t\r\n\r\n");
        Response none = co_await other->read(true);
        EXPECT_EQ(none.status, 404);
        co_await other->send(kGet);
        Response fixed = co_await other->read();
        EXPECT_EQ(fixed.body, "Hello, World!");
    }(server.port));
    const test::ProcessResult r = server.stop();
    EXPECT_FALSE(r.timed_out) << "http_server did not stop on SIGTERM";
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

GALAY_INSTANTIATE_BACKENDS(HttpServerProcessTest);
#endif
