// tls_echo_raw: the hand-written floor for TLS echo, in the manner of `openssl s_server`: raw
// OpenSSL 3 over epoll, one thread, non-blocking SSL_read/SSL_write on the sockets (OpenSSL's
// socket BIO). bench/studies/tls.py measures galay's TLS-terminating proxy against it.
//
//   tls_echo_raw [port] --cert CHAIN.pem --key KEY.pem [--upstream HOST:PORT]
//
// Without --upstream it echoes: what SSL_read returns is written back with SSL_write. With
// --upstream it is a TLS-terminating proxy, the shape of galay's copy_bidirectional(tls, tcp):
// every accepted TLS connection gets its own plain TCP connection to the upstream, the
// plaintext of the one is written to the other, both ways.
//
// Level-triggered epoll; each connection keeps one buffer per direction (64 KiB, the plaintext
// of up to four records read at once) and stops reading a side while the buffer it fills is not
// yet written out (back-pressure). An OpenSSL call that wants the other readiness (SSL_read
// wanting to write, say) waits for that readiness. TLS 1.2 minimum as for any server, the
// cipher suites OpenSSL's defaults, session tickets on (OpenSSL's default). SIGINT/SIGTERM:
// exit 0 with a one-line summary on stderr. Exit 1: the certificate, key or port cannot be used;
// 2: bad flags.
#include "common.hpp"
#include "tls_common.hpp"

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr size_t kBuf = 64 * 1024;
constexpr int kMaxEvents = 1024;
constexpr uint64_t kUpstream = uint64_t{1} << 32; // epoll tag: the upstream side of a slot

[[noreturn]] void usage(const std::string& what) {
    std::exit(galay::tools::print_exit(galay::tools::usage_error("tls_echo_raw", what)));
}

[[noreturn]] void die_ssl(const std::string& what) {
    baseline::die_ssl("tls_echo_raw", what);
}

struct Pending {
    std::vector<char> data;
    size_t off = 0, len = 0;
    bool empty() const { return off == len; }
    void reset() { off = len = 0; }
};

struct Slot {
    bool open = false, handshaking = true;
    int ufd = -1;
    SSL* ssl = nullptr;
    uint32_t cev = 0, uev = 0;                      // registered with epoll
    uint32_t hs_wait = 0, rd_wait = 0, wr_wait = 0; // the readiness an SSL call waits for (0: none)
    bool u_in = true, u_out = true;                 // the upstream may be readable / writable
    Pending to_up, to_client;                       // plaintext on its way
};

class Server {
public:
    Server(SSL_CTX* ctx, int lfd, int sfd, const sockaddr_storage* up, socklen_t uplen)
        : ctx_(ctx)
        , lfd_(lfd)
        , sfd_(sfd)
        , up_(up)
        , uplen_(uplen) {
        ep_ = epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) baseline::die("epoll_create1");
        add(lfd_, EPOLLIN, static_cast<uint64_t>(lfd_));
        add(sfd_, EPOLLIN, static_cast<uint64_t>(sfd_));
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
                const uint64_t tag = evs[k].data.u64;
                const int fd = static_cast<int>(tag & 0xffffffff);
                if (fd == lfd_)
                    accept_all();
                else if (fd == sfd_)
                    return;
                else
                    event(fd, (tag & kUpstream) != 0, evs[k].events);
            }
        }
    }

    void summary() const {
        std::fprintf(stderr, "tls_echo_raw: %lu connections, %lu handshakes, %lu failed\n",
                     accepted_, handshakes_, failed_);
    }

