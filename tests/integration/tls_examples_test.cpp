// The TLS examples as programs, on every backend: https_get against http_server --tls-cert, against
// nginx (when installed) and through tls_proxy; curl against http_server over HTTPS; the errors
// https_get must make clear (wrong host name, untrusted certificate); and https_get against a
// hostile server written here (chunk sizes that are negative or overflow, an endless body with
// and without --max-bytes, its memory while it streams), and a FIFO given as its CA file.
#include "support/process.hpp"
#include "support/tls_pair.hpp"

#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

using namespace galay;
using namespace galay::test;

namespace {

class TlsExamplesTest : public BackendTest {
protected:
    std::string backend() const { return backend_name(GetParam()); }
    std::vector<std::string> with_backend(std::vector<std::string> argv) const {
        argv.insert(argv.begin(), {"env", "GALAY_BACKEND=" + backend()});
        return argv;
    }
};

/// The port in a "... 0.0.0.0:PORT ..." line.
std::uint16_t port_in(const std::string& out) {
    const std::size_t at = out.find("0.0.0.0:");
    return at == std::string::npos ? 0 : static_cast<std::uint16_t>(std::stoi(out.substr(at + 8)));
}

/// http_server --tls-cert/--tls-key on an ephemeral port, stopped (SIGTERM) when destroyed.
struct HttpsServer {
    Process p;
    std::uint16_t port = 0;
    HttpsServer(const std::string& backend, const CertFiles& id)
        : p({HTTP_SERVER_BIN, "0", "--backend", backend, "--tls-cert", id.cert, "--tls-key",
             id.key}) {
        if (p.wait_for("listening on")) p.wait_for("\n");
        port = port_in(p.out());
    }
    ~HttpsServer() {
        p.signal(SIGTERM);
        ProcessResult r = p.finish(std::chrono::seconds(30));
        EXPECT_EQ(r.exit_code, 0) << r.err;
    }
};

std::string url(std::uint16_t port, const std::string& host = "localhost",
                const std::string& path = "/") {
    return "https://" + host + ":" + std::to_string(port) + path;
}

/// Blocking connects until one succeeds (the server is listening) or the deadline passes.
bool wait_listening(std::uint16_t port, std::chrono::seconds deadline = std::chrono::seconds(20)) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (std::chrono::steady_clock::now() < until) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(fd);
        if (ok) return true;
        std::this_thread::yield();
    }
    return false;
}

/// A port free at this moment (for programs that cannot report the port they were given).
std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

TEST_P(TlsExamplesTest, https_get_fetches_from_the_galay_https_server) {
    HttpsServer server(backend(), pki().server());
    ASSERT_NE(server.port, 0) << server.p.err();
    ProcessResult r =
        run_process(with_backend({HTTPS_GET_BIN, url(server.port), "--ca", pki().ca().cert}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "Hello, World!");
    // A missing page: the body, a clear error, exit 1.
    r = run_process(with_backend(
        {HTTPS_GET_BIN, url(server.port, "localhost", "/none"), "--ca", pki().ca().cert}));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("HTTP status 404"), std::string::npos) << r.err;
}

