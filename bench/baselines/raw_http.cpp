// raw_http [port]: the hand-written epoll HTTP/1.1 responder galay's http_server is measured
// against (bench/studies/http_servers.py): the floor for server CPU per request.
//
// One thread, non-blocking sockets, level-triggered epoll, one read per readiness event into a
// shared buffer. It parses only as much HTTP as it must to frame keep-alive and pipelined
// requests: it finds the blank line ending each request head (a 4-state matcher carried across
// reads, so a head split over two reads costs no copy), and answers every head with the same
// fixed response (the one http_server gives GET /: Server, Date formatted once a second,
// Content-Type, Content-Length, "Hello, World!"), all answers of one read in one write. It does
// not look at the method, the path, Connection or a body; that is what makes it a floor.
//
// A short write parks the rest in a per-connection buffer and switches the connection to
// EPOLLOUT until it is gone (reads stop meanwhile: back-pressure), as raw_epoll does.
// SIGINT/SIGTERM: exit 0 with a one-line summary on stderr.
#include "epoll_server.hpp"
#include "galay_cli.hpp"

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

namespace {

constexpr size_t kReadBuf = 64 * 1024;
constexpr char kBody[] = "Hello, World!";

struct Conn {
    std::string pending; // unsent answer bytes (allocated on the first short write only)
    size_t pending_off = 0;
    uint8_t matched = 0; // how much of "\r\n\r\n" the bytes so far end with
    bool open = false;
};

class Answer {
public:
    /// The fixed answer, its Date refreshed when the second changes.
    const std::string& get() {
        timespec ts{};
        clock_gettime(CLOCK_REALTIME_COARSE, &ts);
        if (ts.tv_sec != second_) {
            second_ = ts.tv_sec;
            std::tm tm{};
            gmtime_r(&ts.tv_sec, &tm);
            char date[64];
            std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
            text_ = std::string("HTTP/1.1 200 OK\r\nServer: raw\r\nDate: ") + date +
                    "\r\nContent-Type: text/plain\r\nContent-Length: " +
                    std::to_string(sizeof kBody - 1) + "\r\n\r\n" + kBody;
        }
        return text_;
    }

private:
    std::time_t second_ = -1;
    std::string text_;
};

struct Server : baseline::EpollServer<Conn> {
    unsigned long requests = 0, short_writes = 0; // printed at exit, with accepted
    Answer answer;
    std::string out; // the answers of one read
    alignas(64) char buf[kReadBuf];

    void close_conn(int fd) {
        Conn& c = conns[fd];
        c.open = false;
        c.pending.clear();
        c.pending_off = 0;
        c.matched = 0;
        ::close(fd);
    }

    void accept_all() {
        for (;;) {
            int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
                baseline::die("accept4");
            }
            if (static_cast<size_t>(fd) >= conns.size()) conns.resize(fd + 1024);
            conns[fd].open = true;
            ++accepted;
            ctl(EPOLL_CTL_ADD, fd, EPOLLIN);
        }
    }

    /// Number of request heads ending in data[0, n), continuing c.matched.
    static size_t count_heads(Conn& c, const char* data, size_t n) {
        static constexpr char kEnd[] = "\r\n\r\n";
        size_t heads = 0;
        uint8_t m = c.matched;
        for (size_t i = 0; i < n; ++i) {
            const char ch = data[i];
            if (ch == kEnd[m]) {
                if (++m == 4) {
                    ++heads;
                    m = 0;
                }
            } else {
                m = ch == '\r' ? 1 : 0;
            }
        }
        c.matched = m;
        return heads;
    }

    bool flush(int fd, Conn& c) {
        ssize_t w = ::write(fd, c.pending.data() + c.pending_off, c.pending.size() - c.pending_off);
        if (w < 0) {
            if (errno == EAGAIN) return true;
            close_conn(fd);
            return false;
        }
        c.pending_off += static_cast<size_t>(w);
        if (c.pending_off == c.pending.size()) {
            c.pending.clear();
            c.pending_off = 0;
            ctl(EPOLL_CTL_MOD, fd, EPOLLIN);
        }
        return true;
    }

    void on_readable(int fd, Conn& c) {
        ssize_t r = ::read(fd, buf, kReadBuf);
        if (r <= 0) {
            if (r < 0 && errno == EAGAIN) return;
            close_conn(fd);
            return;
        }
        const size_t heads = count_heads(c, buf, static_cast<size_t>(r));
        if (heads == 0) return;
        requests += heads;
        const std::string& a = answer.get();
        const char* data = a.data();
        size_t len = a.size();
        if (heads > 1) { // pipelined: all answers in one write
            out.clear();
            for (size_t i = 0; i < heads; ++i)
                out += a;
            data = out.data();
            len = out.size();
        }
        ssize_t w = ::write(fd, data, len);
        if (w == static_cast<ssize_t>(len)) return;
        if (w < 0) {
            if (errno != EAGAIN) {
                close_conn(fd);
                return;
            }
            w = 0;
        }
        ++short_writes;
        c.pending.assign(data + w, len - static_cast<size_t>(w));
        c.pending_off = 0;
        ctl(EPOLL_CTL_MOD, fd, EPOLLOUT);
    }

    void on_event(int fd, uint32_t) {
        Conn& c = conns[fd];
        if (!c.open) return;
        if (!c.pending.empty()) {
            flush(fd, c);
            return;
        }
        on_readable(fd, c);
    }
};

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string port_text = "8080";
    cli::App app{"A hand-written epoll HTTP/1.1 server answering every request with a fixed body "
                 "(the baseline for http_server).",
                 "raw_http"};
    app.add_option("port", port_text, "TCP port (0: any free port)")
        ->check(tools::whole(0, 65535))
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "raw_http")) return *code;
    auto srv = std::make_unique<Server>();
    srv->open(port_text.c_str(), "raw_http");
    Server::run(*srv);
    std::fprintf(stderr, "raw_http: %lu connections, %lu requests, %lu short writes\n",
                 srv->accepted, srv->requests, srv->short_writes);
    return 0;
}