private:
    SSL_CTX* ctx_;
    int lfd_, sfd_, ep_ = -1;
    const sockaddr_storage* up_;
    socklen_t uplen_;
    std::vector<Slot> slots_; // indexed by the client fd
    unsigned long accepted_ = 0, handshakes_ = 0, failed_ = 0;

    void add(int fd, uint32_t events, uint64_t tag) {
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = tag;
        if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) baseline::die("epoll_ctl");
    }

    void set(int fd, uint32_t& now, uint32_t want, uint64_t tag) {
        if (want == now) return;
        epoll_event ev{};
        ev.events = want;
        ev.data.u64 = tag;
        if (epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev) != 0) baseline::die("epoll_ctl");
        now = want;
    }

    void accept_all() {
        for (;;) {
            const int fd = accept4(lfd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno != EAGAIN && errno != ECONNABORTED)
                    std::fprintf(stderr, "tls_echo_raw: accept: %s\n", std::strerror(errno));
                return;
            }
            ++accepted_;
            if (static_cast<size_t>(fd) >= slots_.size())
                slots_.resize(static_cast<size_t>(fd) + 1);
            Slot& s = slots_[static_cast<size_t>(fd)];
            s = Slot{};
            s.open = true;
            s.ssl = SSL_new(ctx_);
            if (!s.ssl) die_ssl("SSL_new");
            SSL_set_fd(s.ssl, fd);
            s.to_client.data.resize(kBuf);
            if (up_) {
                s.to_up.data.resize(kBuf);
                s.ufd = ::socket(up_->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (s.ufd < 0) baseline::die("socket");
                int one = 1;
                setsockopt(s.ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                if (::connect(s.ufd, reinterpret_cast<const sockaddr*>(up_), uplen_) != 0 &&
                    errno != EINPROGRESS) {
                    std::fprintf(stderr, "tls_echo_raw: connect to the upstream: %s\n",
                                 std::strerror(errno));
                    close_slot(fd, true);
                    continue;
                }
                s.uev = EPOLLIN;
                add(s.ufd, s.uev, kUpstream | static_cast<uint64_t>(fd));
            }
            s.cev = EPOLLIN;
            add(fd, s.cev, static_cast<uint64_t>(fd));
            pump(fd);
        }
    }

    void close_slot(int fd, bool failed) {
        Slot& s = slots_[static_cast<size_t>(fd)];
        if (failed) ++failed_;
        if (s.ssl) SSL_free(s.ssl);
        if (s.ufd >= 0) ::close(s.ufd);
        ::close(fd);
        s = Slot{};
    }

    static void wake(uint32_t& wait, uint32_t events) {
        if (wait & events) wait = 0;
    }

    void event(int fd, bool upstream, uint32_t events) {
        Slot& s = slots_[static_cast<size_t>(fd)];
        if (!s.open) return;
        if (events & (EPOLLERR | EPOLLHUP)) events |= EPOLLIN | EPOLLOUT;
        if (upstream) {
            s.u_in = s.u_in || (events & EPOLLIN);
            s.u_out = s.u_out || (events & EPOLLOUT);
        } else {
            wake(s.hs_wait, events);
            wake(s.rd_wait, events);
            wake(s.wr_wait, events);
        }
        pump(fd);
    }

    /// What an SSL call that returned `rc` waits for, or 0 when the connection is done
    /// (closed by the peer or failed).
    static uint32_t want_of(SSL* ssl, int rc) {
        switch (SSL_get_error(ssl, rc)) {
        case SSL_ERROR_WANT_READ:
            return EPOLLIN;
        case SSL_ERROR_WANT_WRITE:
            return EPOLLOUT;
        default:
            return 0;
        }
    }

    void pump(int fd) {
        Slot& s = slots_[static_cast<size_t>(fd)];
        if (s.handshaking) {
            if (s.hs_wait) return;
            const int rc = SSL_accept(s.ssl);
            if (rc != 1) {
                s.hs_wait = want_of(s.ssl, rc);
                ERR_clear_error();
                if (!s.hs_wait) return close_slot(fd, true);
                return interest(fd);
            }
            ++handshakes_;
            s.handshaking = false;
        }
        const bool proxy = s.ufd >= 0;
        Pending& in = proxy ? s.to_up : s.to_client;
        for (bool progress = true; progress;) {
            progress = false;
            // TLS in: records until the buffer is full or nothing more is there.
            if (in.empty() && s.rd_wait == 0) {
                in.reset();
                while (in.len < in.data.size()) {
                    size_t n = 0;
                    const int rc =
                        SSL_read_ex(s.ssl, in.data.data() + in.len, in.data.size() - in.len, &n);
                    if (rc != 1) {
                        s.rd_wait = want_of(s.ssl, rc);
                        ERR_clear_error();
                        if (!s.rd_wait) return close_slot(fd, false); // peer done (or broken)
                        break;
                    }
                    in.len += n;
                }
                progress = progress || !in.empty();
            }
            if (proxy && !s.to_up.empty() && s.u_out) {
                const ssize_t n = ::send(s.ufd, s.to_up.data.data() + s.to_up.off,
                                         s.to_up.len - s.to_up.off, MSG_NOSIGNAL);
                if (n > 0) {
                    s.to_up.off += static_cast<size_t>(n);
                    progress = true;
                } else if (errno == EAGAIN) {
                    s.u_out = false;
                } else {
                    return close_slot(fd, true);
                }
            }
            if (proxy && s.to_client.empty() && s.u_in) {
                s.to_client.reset();
                const ssize_t n =
                    ::recv(s.ufd, s.to_client.data.data(), s.to_client.data.size(), 0);
                if (n > 0) {
                    s.to_client.len = static_cast<size_t>(n);
                    progress = true;
                } else if (n == 0) {
                    SSL_shutdown(s.ssl); // the upstream is done: close_notify, then close
                    return close_slot(fd, false);
                } else if (errno == EAGAIN) {
                    s.u_in = false;
                } else {
                    return close_slot(fd, true);
                }
            }
            while (!s.to_client.empty() && s.wr_wait == 0) {
                size_t n = 0;
                const int rc = SSL_write_ex(s.ssl, s.to_client.data.data() + s.to_client.off,
                                            s.to_client.len - s.to_client.off, &n);
                if (rc != 1) {
                    s.wr_wait = want_of(s.ssl, rc);
                    ERR_clear_error();
                    if (!s.wr_wait) return close_slot(fd, true);
                    break;
                }
                s.to_client.off += n;
                progress = true;
            }
        }
        interest(fd);
    }

    void interest(int fd) {
        Slot& s = slots_[static_cast<size_t>(fd)];
        set(fd, s.cev, s.hs_wait | s.rd_wait | s.wr_wait, static_cast<uint64_t>(fd));
        if (s.ufd >= 0) {
            const uint32_t up = (!s.to_up.empty() && !s.u_out ? uint32_t{EPOLLOUT} : 0u) |
                                (s.to_client.empty() && !s.u_in ? uint32_t{EPOLLIN} : 0u);
            set(s.ufd, s.uev, up, kUpstream | static_cast<uint64_t>(fd));
        }
    }
};

} // namespace