TEST_P(TlsExamplesTest, https_get_refuses_a_wrong_host_or_an_untrusted_certificate) {
    HttpsServer server(backend(), pki().server());
    ASSERT_NE(server.port, 0) << server.p.err();
    ProcessResult wrong_host = run_process(
        with_backend({HTTPS_GET_BIN, url(server.port, "127.0.0.2"), "--ca", pki().ca().cert}));
    EXPECT_EQ(wrong_host.exit_code, 1);
    EXPECT_NE(wrong_host.err.find("certificate verify failed: IP address mismatch"),
              std::string::npos)
        << wrong_host.err;
    EXPECT_EQ(wrong_host.out, "");
    // Without --ca the test CA is unknown (SSL_CERT_FILE pointed at another CA: the self-signed).
    ProcessResult untrusted =
        run_process({"env", "GALAY_BACKEND=" + backend(),
                     "SSL_CERT_FILE=" + pki().self_signed().cert, HTTPS_GET_BIN, url(server.port)});
    EXPECT_EQ(untrusted.exit_code, 1);
    EXPECT_NE(untrusted.err.find("certificate verify failed: unable to get local issuer"),
              std::string::npos)
        << untrusted.err;
    // And SSL_CERT_FILE is how the system store is replaced: the test CA there is trusted.
    ProcessResult trusted =
        run_process({"env", "GALAY_BACKEND=" + backend(), "SSL_CERT_FILE=" + pki().ca().cert,
                     HTTPS_GET_BIN, url(server.port)});
    EXPECT_EQ(trusted.exit_code, 0) << trusted.err;
    ProcessResult usage = run_process({HTTPS_GET_BIN, "http://plain/"});
    EXPECT_EQ(usage.exit_code, 2);
    EXPECT_EQ(usage.err,
              "https_get: error: url: 'http://plain/': not an https:// URL (see --help)\n");
}

TEST_P(TlsExamplesTest, http_server_refuses_a_key_that_does_not_match_its_certificate) {
    ProcessResult r = run_process({HTTP_SERVER_BIN, "0", "--tls-cert", pki().server().cert,
                                   "--tls-key", pki().self_signed().key});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("key values mismatch"), std::string::npos) << r.err;
}

TEST_P(TlsExamplesTest, curl_fetches_from_the_galay_https_server) {
    if (run_process({"curl", "--version"}).exit_code != 0)
        GTEST_SKIP() << "SKIP: curl is not installed";
    HttpsServer server(backend(), pki().server());
    ASSERT_NE(server.port, 0) << server.p.err();
    ProcessResult r = run_process({"curl", "-sS", "--http1.1", "--cacert", pki().ca().cert, "-w",
                                   " %{http_version} %{http_code}", url(server.port),
                                   url(server.port)}); // two requests, one connection
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "Hello, World! 1.1 200Hello, World! 1.1 200");
}

TEST_P(TlsExamplesTest, https_get_fetches_through_the_tls_proxy) {
    Process plain({HTTP_SERVER_BIN, "0", "--backend", backend()});
    ASSERT_TRUE(plain.wait_for("listening on") && plain.wait_for("\n")) << plain.err();
    const std::uint16_t upstream = port_in(plain.out());
    Process proxy(
        with_backend({TLS_PROXY_BIN, "0", "127.0.0.1:" + std::to_string(upstream), "--tls-cert",
                      pki().server().cert, "--tls-key", pki().server().key}));
    ASSERT_TRUE(proxy.wait_for("tls_proxy: ") && proxy.wait_for("\n")) << proxy.err();
    const std::uint16_t port = port_in(proxy.out());
    ProcessResult r =
        run_process(with_backend({HTTPS_GET_BIN, url(port), "--ca", pki().ca().cert}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "Hello, World!");
    plain.signal(SIGTERM);
    EXPECT_EQ(plain.finish(std::chrono::seconds(30)).exit_code, 0);
}

TEST_P(TlsExamplesTest, https_get_fetches_from_nginx) {
    const std::string nginx = ::access("/usr/sbin/nginx", X_OK) == 0 ? "/usr/sbin/nginx" : "";
    if (nginx.empty()) GTEST_SKIP() << "SKIP: nginx is not installed (Debian: nginx-light)";
    TempDir dir;
    const std::string prefix = dir.path().string();
    // nginx cannot report the port it was given: a free one, tried a few times if taken.
    for (int attempt = 0; attempt < 5; ++attempt) {
        const std::uint16_t port = free_port();
        const std::string user =
            ::geteuid() == 0 ? "user " + std::string(::getpwuid(::geteuid())->pw_name) + ";" : "";
        std::ofstream(prefix + "/nginx.conf")
            << user << "daemon off; master_process off; worker_processes 1;\n"
            << "error_log stderr warn; pid " << prefix << "/nginx.pid;\n"
            << "events { worker_connections 64; }\n"
            << "http { access_log off; client_body_temp_path " << prefix << "/body;\n"
            << "proxy_temp_path " << prefix << "/proxy; fastcgi_temp_path " << prefix
            << "/fcgi; uwsgi_temp_path " << prefix << "/uwsgi; scgi_temp_path " << prefix
            << "/scgi;\n"
            << "server { listen 127.0.0.1:" << port << " ssl; ssl_protocols TLSv1.2 TLSv1.3;\n"
            << "ssl_certificate " << pki().server().cert << "; ssl_certificate_key "
            << pki().server().key << ";\n"
            << "location = / { return 200 \"hello from nginx\"; } } }\n";
        Process server({nginx, "-p", prefix, "-c", prefix + "/nginx.conf"});
        if (!wait_listening(port, std::chrono::seconds(10))) {
            server.signal(SIGTERM);
            ProcessResult gone = server.finish(std::chrono::seconds(10));
            if (gone.err.find("Address already in use") != std::string::npos) continue;
            FAIL() << "nginx did not start: " << gone.err;
        }
        ProcessResult r =
            run_process(with_backend({HTTPS_GET_BIN, url(port), "--ca", pki().ca().cert}));
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, "hello from nginx");
        server.signal(SIGTERM);
        (void)server.finish(std::chrono::seconds(10));
        return;
    }
    FAIL() << "no free port for nginx after 5 attempts";
}

