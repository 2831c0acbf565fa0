// An HTTP endpoint that answers with a PostgreSQL query: the whole path of a small real service,
// on a galay Runtime (one pool of libpq connections per worker, examples/pg).
//   ./pg_http --dsn DSN [--port P] [--workers N] [--conns N] [--timeout MS] [--backend B]
//   curl 'http://127.0.0.1:8080/sum?a=1&b=2'        -> 3      (SELECT $1::int + $2::int)
// First line on stdout, once it accepts: "pg_http: listening on http://127.0.0.1:PORT". Answers:
// 200 with the value; 400 when the server refuses the query (a bad number: its message); 404,
// 405; 503 when the database cannot answer (down, timed out). Stops on SIGINT/SIGTERM. Exit
// code: 0, 1 when the pools cannot connect at start or the port is taken, 2 for a bad argument.
#include "galay_cli_backend.hpp"
#include "pg_pool.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Options {
    std::string dsn;
    int port = 8080, workers = 1, conns = 4;
    long timeout_ms = 5000;
    galay::Backend backend = galay::Backend::automatic;
};

std::vector<std::optional<pg::Pool>> pools; // one per worker, used on its thread only

/// The value of `name` in a query string ("a=1&b=2"), if there.
std::optional<std::string_view> query_arg(std::string_view qs, std::string_view name) {
    while (!qs.empty()) {
        const auto amp = qs.find('&');
        const std::string_view kv = qs.substr(0, amp);
        const auto eq = kv.find('=');
        if (kv.substr(0, eq) == name) return eq == kv.npos ? "" : kv.substr(eq + 1);
        qs = amp == qs.npos ? "" : qs.substr(amp + 1);
    }
    return std::nullopt;
}

std::string response(int status, const char* reason, const std::string& body, bool keep) {
    return "HTTP/1.1 " + std::to_string(status) + " " + reason +
           "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
           (keep ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n") + body;
}

/// The answer to one request line ("GET /sum?a=1&b=2 HTTP/1.1").
galay::Task<std::string> answer(std::string_view line, bool keep) {
    const auto sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == line.npos || sp2 <= sp1)
        co_return response(400, "Bad Request", "bad request\n", false);
    const std::string_view method = line.substr(0, sp1),
                           target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const auto q = target.find('?');
    if (target.substr(0, q) != "/sum")
        co_return response(404, "Not Found", "try /sum?a=1&b=2\n", keep);
    if (method != "GET") co_return response(405, "Method Not Allowed", "GET only\n", keep);
    const std::string_view qs = q == target.npos ? "" : target.substr(q + 1);
    const auto a = query_arg(qs, "a"), b = query_arg(qs, "b");
    if (!a || !b) co_return response(400, "Bad Request", "need a and b\n", keep);
    pg::Pool& pool = *pools[static_cast<std::size_t>(galay::this_worker())];
    auto r = co_await pool.query("SELECT $1::int + $2::int", *a, *b);
    if (r) co_return response(200, "OK", std::string(r->get(0, 0)) + "\n", keep);
    const std::string why =
        std::string(pg::kind_name(r.error().kind)) + ": " + r.error().message + "\n";
    if (r.error().kind == pg::ErrorKind::server) co_return response(400, "Bad Request", why, keep);
    co_return response(503, "Service Unavailable", why, keep);
}

/// One HTTP/1.1 connection: requests without bodies, one after the other (keep-alive).
galay::Task<void> serve_http(galay::TcpStream conn) {
    using namespace std::chrono_literals;
    std::string in;
    char buf[4096];
    for (;;) {
        std::size_t end;
        while ((end = in.find("\r\n\r\n")) == std::string::npos) {
            if (in.size() > 16 * 1024) {
                (void)co_await conn.send_all(
                    response(431, "Request Header Fields Too Large", "", false));
                co_return;
            }
            auto n = co_await conn.recv(buf).timeout(60s);
            if (!n || *n == 0) co_return;
            in.append(buf, *n);
        }
        const std::string head = in.substr(0, end);
        in.erase(0, end + 4);
        std::string lower = head;
        for (char& c : lower)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const bool keep = lower.find("http/1.1") != std::string::npos &&
                          lower.find("connection: close") == std::string::npos;
        const std::string out =
            co_await answer(std::string_view(head).substr(0, head.find("\r\n")), keep);
        auto sent = co_await conn.send_all(out); // (into a variable: the g++ 12 note)
        if (!sent || !keep) co_return;
    }
}

galay::Task<std::optional<pg::Error>> open_pool(const Options& o, std::size_t worker) {
    pg::Options opts{.conninfo = o.dsn,
                     .connections = o.conns,
                     .query_timeout = std::chrono::milliseconds(o.timeout_ms)};
    auto p = co_await pg::Pool::open(std::move(opts));
    if (!p) co_return p.error();
    pools[worker].emplace(std::move(*p));
    co_return std::nullopt;
}

galay::Task<void> close_pool(std::size_t worker) {
    pools[worker].reset();
    co_return;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    cli::App app{"Serves GET /sum?a=INT&b=INT on 127.0.0.1 with PostgreSQL's SELECT $1::int + "
                 "$2::int, through a pool of libpq connections per worker.",
                 "pg_http"};
    app.add_option("--dsn", o.dsn, "libpq connection string or URI")
        ->required()
        ->check(galay::tools::non_empty());
    app.add_option("--port", o.port, "TCP port on 127.0.0.1 (0: any free port)")
        ->check(galay::tools::whole(0, 65535))
        ->capture_default_str();
    app.add_option("--workers", o.workers, "worker threads")
        ->check(galay::tools::whole(1, 256))
        ->capture_default_str();
    app.add_option("--conns", o.conns, "libpq connections per worker")
        ->check(galay::tools::whole(1, 1000))
        ->capture_default_str();
    app.add_option("--timeout", o.timeout_ms, "per query, milliseconds")
        ->check(galay::tools::whole(1, 3'600'000))
        ->capture_default_str();
    galay::tools::add_backend_flag(app, &o.backend);
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "pg_http")) return *code;
    auto stop = galay::signal({SIGINT, SIGTERM});
    galay::Runtime rt(
        {.workers = static_cast<unsigned>(o.workers), .scheduler = {.backend = o.backend}});
    pools.resize(rt.size());
    for (unsigned w = 0; w < rt.size(); ++w)
        if (auto err = rt.spawn_on(w, open_pool(o, w)).join()) {
            std::fprintf(stderr, "pg_http: %s: %s\n", pg::kind_name(err->kind),
                         err->message.c_str());
            return 1;
        }
    auto server = galay::serve(
        rt, galay::SocketAddr::loopback_v4(static_cast<std::uint16_t>(o.port)), serve_http);
    if (!server) {
        std::fprintf(stderr, "pg_http: port %d: %s\n", o.port, server.error().message().c_str());
        return 1;
    }
    std::printf("pg_http: listening on http://%s (%u workers, %s)\n",
                server->local_addr().to_string().c_str(), rt.size(), rt.backend_name());
    std::fflush(stdout);
    (void)rt.block_on(galay::as_task(std::move(stop)));
    server->stop();
    for (unsigned w = 0; w < rt.size(); ++w)
        rt.spawn_on(w, close_pool(w)).join();
    return 0;
}