int main(int argc, char** argv) {
    namespace tools = galay::tools;
    std::string cert, key, upstream, port_text = "8443";
    cli::App app{"A hand-written epoll + OpenSSL TLS echo server or TLS-terminating relay (the "
                 "baseline for tls_proxy).",
                 "tls_echo_raw"};
    baseline::tls_server_options(app, port_text, cert, key);
    app.add_option("--upstream", upstream, "relay to HOST:PORT instead of echoing")
        ->check(tools::non_empty());
    if (auto code = tools::parse_command_line(app, argc, argv, "tls_echo_raw")) return *code;
    const char* port_arg = port_text.c_str();

    sockaddr_storage up{};
    socklen_t uplen = 0;
    if (!upstream.empty()) {
        const size_t colon = upstream.rfind(':');
        if (colon == std::string::npos) usage("--upstream: '" + upstream + "' is not HOST:PORT");
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        const std::string host = upstream.substr(0, colon), port = upstream.substr(colon + 1);
        if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
            std::fprintf(stderr, "tls_echo_raw: --upstream %s: %s\n", upstream.c_str(),
                         gai_strerror(rc));
            return 1;
        }
        std::memcpy(&up, res->ai_addr, res->ai_addrlen);
        uplen = res->ai_addrlen;
        freeaddrinfo(res);
    }
    SSL_CTX* ctx = baseline::tls_server_context("tls_echo_raw", cert, key,
                                                SSL_MODE_ENABLE_PARTIAL_WRITE |
                                                    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    baseline::raise_nofile();
    const int sfd = baseline::make_signalfd();
    int bound = 0;
    const int lfd = baseline::make_listener(baseline::parse_port(port_arg), &bound);
    baseline::announce(bound, upstream.empty() ? "tls_echo_raw" : "tls_echo_raw, proxy");
    Server server(ctx, lfd, sfd, upstream.empty() ? nullptr : &up, uplen);
    server.run();
    server.summary();
    SSL_CTX_free(ctx);
    return 0;
}