/// A TLS server that answers one request with what the test scripts, over blocking OpenSSL on
/// a thread: `head` then `body`, then (`endless`) `body` again and again until the client goes.
class HostileServer {
public:
    HostileServer(std::string head, std::string body, bool endless = false)
        : head_(std::move(head))
        , body_(std::move(body))
        , endless_(endless) {
        std::signal(SIGPIPE, SIG_IGN); // a write after the client has gone is an error, not death
        ctx_ = SSL_CTX_new(TLS_server_method());
        if (ctx_ == nullptr ||
            SSL_CTX_use_certificate_chain_file(ctx_, pki().server().cert.c_str()) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx_, pki().server().key.c_str(), SSL_FILETYPE_PEM) != 1)
            throw std::runtime_error("hostile server: context");
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 4) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            throw std::runtime_error("hostile server: listen");
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    HostileServer(const HostileServer&) = delete;
    HostileServer& operator=(const HostileServer&) = delete;
    ~HostileServer() {
        ::shutdown(fd_, SHUT_RDWR); // (an accept still waiting returns)
        thread_.join();
        ::close(fd_);
        SSL_CTX_free(ctx_);
    }
    std::uint16_t port() const noexcept { return port_; }

private:
    void serve() {
        const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0) return;
        SSL* ssl = SSL_new(ctx_);
        SSL_set_fd(ssl, conn);
        if (SSL_accept(ssl) == 1) {
            std::string request;
            char buf[4096];
            while (request.find("\r\n\r\n") == std::string::npos) {
                const int n = SSL_read(ssl, buf, sizeof buf);
                if (n <= 0) break;
                request.append(buf, static_cast<std::size_t>(n));
            }
            bool ok = write_all(ssl, head_) && write_all(ssl, body_);
            while (ok && endless_)
                ok = write_all(ssl, body_);
            if (ok) SSL_shutdown(ssl);
        }
        SSL_free(ssl);
        ::close(conn);
    }
    static bool write_all(SSL* ssl, std::string_view data) {
        while (!data.empty()) {
            const int n = SSL_write(ssl, data.data(), static_cast<int>(data.size()));
            if (n <= 0) return false;
            data.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }

    std::string head_, body_;
    bool endless_;
    SSL_CTX* ctx_ = nullptr;
    int fd_ = -1;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

constexpr const char* kChunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

/// One line on stderr (the reason), exit 1.
void expect_one_line_failure(const ProcessResult& r, const std::string& says) {
    EXPECT_TRUE(r.exited) << r.err;
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A chunk size of -2 read by strtoul is 2^64 - 2, and `size + 2` wraps to 0: an 8 KB body would
// come out as 8 MB with exit 0. Sizes are hex digits only, and overflow is an error.
TEST_P(TlsExamplesTest, https_get_refuses_chunk_sizes_that_are_negative_or_overflow) {
    const std::string junk(8192, 'x');
    const std::vector<std::pair<std::string, std::string>> bodies = {
        {"-2\r\n" + junk + "\r\n0\r\n\r\n",
         "malformed chunked body: chunk size is not a hex number"},
        {"10000000000000001\r\n" + junk + "\r\n0\r\n\r\n",
         "malformed chunked body: chunk size '10000000000000001' overflows 64 bits"},
        {"fffffffffffffffe\r\n" + junk, "the chunked body ended before its last chunk"},
        {"0x10\r\n" + junk + "\r\n0\r\n\r\n", "malformed chunked body: malformed chunk extension"},
        {"4\r\nabcdXY\r\n0\r\n\r\n", "malformed chunked body: a chunk is not followed by CRLF"},
    };
    for (const auto& [body, says] : bodies) {
        HostileServer server(kChunkedHead, body);
        ProcessResult r =
            run_process(with_backend({HTTPS_GET_BIN, url(server.port()), "--ca", pki().ca().cert}));
        expect_one_line_failure(r, "https_get: " + says);
        EXPECT_LE(r.out.size(), junk.size()) << says;
    }
    // What is well-formed goes through: extensions (token and quoted), a trailer.
    HostileServer fine(
        kChunkedHead,
        "5;name=value;q=\"a \\\" b\"\r\nhello\r\n0006\r\n world\r\n0\r\nX-T: 1\r\n\r\n");
    ProcessResult r =
        run_process(with_backend({HTTPS_GET_BIN, url(fine.port()), "--ca", pki().ca().cert}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "hello world");
}

TEST_P(TlsExamplesTest, https_get_refuses_a_malformed_head) {
    const std::vector<std::pair<std::string, std::string>> heads = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n", "invalid Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
         "invalid Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
         "invalid Content-Length"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip, chunked\r\n\r\n",
         "invalid Transfer-Encoding"},
        {"HTTP/1.1 2000 OK\r\n\r\n", "malformed status line"},
        {"HTTP/1.1 200 OK\r\nName : value\r\n\r\n", "malformed header field line"},
        {"SSH-2.0-OpenSSH\r\n\r\n", "malformed status line"},
    };
    for (const auto& [head, says] : heads) {
        HostileServer server(head, "hello");
        ProcessResult r =
            run_process(with_backend({HTTPS_GET_BIN, url(server.port()), "--ca", pki().ca().cert}));
        expect_one_line_failure(r, "https_get: malformed answer: " + says);
        EXPECT_EQ(r.out, "") << says;
    }
    // A Content-Length the body does not reach, and one over --max-bytes (refused unread).
    HostileServer short_body("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", "hello");
    expect_one_line_failure(
        run_process(with_backend({HTTPS_GET_BIN, url(short_body.port()), "--ca", pki().ca().cert})),
        "the body ended after 5 of 10 bytes");
    HostileServer long_body("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", "0123456789");
    ProcessResult r = run_process(with_backend(
        {HTTPS_GET_BIN, url(long_body.port()), "--ca", pki().ca().cert, "--max-bytes", "9"}));
    expect_one_line_failure(r, "(Content-Length 10) is larger than --max-bytes 9");
    EXPECT_EQ(r.out, "");
}

TEST_P(TlsExamplesTest, https_get_stops_an_endless_body_at_max_bytes) {
    for (const char* head : {kChunkedHead, "HTTP/1.1 200 OK\r\n\r\n"}) {
        const bool chunked = head == std::string(kChunkedHead);
        HostileServer server(
            head, chunked ? "4000\r\n" + std::string(16384, 'z') + "\r\n" : std::string(16384, 'z'),
            true);
        ProcessResult r = run_process(with_backend({HTTPS_GET_BIN, url(server.port()), "--ca",
                                                    pki().ca().cert, "--max-bytes", "1000000"}));
        expect_one_line_failure(r, "the body is larger than --max-bytes 1000000");
        EXPECT_LE(r.out.size(), 1000000u);
        EXPECT_GT(r.out.size(), 900000u);
        EXPECT_EQ(r.out.find_first_not_of('z'), std::string::npos);
    }
}

/// A line of /proc/<pid>/status in KiB ("VmHWM:  1234 kB" -> 1234), or -1.
long status_kib(pid_t pid, const std::string& field) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
    return -1;
}

