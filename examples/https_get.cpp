// An HTTPS client on galay-kernel: fetch a URL, verify the server's certificate and host name,
// print the body on stdout.
//
//   https_get https://example.org/            (the system trust store)
//   https_get https://localhost:8443/ --ca ca.pem [--timeout SECONDS]
//
// Exit 0: a 2xx answer, its body printed. Exit 1: the connection, the certificate (untrusted,
// expired, another host's: the reason is printed), or a non-2xx answer. Exit 2: bad arguments.
#include <galay/galay.hpp>
#include <galay/tls/stream.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace std::chrono_literals;

namespace {

constexpr const char* kUsage = "usage: https_get https://HOST[:PORT][/PATH] [--ca FILE] "
                               "[--timeout SECONDS]\n";

struct Url {
    std::string host, path;
    std::uint16_t port = 443;
};

bool parse_url(std::string_view text, Url& url) {
    if (!text.starts_with("https://")) return false;
    text.remove_prefix(8);
    const std::size_t slash = text.find('/');
    std::string_view authority = text.substr(0, slash);
    url.path = slash == std::string_view::npos ? "/" : std::string(text.substr(slash));
    if (authority.starts_with('[')) { // [v6]:port
        const std::size_t close = authority.find(']');
        if (close == std::string_view::npos) return false;
        url.host = authority.substr(1, close - 1);
        authority.remove_prefix(close + 1);
    } else {
        const std::size_t colon = authority.rfind(':');
        url.host = authority.substr(0, colon);
        authority = colon == std::string_view::npos ? "" : authority.substr(colon);
    }
    if (!authority.empty()) {
        if (authority[0] != ':' || authority.size() < 2) return false;
        const long port = std::strtol(std::string(authority.substr(1)).c_str(), nullptr, 10);
        if (port <= 0 || port > 65535) return false;
        url.port = static_cast<std::uint16_t>(port);
    }
    return !url.host.empty();
}

/// The body of a chunked answer; false when it is malformed.
bool dechunk(std::string_view in, std::string& out) {
    for (;;) {
        const std::size_t eol = in.find("\r\n");
        if (eol == std::string_view::npos) return false;
        char* end = nullptr;
        const std::string size_text(in.substr(0, eol));
        const unsigned long size = std::strtoul(size_text.c_str(), &end, 16);
        if (end == size_text.c_str()) return false;
        in.remove_prefix(eol + 2);
        if (size == 0) return true;
        if (in.size() < size + 2) return false;
        out.append(in.substr(0, size));
        in.remove_prefix(size + 2);
    }
}

int fail(const std::string& what) {
    std::fprintf(stderr, "https_get: %s\n", what.c_str());
    return 1;
}

galay::Task<int> fetch(const Url& url, const galay::tls::Context& ctx, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    auto tcp = co_await galay::TcpStream::connect(url.host, url.port, limit);
    if (!tcp)
        co_return fail("connect " + url.host + ":" + std::to_string(url.port) + ": " +
                       tcp.error().message());
    galay::tls::Stream tls = galay::tls::Stream::client(ctx, std::move(*tcp), url.host);
    auto hs = co_await tls.handshake().deadline(deadline);
    if (!hs)
        co_return fail(
            std::string(tls.last_error().empty() ? hs.error().message() : tls.last_error()));
    const std::string request = "GET " + url.path + " HTTP/1.1\r\nHost: " + url.host +
                                "\r\nUser-Agent: galay-https_get\r\nAccept: */*\r\n"
                                "Connection: close\r\n\r\n";
    auto sent = co_await tls.send_all(request).deadline(deadline);
    if (!sent) co_return fail("send: " + sent.error().message());
    std::string answer;
    char buf[16384];
    bool truncated = false;
    for (;;) {
        auto n = co_await tls.recv(buf).deadline(deadline);
        if (!n && n.error() == galay::tls::errc::truncated) {
            truncated = true; // judged below: fine when the length says the body is whole
            break;
        }
        if (!n) co_return fail("receive: " + n.error().message());
        if (*n == 0) break;
        answer.append(buf, *n);
    }
    (void)co_await tls.shutdown().timeout(1s);
    const std::size_t head_end = answer.find("\r\n\r\n");
    if (!answer.starts_with("HTTP/1.") || head_end == std::string::npos || answer.size() < 12)
        co_return fail("not an HTTP answer");
    const int status = std::atoi(answer.c_str() + 9);
    std::string head = answer.substr(0, head_end + 2);
    for (char& c : head)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view body = std::string_view(answer).substr(head_end + 4);
    std::string decoded;
    if (head.find("\r\ntransfer-encoding: chunked\r\n") != std::string::npos) {
        if (!dechunk(body, decoded)) co_return fail("malformed chunked body");
        body = decoded;
    } else if (const std::size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
        const unsigned long long length = std::strtoull(head.c_str() + at + 17, nullptr, 10);
        if (body.size() < length)
            co_return fail("the body ended after " + std::to_string(body.size()) + " of " +
                           std::to_string(length) + " bytes");
        body = body.substr(0, length);
    } else if (truncated) {
        co_return fail("the connection ended without close_notify: the body may be cut short");
    }
    std::fwrite(body.data(), 1, body.size(), stdout);
    std::fflush(stdout);
    if (status < 200 || status > 299) co_return fail("HTTP status " + std::to_string(status));
    co_return 0;
}

} // namespace

int main(int argc, char** argv) {
    Url url;
    std::string ca;
    long timeout = 30;
    bool have_url = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if ((arg == "--ca" || arg == "--timeout") && i + 1 < argc) {
            if (arg == "--ca") {
                ca = argv[++i];
            } else {
                timeout = std::strtol(argv[++i], nullptr, 10);
                if (timeout <= 0) {
                    std::fprintf(stderr, "https_get: --timeout: a positive number of seconds\n%s",
                                 kUsage);
                    return 2;
                }
            }
        } else if (!have_url && parse_url(arg, url)) {
            have_url = true;
        } else {
            std::fprintf(stderr, "https_get: unexpected argument '%s'\n%s", argv[i], kUsage);
            return 2;
        }
    }
    if (!have_url) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    std::signal(SIGPIPE, SIG_IGN);
    try {
        const galay::tls::Context ctx =
            galay::tls::Context::client({.ca_file = ca, .alpn = {"http/1.1"}});
        return galay::block_on(fetch(url, ctx, std::chrono::seconds(timeout)));
    } catch (const std::exception& e) {
        return fail(e.what());
    }
}
