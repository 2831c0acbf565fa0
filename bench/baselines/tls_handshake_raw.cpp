// tls_handshake_raw: the hand-written floor for new TLS connections: raw OpenSSL 3 on plain
// non-blocking sockets (OpenSSL's socket BIO) and epoll, one thread, doing only what a
// connection of bench/studies/tls.py's handshake part needs: SSL_accept, one request read,
// one fixed answer, close_notify, close. What it spends per handshake is OpenSSL's own price with
// the least a server can add, the figure galay, nginx and Go are read against.
//
//   tls_handshake_raw [port] --cert CHAIN.pem --key KEY.pem [--tickets N]
//
// Every request gets `HTTP/1.1 200 OK` with `Hello, World!` and `Connection: close` once its
// head has arrived (the bytes up to the blank line), then SSL_shutdown and close(2): the
// connection is not kept. Level-triggered epoll; an OpenSSL call that wants the other readiness
// waits for it. TLS 1.2 minimum as for any server, OpenSSL's default suites, and --tickets
// session tickets after a full TLS 1.3 handshake (default 1, as galay's servers and Go's send;
// OpenSSL's own default, which nginx keeps, is 2).
// SIGINT/SIGTERM: exit 0 with a one-line summary on stderr. Exit 1: the certificate, key or
// port cannot be used; 2: bad flags.
#include "common.hpp"
#include "tls_common.hpp"

#include <sys/epoll.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int kMaxEvents = 1024;
constexpr std::string_view kAnswer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                     "Content-Length: 13\r\nConnection: close\r\n\r\n"
                                     "Hello, World!";

[[noreturn]] void die_ssl(const std::string& what) {
    baseline::die_ssl("tls_handshake_raw", what);
}

enum class Phase : std::uint8_t { handshake, request, answer, shutdown };

struct Slot {
    SSL* ssl = nullptr;
    Phase phase = Phase::handshake;
    std::uint32_t events = 0; // registered with epoll
    int tail = 0;             // bytes of "\r\n\r\n" matched so far
    std::size_t sent = 0;     // bytes of the answer SSL_write has taken
};

class Server {
public:
    Server(SSL_CTX* ctx, int lfd, int sfd)
        : ctx_(ctx)
        , lfd_(lfd)
        , sfd_(sfd) {
        ep_ = epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) baseline::die("epoll_create1");
        add(lfd_, EPOLLIN);
        add(sfd_, EPOLLIN);
    }

    void run() {
        epoll_event evs[kMaxEvents];
        for (;;) {
            const int n = epoll_wait(ep_, evs, kMaxEvents, -1);
            if (n < 0) {
                if (errno == EINTR) continue;
                baseline::die("epoll_wait");
            }
            for (int k = 0; k < n; ++k) {
                const int fd = evs[k].data.fd;
                if (fd == lfd_)
                    accept_all();
                else if (fd == sfd_)
                    return;
                else
                    step(fd);
            }
        }
    }

    void summary() const {
        std::fprintf(stderr,
                     "tls_handshake_raw: %lu connections, %lu handshakes (%lu resumed), %lu "
                     "answered, %lu ended before the answer\n",
                     accepted_, handshakes_, resumed_, answered_, failed_);
    }

