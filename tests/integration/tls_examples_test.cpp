// The TLS examples as programs, on every backend: https_get against http_server --tls-cert, against
// nginx (when installed) and through tls_proxy; curl against http_server over HTTPS; the errors
// https_get must make clear (wrong host name, untrusted certificate).
#include "support/process.hpp"
#include "support/tls_pair.hpp"

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
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
    EXPECT_NE(usage.err.find("usage"), std::string::npos);
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

} // namespace

GALAY_INSTANTIATE_BACKENDS(TlsExamplesTest);
