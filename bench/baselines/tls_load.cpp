// tls_load: TLS load on raw OpenSSL 3 over epoll, one thread (bench/studies/tls.py's load
// generator).
//
//   tls_load HOST PORT [--mode get|keepalive|echo] [-c N] [-d SECONDS] [--warmup SECONDS]
//   [--resume]
//            [--bytes N] [--plain] [--ca FILE] [--name NAME] [--json] [--mark]
//
// --mode get (the default): new TLS 1.3 connections, -c of them in flight: each connects, does
// the handshake, sends one `GET / HTTP/1.1` with `Connection: close`, reads the response (to the
// end of its Content-Length body), sends close_notify and closes; a new connection takes its
// place at once. --resume offers the newest session ticket the servers handed out (TLS 1.3
// PSK with (EC)DHE: no certificate, no signature); the first connection of a run is a full
// handshake. The figure is handshakes per server CPU-second, so the client's own cost matters
// only as far as it limits the rate: without --ca the chain is not verified (the signature of
// the server's CertificateVerify still is: TLS 1.3 requires it), which leaves an ECDSA verify,
// ~2.5x the server's sign, as the client's largest cost.
//
// --mode keepalive: -c persistent connections, each one GET / (keep-alive) outstanding, the next
// sent when the response is complete (wrk -t1's closed loop); the handshakes happen in the
// warm-up, so the measured window holds requests only. Latency: from the request's write to
// the response's last byte (a log-linear histogram, <1% error).
//
// --mode echo: -c persistent connections, each sends a message of --bytes (byte i is
// 'a' + i % 26), reads the same number of bytes back and compares every one, then sends the next;
// --plain does the same over plain TCP (the proxy without TLS). Reading and writing overlap, so a
// message larger than the socket buffers cannot deadlock.
//
// Measures -d seconds after --warmup seconds (warm-up results not counted); --mark prints the line
// `measuring` on stdout when the measured window begins, so that a harness can read the server's
// CPU at that moment. Prints a one-line
// summary, or with --json one object: {"mode", "connections", "duration_s", "handshakes",
// "resumed", "requests", "bytes", "errors", "error_kinds": {"connect", "handshake", "io",
// "verify"}, "first_error", "negotiated" (version, cipher, group of the first handshake),
// "client_cpu_s", "latency_us": {"count", "min", "mean", "stdev", "max", "p50", "p90", "p95",
// "p99", "p99_9"} (get: connect to response; keepalive: request to response)}: "handshakes" the
// handshakes completed in the measured window, "requests" the complete responses (get) or echoed
// messages (echo). Exit 0; 1 when no connection succeeded at all or an echo was wrong; 2: bad
// flags.
#include "common.hpp"
#include "galay_cli.hpp"
#include "load_common.hpp"
#include "measure/histogram.hpp" // the suite's latency histogram (no galay code)

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <cstdint>
#include <ctime>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace {

enum class Mode { get, keepalive, echo };

struct Options {
    std::string host, port;
    Mode mode = Mode::get;
    int conns = 100;
    double duration = 5, warmup = 1;
    bool resume = false, plain = false, json = false, mark = false;
    size_t bytes = 16384;
    std::string ca, name = "localhost";
};

/// The options, or the exit code of --help or a usage error (printed).
std::expected<Options, int> parse(int argc, char** argv) {
    namespace tools = galay::tools;
    Options o;
    std::string mode = "get";
    cli::App app{"A TLS load generator: new handshakes, keep-alive requests or echoes against "
                 "HOST PORT.",
                 "tls_load"};
    app.add_option("HOST", o.host, "server host")->required()->check(tools::non_empty());
    app.add_option("PORT", o.port, "server port")->required()->check(tools::whole(1, 65535));
    app.add_option("--mode", mode, "get (a handshake per request), keepalive or echo")
        ->check(cli::IsMember({"get", "keepalive", "echo"}))
        ->capture_default_str();
    app.add_option("-c", o.conns, "connections")
        ->check(tools::whole(1, 100000))
        ->capture_default_str();
    app.add_option("-d", o.duration, "measured seconds")
        ->check(tools::seconds(0.1, 86400))
        ->capture_default_str();
    app.add_option("--warmup", o.warmup, "seconds before measuring")
        ->check(tools::seconds(0, 86400))
        ->capture_default_str();
    app.add_option("--bytes", o.bytes, "bytes per echo")
        ->check(tools::whole(1, 1 << 30))
        ->capture_default_str();
    auto* resume = app.add_flag("--resume", o.resume, "resume TLS sessions");
    app.add_flag("--plain", o.plain, "plain TCP (with --mode echo)")->excludes(resume);
    app.add_flag("--json", o.json, "print one JSON object");
    app.add_flag("--mark", o.mark, "print a mark line when the measured window starts");
    app.add_option("--ca", o.ca, "CA certificate (PEM) to trust")->check(tools::non_empty());
    app.add_option("--name", o.name, "server name to verify")
        ->check(tools::non_empty())
        ->capture_default_str();
    if (auto code = tools::parse_command_line(app, argc, argv, "tls_load"))
        return std::unexpected(*code);
    o.mode = mode == "echo" ? Mode::echo : mode == "keepalive" ? Mode::keepalive : Mode::get;
    if (o.plain && o.mode != Mode::echo)
        return std::unexpected(
            tools::print_exit(tools::usage_error("tls_load", "--plain: is for --mode echo only")));
    return o;
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double cpu_s() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

std::string ssl_errors() {
    std::string out;
    while (const unsigned long e = ERR_get_error()) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        if (!out.empty()) out += "; ";
        out += buf;
    }
    return out;
}