private:
    SSL_CTX* ctx_;
    int lfd_, sfd_, ep_ = -1;
    std::vector<Slot> slots_; // indexed by the connection's fd
    unsigned long accepted_ = 0, handshakes_ = 0, resumed_ = 0, answered_ = 0, failed_ = 0;

    void add(int fd, std::uint32_t events) {
        epoll_event ev{};
        ev.events = events;
        ev.data.fd = fd;
        if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) baseline::die("epoll_ctl");
    }

    void accept_all() {
        for (;;) {
            const int fd = accept4(lfd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno != EAGAIN && errno != ECONNABORTED)
                    std::fprintf(stderr, "tls_handshake_raw: accept: %s\n", std::strerror(errno));
                return;
            }
            ++accepted_;
            if (static_cast<size_t>(fd) >= slots_.size()) slots_.resize(fd + 1024);
            Slot& s = slots_[fd];
            s = Slot{};
            s.ssl = SSL_new(ctx_);
            if (s.ssl == nullptr || SSL_set_fd(s.ssl, fd) != 1) die_ssl("SSL_new");
            SSL_set_accept_state(s.ssl);
            s.events = EPOLLIN;
            add(fd, EPOLLIN);
            step(fd); // (the ClientHello may be there already)
        }
    }

    void finish(int fd, bool ok) {
        Slot& s = slots_[fd];
        if (!ok) ++failed_;
        SSL_free(s.ssl);
        s.ssl = nullptr;
        ::close(fd); // (epoll forgets it)
    }

    /// Wait for the readiness the last OpenSSL call asked for; false: a real failure.
    bool wait_for(int fd, int r) {
        Slot& s = slots_[fd];
        const int e = SSL_get_error(s.ssl, r);
        std::uint32_t want;
        if (e == SSL_ERROR_WANT_READ)
            want = EPOLLIN;
        else if (e == SSL_ERROR_WANT_WRITE)
            want = EPOLLOUT;
        else
            return false;
        if (want != s.events) {
            epoll_event ev{};
            ev.events = want;
            ev.data.fd = fd;
            if (epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev) != 0) baseline::die("epoll_ctl");
            s.events = want;
        }
        return true;
    }

    void step(int fd) {
        Slot& s = slots_[fd];
        if (s.ssl == nullptr) return; // (closed earlier in the same batch of events)
        ERR_clear_error();
        if (s.phase == Phase::handshake) {
            const int r = SSL_do_handshake(s.ssl);
            if (r != 1) {
                if (!wait_for(fd, r)) finish(fd, false);
                return;
            }
            ++handshakes_;
            if (SSL_session_reused(s.ssl) == 1) ++resumed_;
            s.phase = Phase::request;
        }
        if (s.phase == Phase::request) {
            char buf[4096];
            for (;;) {
                const int r = SSL_read(s.ssl, buf, sizeof buf);
                if (r <= 0) {
                    if (!wait_for(fd, r)) finish(fd, false); // (EOF before a request: failed)
                    return;
                }
                if (end_of_head(s, std::string_view(buf, static_cast<size_t>(r)))) break;
            }
            s.phase = Phase::answer;
        }
        if (s.phase == Phase::answer) {
            while (s.sent < kAnswer.size()) {
                const int r = SSL_write(s.ssl, kAnswer.data() + s.sent,
                                        static_cast<int>(kAnswer.size() - s.sent));
                if (r <= 0) {
                    if (!wait_for(fd, r)) finish(fd, false);
                    return;
                }
                s.sent += static_cast<size_t>(r);
            }
            ++answered_;
            s.phase = Phase::shutdown;
        }
        const int r = SSL_shutdown(s.ssl); // close_notify; the peer's is not waited for
        if (r < 0 && SSL_get_error(s.ssl, r) == SSL_ERROR_WANT_WRITE && wait_for(fd, r)) return;
        finish(fd, true);
    }

    /// Whether `in` completes the request head (a blank line), across reads.
    static bool end_of_head(Slot& s, std::string_view in) {
        static constexpr char kEnd[] = "\r\n\r\n";
        for (char ch : in) {
            s.tail = ch == kEnd[s.tail] ? s.tail + 1 : (ch == '\r' ? 1 : 0);
            if (s.tail == 4) return true;
        }
        return false;
    }
};

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string cert, key, port_text = "8443";
    cli::App app{"A hand-written epoll + OpenSSL server of new TLS connections: handshake, one "
                 "request, a fixed answer, close (the floor for galay's handshakes).",
                 "tls_handshake_raw"};
    baseline::tls_server_options(app, port_text, cert, key);
    unsigned tickets = 1;
    app.add_option("--tickets", tickets, "session tickets after a full TLS 1.3 handshake")
        ->check(tools::whole(0, 16))
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "tls_handshake_raw")) return *code;
    SSL_CTX* ctx = baseline::tls_server_context("tls_handshake_raw", cert, key, 0);
    SSL_CTX_set_num_tickets(ctx, tickets);
    baseline::raise_nofile();
    const int sfd = baseline::make_signalfd();
    int bound = 0;
    const int lfd = baseline::make_listener(baseline::parse_port(port_text.c_str()), &bound);
    baseline::announce(bound, "tls_handshake_raw");
    Server server(ctx, lfd, sfd);
    server.run();
    server.summary();
    SSL_CTX_free(ctx);
    return 0;
}