// A client that keeps the whole answer in memory grows by ~150 MB/s on an endless body. The body
// streams through one buffer: after the first 8 MiB, the next 120 MiB raise the peak RSS by less
// than 8 MiB. (stdout is a pipe this test reads and counts.)
TEST_P(TlsExamplesTest, https_get_streams_an_endless_body_in_bounded_memory) {
    HostileServer server(kChunkedHead, "4000\r\n" + std::string(16384, 'z') + "\r\n", true);
    int out[2];
    ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<std::string> args = with_backend(
        {HTTPS_GET_BIN, url(server.port()), "--ca", pki().ca().cert, "--timeout", "600"});
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    // Under ASan, freed memory waits in a quarantine (256 MB by default) before it is reused, so
    // the peak would measure the quarantine, not https_get: the child runs without one.
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e)
        if (!std::string_view(*e).starts_with("ASAN_OPTIONS=")) env.emplace_back(*e);
    const char* asan = std::getenv("ASAN_OPTIONS");
    env.push_back(std::string("ASAN_OPTIONS=") + (asan != nullptr ? asan : "") +
                  (asan != nullptr && *asan != '\0' ? ":" : "") +
                  "quarantine_size_mb=0:thread_local_quarantine_size_kb=0");
    std::vector<char*> envp;
    for (std::string& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = -1;
    ASSERT_EQ(::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    // (env execs https_get in the same process: the pid is https_get's once it has run.)
    std::uint64_t got = 0;
    long early = -1;
    char buf[1 << 16];
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (got < (128u << 20)) {
        // Bounded: a https_get that keeps the body to itself fails the test instead of hanging it.
        pollfd p{out[0], POLLIN, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        got += static_cast<std::uint64_t>(n);
        if (early < 0 && got >= (8u << 20)) early = status_kib(pid, "VmHWM");
    }
    const long late = status_kib(pid, "VmHWM");
    ::close(out[0]); // https_get's next write fails: EPIPE
    if (got < (128u << 20)) ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_GE(got, 128u << 20) << "https_get stopped early";
    ASSERT_GT(early, 0);
    EXPECT_LT(late - early, 8 * 1024)
        << "VmHWM " << early << " kB after 8 MiB, " << late << " kB after 128 MiB";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
}

// open() of a FIFO blocks until a writer comes: --ca (or SSL_CERT_FILE) naming one would hang
// https_get before --timeout applies. It is opened without blocking and must be a regular file.
TEST_P(TlsExamplesTest, https_get_refuses_a_fifo_as_its_ca_file) {
    TempDir dir;
    const std::string fifo = (dir.path() / "ca.pem").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    HostileServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", "ok");
    ProcessResult r = run_process(
        with_backend({HTTPS_GET_BIN, url(server.port()), "--ca", fifo, "--timeout", "5"}),
        std::chrono::seconds(60));
    EXPECT_FALSE(r.timed_out);
    expect_one_line_failure(r, "https_get: --ca " + fifo + ": not a regular file");
    r = run_process({"env", "GALAY_BACKEND=" + backend(), "SSL_CERT_FILE=" + fifo, HTTPS_GET_BIN,
                     url(server.port()), "--timeout", "5"},
                    std::chrono::seconds(60));
    EXPECT_FALSE(r.timed_out);
    expect_one_line_failure(r, "https_get: SSL_CERT_FILE=" + fifo + ": not a regular file");
    // (The server's one answer, unused above, goes to a client that trusts it.)
    r = run_process(with_backend({HTTPS_GET_BIN, url(server.port()), "--ca", pki().ca().cert}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ok");
}

} // namespace

GALAY_INSTANTIATE_BACKENDS(TlsExamplesTest);