struct Counters {
    uint64_t handshakes = 0, resumed = 0, requests = 0, bytes = 0;
    uint64_t connect = 0, handshake = 0, io = 0, verify = 0;
    uint64_t errors() const { return connect + handshake + io + verify; }
};

enum class Phase { connecting, handshaking, running };

struct Conn {
    int fd = -1;
    SSL* ssl = nullptr;
    Phase phase = Phase::connecting;
    size_t sent = 0, got = 0; // of the current request or message
    std::string in;           // get, keepalive: the response so far
    size_t need = SIZE_MAX;   // get, keepalive: the response's length once its head is parsed
    uint32_t events = 0;      // registered with epoll
    int64_t t0 = 0;           // get: connect; keepalive: request sent (latency from there)
};

class Load {
public:
    explicit Load(const Options& o)
        : o_(o)
        , conns_(static_cast<size_t>(o.conns)) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        if (const int rc = getaddrinfo(o.host.c_str(), o.port.c_str(), &hints, &res); rc != 0) {
            std::fprintf(stderr, "tls_load: %s:%s: %s\n", o.host.c_str(), o.port.c_str(),
                         gai_strerror(rc));
            std::exit(1);
        }
        std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
        addrlen_ = res->ai_addrlen;
        freeaddrinfo(res);
        ep_ = epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) baseline::die("epoll_create1");
        request_ = "GET / HTTP/1.1\r\nHost: " + o.name + "\r\n" +
                   (o.mode == Mode::get ? "Connection: close\r\n" : "") + "\r\n";
        message_.resize(o.bytes);
        for (size_t i = 0; i < o.bytes; ++i)
            message_[i] = static_cast<char>('a' + i % 26);
        buf_.resize(std::max<size_t>(o.bytes, 64 * 1024));
        if (!o.plain) make_context();
    }

    int run() {
        // With --resume, one connection first runs until the server's ticket is in: otherwise
        // the first -c connections are all full handshakes, and a slow server (a sanitizer
        // build) is still finishing them well into the measured window.
        size_t first = 0;
        if (o_.resume && !o_.plain) {
            open(0);
            first = 1;
            const double give_up = now_s() + kPrimeSeconds;
            // (a server that sends no ticket has answered one request without one: go on)
            while (session_ == nullptr && c_.requests == 0 && now_s() < give_up)
                if (const int rc = turn(100); rc != 0) return rc;
        }
        const double start = now_s();
        for (size_t i = first; i < conns_.size(); ++i)
            open(i);
        // Persistent connections (keepalive, echo) are measured once all of them are up, so that
        // no handshake falls in the window; at most kMaxWait seconds past the warm-up.
        constexpr double kMaxWait = 30;
        const double measure_at = start + o_.warmup;
        double end = 0;
        bool measuring = false; // (set on the first turn when there is no warm-up)
        double cpu0 = cpu_s(), t0 = start;
        for (;;) {
            const double t = now_s();
            const bool all_up = o_.mode == Mode::get ||
                                static_cast<size_t>(running_) == conns_.size() ||
                                t >= measure_at + kMaxWait;
            if (!measuring && t >= measure_at && all_up) {
                measuring = true;
                end = t + o_.duration;
                c_ = Counters{};
                first_error_.clear();
                latency_.reset();
                cpu0 = cpu_s();
                t0 = t;
                if (o_.mark) {
                    std::printf("measuring\n");
                    std::fflush(stdout);
                }
            }
            if (measuring && t >= end) break;
            const int wait_ms =
                static_cast<int>((std::max(measuring ? end : measure_at, t) - t) * 1000) + 1;
            if (const int rc = turn(wait_ms); rc != 0) return rc;
        }
        report(now_s() - t0, cpu_s() - cpu0);
        if (!ever_ok_ && failures_ > 0) {
            std::fprintf(stderr, "tls_load: no connection to %s:%s succeeded: %s\n",
                         o_.host.c_str(), o_.port.c_str(), first_error_.c_str());
            return 1;
        }
        return 0;
    }

private:
    const Options& o_;
    std::vector<Conn> conns_;
    sockaddr_storage addr_{};
    socklen_t addrlen_ = 0;
    int ep_ = -1;
    SSL_CTX* ctx_ = nullptr;
    SSL_SESSION* session_ = nullptr; // newest ticket (--resume)
    std::string request_, message_;
    std::vector<char> buf_;
    Counters c_;
    std::string first_error_;
    std::string negotiated_; // version, cipher and group of the first handshake
    // ns: get from connect, keepalive from request, to response
    galay::tools::LatencyHistogram latency_;
    bool wrong_echo_ = false;
    long running_ = 0;      // connections past their handshake (or connect, --plain)
    bool ever_ok_ = false;  // one connection made it (else a run of failures is fatal)
    uint64_t failures_ = 0; // warm-up included
    std::vector<size_t> reopen_;

    static Load* self(SSL* ssl) {
        return static_cast<Load*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
    }

    static int keep_session(SSL* ssl, SSL_SESSION* s) {
        Load* l = self(ssl);
        if (l->session_) SSL_SESSION_free(l->session_);
        l->session_ = s;
        return 1; // we own the reference now
    }

    void make_context() {
        ctx_ = SSL_CTX_new(TLS_client_method());
        if (!ctx_) die_ssl("SSL_CTX_new");
        SSL_CTX_set_app_data(ctx_, this);
        SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION);
        SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        if (!o_.ca.empty()) {
            if (SSL_CTX_load_verify_locations(ctx_, o_.ca.c_str(), nullptr) != 1)
                die_ssl(("--ca " + o_.ca).c_str());
            SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
        } else {
            // No chain building at all: not part of what the server spends.
            SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
            SSL_CTX_set_cert_verify_callback(
                ctx_, [](X509_STORE_CTX*, void*) { return 1; }, nullptr);
        }
        if (o_.resume) {
            SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_CLIENT |
                                                     SSL_SESS_CACHE_NO_INTERNAL_STORE);
            SSL_CTX_sess_set_new_cb(ctx_, keep_session);
        } else {
            SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
            SSL_CTX_set_options(ctx_, SSL_OP_NO_TICKET);
        }
    }

    [[noreturn]] static void die_ssl(const char* what) {
        std::fprintf(stderr, "tls_load: %s: %s\n", what, ssl_errors().c_str());
        std::exit(1);
    }

    /// Counts the error, closes the connection; a new one takes its place after this batch of
    /// events (not at once: a connect that fails at once would recurse).
    void fail(size_t i, uint64_t& kind, const std::string& why) {
        ++kind;
        ++failures_;
        if (first_error_.empty()) first_error_ = why;
        close_conn(i);
        reopen_.push_back(i);
    }

    void close_conn(size_t i) {
        Conn& c = conns_[i];
        if (c.phase == Phase::running) --running_;
        if (c.ssl) {
            SSL_free(c.ssl);
            c.ssl = nullptr;
        }
        if (c.fd >= 0) ::close(c.fd);
        c = Conn{};
    }

    void watch(size_t i, uint32_t events) {
        Conn& c = conns_[i];
        if (events == c.events) return;
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = i;
        if (epoll_ctl(ep_, c.events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &ev) != 0)
            baseline::die("epoll_ctl");
        c.events = events;
    }

    static constexpr double kPrimeSeconds = 10; // for the first ticket (--resume)
    std::vector<epoll_event> evs_ = std::vector<epoll_event>(1024);

    /// One wait for events (at most `wait_ms`), their steps and the reopening of what closed;
    /// non-zero (the exit status) when the run must stop.
    int turn(int wait_ms) {
        const int n = epoll_wait(ep_, evs_.data(), static_cast<int>(evs_.size()), wait_ms);
        if (n < 0 && errno != EINTR) baseline::die("epoll_wait");
        for (int k = 0; k < n; ++k) {
            const size_t i = evs_[static_cast<size_t>(k)].data.u64;
            step(i, evs_[static_cast<size_t>(k)].events);
        }
        std::vector<size_t> todo;
        todo.swap(reopen_);
        for (const size_t i : todo)
            open(i);
        if (!ever_ok_ && failures_ > 1000) {
            std::fprintf(stderr, "tls_load: no connection to %s:%s succeeds: %s\n", o_.host.c_str(),
                         o_.port.c_str(), first_error_.c_str());
            return 1;
        }
        if (wrong_echo_) {
            std::fprintf(stderr, "tls_load: %s\n", first_error_.c_str());
            return 1;
        }
        return 0;
    }

    void open(size_t i) {
        Conn& c = conns_[i];
        c.fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c.fd < 0) baseline::die("socket");
        int one = 1;
        setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (::connect(c.fd, reinterpret_cast<sockaddr*>(&addr_), addrlen_) != 0 &&
            errno != EINPROGRESS) {
            fail(i, c_.connect, std::string("connect: ") + std::strerror(errno));
            return;
        }
        c.phase = Phase::connecting;
        c.t0 = baseline::now_ns();
        watch(i, EPOLLOUT);
    }

    /// Sets the interest from what OpenSSL wants after a call that returned `rc`; false when
    /// the connection failed (already replaced).
    bool wants(size_t i, int rc, uint64_t& kind, const char* what) {
        Conn& c = conns_[i];
        const int err = SSL_get_error(c.ssl, rc);
        if (err == SSL_ERROR_WANT_READ) {
            watch(i, EPOLLIN);
            return true;
        }
        if (err == SSL_ERROR_WANT_WRITE) {
            watch(i, EPOLLOUT);
            return true;
        }
        const long v = SSL_get_verify_result(c.ssl);
        std::string why = std::string(what) + ": ";
        if (v != X509_V_OK) {
            fail(i, c_.verify, why + X509_verify_cert_error_string(v));
            return false;
        }
        const std::string ssl = ssl_errors();
        if (err == SSL_ERROR_ZERO_RETURN)
            why += "closed by the server";
        else if (err == SSL_ERROR_SYSCALL)
            why += errno ? std::strerror(errno) : "connection closed without close_notify";
        else
            why += ssl.empty() ? "SSL error " + std::to_string(err) : ssl;
        fail(i, kind, why);
        return false;
    }

    void step(size_t i, uint32_t events) {
        Conn& c = conns_[i];
        if (c.phase == Phase::connecting) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0 || (events & EPOLLERR)) {
                fail(i, c_.connect, std::string("connect: ") + std::strerror(err ? err : EIO));
                return;
            }
            if (o_.plain) {
                ever_ok_ = true;
                c.phase = Phase::running;
                ++running_;
                watch(i, EPOLLIN | EPOLLOUT);
                return run_plain(i);
            }
            c.ssl = SSL_new(ctx_);
            if (!c.ssl) die_ssl("SSL_new");
            SSL_set_fd(c.ssl, c.fd);
            SSL_set_tlsext_host_name(c.ssl, o_.name.c_str());
            if (!o_.ca.empty()) SSL_set1_host(c.ssl, o_.name.c_str());
            if (session_) SSL_set_session(c.ssl, session_);
            c.phase = Phase::handshaking;
        }
        if (o_.plain) return run_plain(i);
        if (c.phase == Phase::handshaking) {
            const int rc = SSL_connect(c.ssl);
            if (rc != 1) {
                wants(i, rc, c_.handshake, "handshake");
                return;
            }
            ++c_.handshakes;
            ever_ok_ = true;
            if (negotiated_.empty()) {
                const char* group = SSL_group_to_name(c.ssl, SSL_get_negotiated_group(c.ssl));
                negotiated_ = std::string(SSL_get_version(c.ssl)) + " " +
                              SSL_CIPHER_get_name(SSL_get_current_cipher(c.ssl)) + " " +
                              (group ? group : "?");
            }
            if (SSL_session_reused(c.ssl)) ++c_.resumed;
            c.phase = Phase::running;
            ++running_;
            if (o_.mode == Mode::keepalive) c.t0 = baseline::now_ns();
        }
        if (o_.mode != Mode::echo)
            run_http(i);
        else
            run_echo(i);
    }

    /// get and keepalive: send the request, read the response to the end of its body; then
    /// get closes (a new connection takes its place), keepalive sends the next request.
    void run_http(size_t i) {
        Conn& c = conns_[i];
        for (;;) {
            while (c.sent < request_.size()) {
                size_t n = 0;
                const int rc =
                    SSL_write_ex(c.ssl, request_.data() + c.sent, request_.size() - c.sent, &n);
                if (rc != 1) {
                    wants(i, rc, c_.io, "send");
                    return;
                }
                c.sent += n;
            }
            for (;;) {
                size_t n = 0;
                const int rc = SSL_read_ex(c.ssl, buf_.data(), buf_.size(), &n);
                if (rc != 1) {
                    wants(i, rc, c_.io, "response");
                    return;
                }
                c.in.append(buf_.data(), n);
                if (c.need == SIZE_MAX) parse_head(i);
                if (c.need == 0) return; // parse_head failed the connection
                if (c.in.size() >= c.need) break;
            }
            const int64_t now = baseline::now_ns();
            latency_.record(static_cast<uint64_t>(now - c.t0));
            ++c_.requests;
            c_.bytes += c.need;
            if (o_.mode == Mode::get) {
                SSL_shutdown(c.ssl); // close_notify, not waiting for the server's
                close_conn(i);
                reopen_.push_back(i);
                return;
            }
            if (c.in.size() > c.need) {
                fail(i, c_.io, "response: bytes after the response (none was asked for)");
                return;
            }
            c.in.clear();
            c.need = SIZE_MAX;
            c.sent = 0;
            c.t0 = now;
        }
    }

    void parse_head(size_t i) {
        Conn& c = conns_[i];
        const size_t end = c.in.find("\r\n\r\n");
        if (end == std::string::npos) return;
        if (c.in.compare(0, 12, "HTTP/1.1 200") != 0) {
            c.need = 0;
            fail(i, c_.io, "response: " + c.in.substr(0, c.in.find("\r\n")));
            return;
        }
        size_t length = 0;
        bool found = false;
        for (size_t p = c.in.find("\r\n"); p < end; p = c.in.find("\r\n", p + 2)) {
            if (strncasecmp(c.in.c_str() + p + 2, "content-length:", 15) == 0) {
                length = std::strtoull(c.in.c_str() + p + 17, nullptr, 10);
                found = true;
            }
        }
        if (!found) {
            c.need = 0;
            fail(i, c_.io, "response without Content-Length");
            return;
        }
        c.need = end + 4 + length;
    }

    bool check_echo(size_t i, const char* data, size_t n) {
        Conn& c = conns_[i];
        for (size_t k = 0; k < n; ++k) {
            if (data[k] != message_[(c.got + k) % message_.size()]) {
                first_error_ = "wrong echo at byte " + std::to_string(c.got + k) + " of " +
                               std::to_string(message_.size());
                wrong_echo_ = true;
                return false;
            }
        }
        c.got += n;
        if (c.got == message_.size()) {
            ++c_.requests;
            c_.bytes += message_.size();
            c.got = 0;
            c.sent = 0;
        }
        return true;
    }

    void run_echo(size_t i) {
        Conn& c = conns_[i];
        // Write what can be written of the current message, then read what is there; a message
        // is sent only once the previous one is all back.
        for (;;) {
            bool progress = false;
            if (c.sent < message_.size()) {
                size_t n = 0;
                const int rc =
                    SSL_write_ex(c.ssl, message_.data() + c.sent, message_.size() - c.sent, &n);
                if (rc == 1) {
                    c.sent += n;
                    progress = true;
                } else if (SSL_get_error(c.ssl, rc) != SSL_ERROR_WANT_WRITE) {
                    wants(i, rc, c_.io, "send");
                    return;
                }
            }
            size_t n = 0;
            const int rc = SSL_read_ex(c.ssl, buf_.data(), buf_.size(), &n);
            if (rc == 1) {
                if (!check_echo(i, buf_.data(), n)) return;
                progress = true;
            } else if (SSL_get_error(c.ssl, rc) != SSL_ERROR_WANT_READ) {
                wants(i, rc, c_.io, "echo");
                return;
            }
            if (!progress) break;
        }
        watch(i, c.sent < message_.size() ? EPOLLIN | EPOLLOUT : EPOLLIN);
    }

    void run_plain(size_t i) {
        Conn& c = conns_[i];
        for (;;) {
            bool progress = false;
            if (c.sent < message_.size()) {
                const ssize_t n =
                    ::send(c.fd, message_.data() + c.sent, message_.size() - c.sent, MSG_NOSIGNAL);
                if (n > 0) {
                    c.sent += static_cast<size_t>(n);
                    progress = true;
                } else if (errno != EAGAIN) {
                    return fail(i, c_.io, std::string("send: ") + std::strerror(errno));
                }
            }
            const ssize_t n = ::recv(c.fd, buf_.data(), buf_.size(), 0);
            if (n > 0) {
                if (!check_echo(i, buf_.data(), static_cast<size_t>(n))) return;
                progress = true;
            } else if (n == 0) {
                return fail(i, c_.io, "echo: connection closed by the server");
            } else if (errno != EAGAIN) {
                return fail(i, c_.io, std::string("echo: ") + std::strerror(errno));
            }
            if (!progress) break;
        }
        watch(i, c.sent < message_.size() ? EPOLLIN | EPOLLOUT : EPOLLIN);
    }

    void report(double seconds, double cpu) {
        const char* mode = o_.mode == Mode::get         ? "get"
                           : o_.mode == Mode::keepalive ? "keepalive"
                                                        : "echo";
        if (o_.json) {
            std::string err = first_error_;
            for (size_t p = 0; (p = err.find_first_of("\"\\", p)) != std::string::npos; p += 2)
                err.insert(p, 1, '\\');
            std::printf("{\"mode\": \"%s\", \"tls\": %s, \"resume\": %s, \"connections\": %d, "
                        "\"duration_s\": %.6f, \"handshakes\": %llu, \"resumed\": %llu, "
                        "\"requests\": %llu, \"bytes\": %llu, \"errors\": %llu, "
                        "\"error_kinds\": {\"connect\": %llu, \"handshake\": %llu, \"io\": %llu, "
                        "\"verify\": %llu}, \"first_error\": \"%s\", \"negotiated\": \"%s\", "
                        "\"client_cpu_s\": %.6f, \"latency_us\": %s}\n",
                        mode, o_.plain ? "false" : "true", o_.resume ? "true" : "false", o_.conns,
                        seconds, ull(c_.handshakes), ull(c_.resumed), ull(c_.requests),
                        ull(c_.bytes), ull(c_.errors()), ull(c_.connect), ull(c_.handshake),
                        ull(c_.io), ull(c_.verify), err.c_str(), negotiated_.c_str(), cpu,
                        latency_json().c_str());
        } else {
            std::printf("tls_load %s: %llu handshakes (%llu resumed), %llu requests, %.1f MB in "
                        "%.2f s (%.0f/s); %llu errors%s%s; client CPU %.2f s\n",
                        mode, ull(c_.handshakes), ull(c_.resumed), ull(c_.requests),
                        static_cast<double>(c_.bytes) / 1e6, seconds,
                        static_cast<double>(c_.requests) / seconds, ull(c_.errors()),
                        first_error_.empty() ? "" : ", first: ", first_error_.c_str(), cpu);
        }
        std::fflush(stdout);
    }

    /// The latencies of the measured window in microseconds (wrk's keys).
    std::string latency_json() const {
        const auto& h = latency_;
        char out[512];
        std::snprintf(out, sizeof out,
                      "{\"count\": %llu, \"min\": %.1f, \"mean\": %.1f, \"stdev\": %.1f, "
                      "\"max\": %.1f, \"p50\": %.1f, \"p90\": %.1f, \"p95\": %.1f, "
                      "\"p99\": %.1f, \"p99_9\": %.1f}",
                      ull(h.count()), h.min_ns() / 1e3, h.mean_ns() / 1e3, h.stddev_ns() / 1e3,
                      h.max_ns() / 1e3, h.percentile_ns(0.50) / 1e3, h.percentile_ns(0.90) / 1e3,
                      h.percentile_ns(0.95) / 1e3, h.percentile_ns(0.99) / 1e3,
                      h.percentile_ns(0.999) / 1e3);
        return out;
    }

    static unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }
};

} // namespace

int main(int argc, char** argv) {
    const auto parsed = parse(argc, argv);
    if (!parsed) return parsed.error();
    const Options o = *parsed;
    baseline::raise_nofile();
    std::signal(SIGPIPE, SIG_IGN);
    Load load(o);
    return load.run();
}
