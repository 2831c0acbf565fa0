// An HTTPS client on galay-kernel: fetch a URL, verify the server's certificate and host name,
// write the body to stdout as it arrives.
//
//   https_get https://example.org/            (the system trust store)
//   https_get https://localhost:8443/ --ca ca.pem [--timeout SECONDS] [--max-bytes N]
//
// The server is not trusted: the response head and a chunked body are parsed strictly
// (http_response.hpp), and any framing error ends the run with one line. The body goes to stdout
// through one 16 KiB buffer as it arrives, so an endless body costs time, not memory; --timeout
// bounds the whole exchange and --max-bytes the body. The CA file (--ca, and SSL_CERT_FILE for
// the system store) is opened without blocking and must be a regular file: a FIFO there would
// otherwise hang the program in open() before --timeout applies. Writing to stdout blocks while
// the reader of stdout does not read.
//
// Exit 0: a 2xx answer, its body written. Exit 1: the connection, the certificate (untrusted,
// expired, another host's: the reason is printed), a malformed answer, a body over --max-bytes,
// or a non-2xx answer (its body is written too). Exit 2: bad arguments.
#include "galay_cli.hpp"
#include "http_response.hpp"

#include <galay/galay.hpp>
#include <galay/tls/stream.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

using namespace std::chrono_literals;
namespace hr = http_response;
namespace tools = galay::tools;

namespace {

constexpr std::size_t kMaxCaFile = 16 << 20; // a trust store with every public CA is ~200 KiB

struct Options {
    hr::Url url;
    std::string ca;
    double timeout = 30;
    std::optional<std::uint64_t> max_bytes;
};

int fail(const std::string& what) {
    std::fprintf(stderr, "https_get: %s\n", what.c_str());
    return 1;
}

/// `path` opened for reading without blocking (O_NONBLOCK: a FIFO or a device opens at once),
/// then checked on the opened descriptor to be a regular file. The descriptor, or why not.
std::expected<int, std::string> open_regular(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return std::unexpected(path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return std::unexpected(path + ": not a regular file");
    }
    return fd;
}

/// The contents of the regular file `path`, at most kMaxCaFile bytes.
std::expected<std::string, std::string> read_regular(const std::string& path) {
    auto fd = open_regular(path);
    if (!fd) return std::unexpected(fd.error());
    std::string text;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(*fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || text.size() + static_cast<std::size_t>(n) > kMaxCaFile) {
            const int err = errno;
            ::close(*fd);
            if (n < 0) return std::unexpected(path + ": " + std::strerror(err));
            if (n > 0) return std::unexpected(path + ": larger than 16 MiB");
            return text;
        }
        text.append(buf, static_cast<std::size_t>(n));
    }
}

/// The body's way out: stdout, written as it comes, at most --max-bytes.
class BodyOut {
public:
    explicit BodyOut(std::optional<std::uint64_t> max) noexcept
        : max_(max) {}

    /// Write `data`; the error line when it would pass --max-bytes or stdout fails.
    std::optional<std::string> write(std::string_view data) {
        if (max_ && data.size() > *max_ - written_)
            return "the body is larger than --max-bytes " + std::to_string(*max_);
        written_ += data.size();
        while (!data.empty()) {
            const ssize_t n = ::write(STDOUT_FILENO, data.data(), data.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return std::string("stdout: ") + std::strerror(errno);
            data.remove_prefix(static_cast<std::size_t>(n));
        }
        return std::nullopt;
    }

    std::uint64_t written() const noexcept { return written_; }

private:
    std::optional<std::uint64_t> max_;
    std::uint64_t written_ = 0;
};

/// The receiving side of one exchange: bytes not yet parsed, and the next receive.
struct Reader {
    galay::tls::Stream& tls;
    std::chrono::steady_clock::time_point deadline;
    double timeout;
    std::string pending;    // received, not yet parsed (bounded: see fetch)
    bool eof = false;       // the server closed (with close_notify, or without: truncated)
    bool truncated = false; // ... without close_notify
    std::optional<std::string> error;

    /// Receive once more into `pending`; false at the end of the stream or on an error.
    galay::Task<bool> more() {
        char buf[16384];
        const galay::Result<std::size_t> n = co_await tls.recv(buf).deadline(deadline);
        if (!n && n.error() == galay::tls::errc::truncated) {
            eof = truncated = true;
            co_return false;
        }
        if (!n) {
            error = n.error() == std::errc::timed_out
                        ? "no complete answer within --timeout " + timeout_text()
                        : "receive: " + n.error().message();
            co_return false;
        }
        if (*n == 0) {
            eof = true;
            co_return false;
        }
        pending.append(buf, *n);
        co_return true;
    }

    std::string timeout_text() const {
        char text[32];
        std::snprintf(text, sizeof text, "%g s", timeout);
        return text;
    }
};

/// The body after the head, by its framing. 0, or 1 with the reason printed.
galay::Task<int> read_body(Reader& in, const hr::Head& head, BodyOut& out) {
    if (head.framing == hr::Framing::none) co_return 0;
    if (head.framing == hr::Framing::content_length) {
        std::uint64_t left = head.content_length;
        for (;;) {
            const std::size_t n =
                static_cast<std::size_t>(std::min<std::uint64_t>(left, in.pending.size()));
            if (auto e = out.write(std::string_view(in.pending).substr(0, n))) co_return fail(*e);
            in.pending.erase(0, n);
            left -= n;
            if (left == 0) co_return 0;
            const bool got = co_await in.more();
            if (!got) {
                if (in.error) co_return fail(*in.error);
                co_return fail("the body ended after " +
                               std::to_string(head.content_length - left) + " of " +
                               std::to_string(head.content_length) + " bytes");
            }
        }
    }
    if (head.framing == hr::Framing::chunked) {
        hr::ChunkedDecoder chunks;
        for (;;) {
            // Decode what has arrived; a step consumes nothing while a line is incomplete (the
            // decoder bounds a line, so `pending` stays under 16 KiB + kMaxChunkLine).
            std::string_view view = in.pending;
            while (!chunks.done()) {
                auto step = chunks.next(view);
                if (!step) co_return fail("malformed chunked body: " + step.error());
                if (step->consumed == 0) break;
                if (auto e = out.write(step->data)) co_return fail(*e);
                view.remove_prefix(step->consumed);
            }
            in.pending.erase(0, in.pending.size() - view.size());
            if (chunks.done()) co_return 0;
            const bool got = co_await in.more();
            if (!got) {
                if (in.error) co_return fail(*in.error);
                co_return fail("the chunked body ended before its last chunk");
            }
        }
    }
    // Until the connection closes.
    for (;;) {
        if (auto e = out.write(in.pending)) co_return fail(*e);
        in.pending.clear();
        const bool got = co_await in.more();
        if (got) continue;
        if (in.error) co_return fail(*in.error);
        if (in.truncated)
            co_return fail("the connection ended without close_notify: the body may be cut short");
        co_return 0;
    }
}

galay::Task<int> fetch(const Options& opt, const galay::tls::Context& ctx) {
    const auto limit = tools::to_duration(opt.timeout);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    const hr::Url& url = opt.url;
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

    Reader in{tls, deadline, opt.timeout, {}, false, false, std::nullopt};
    hr::Head head;
    for (;;) { // interim (1xx) heads are skipped
        auto parsed = hr::parse_head(in.pending);
        if (!parsed) co_return fail("malformed answer: " + parsed.error());
        if (*parsed) {
            head = **parsed;
            in.pending.erase(0, head.size);
            if (head.framing == hr::Framing::none && head.status < 200) continue;
            break;
        }
        const bool got = co_await in.more();
        if (!got) co_return fail(in.error ? *in.error : "the connection ended before an answer");
    }
    BodyOut out(opt.max_bytes);
    if (head.framing == hr::Framing::content_length && opt.max_bytes &&
        head.content_length > *opt.max_bytes)
        co_return fail("the body (Content-Length " + std::to_string(head.content_length) +
                       ") is larger than --max-bytes " + std::to_string(*opt.max_bytes));
    const int body = co_await read_body(in, head, out);
    if (body != 0) co_return body;
    (void)co_await tls.shutdown().timeout(1s);
    if (head.status < 200 || head.status > 299)
        co_return fail("HTTP status " + std::to_string(head.status));
    co_return 0;
}

/// SSL_CERT_FILE, when set and present, replaced by /proc/self/fd/N of a descriptor opened here
/// without blocking and checked to be a regular file: OpenSSL then opens that same file. Returns
/// the descriptor (kept open until the context is built), -1 when there is nothing to do, or
/// the error line.
std::expected<int, std::string> pin_ssl_cert_file() {
    const char* path = std::getenv("SSL_CERT_FILE");
    if (path == nullptr || *path == '\0') return -1;
    struct stat st {};
    if (::stat(path, &st) != 0 && errno == ENOENT) return -1; // OpenSSL skips a missing file
    auto fd = open_regular(path);
    if (!fd) return std::unexpected("SSL_CERT_FILE=" + fd.error());
    const std::string pinned = "/proc/self/fd/" + std::to_string(*fd);
    ::setenv("SSL_CERT_FILE", pinned.c_str(), 1);
    return *fd;
}

} // namespace

int main(int argc, char** argv) {
    Options opt;
    cli::App app{"Fetch an https:// URL, verify the server, write the body to stdout.",
                 "https_get"};
    std::string url_text;
    app.add_option("url", url_text, "https://HOST[:PORT][/PATH]")
        ->required()
        ->check(cli::Validator(
            [](std::string& s) -> std::string {
                auto url = hr::parse_url(s);
                return url ? std::string() : "'" + s + "': " + url.error();
            },
            "", "url"));
    app.add_option("--ca", opt.ca, "a CA certificate file (PEM) to trust besides the system store")
        ->check(tools::non_empty());
    app.add_option("--timeout", opt.timeout, "seconds for the whole exchange")
        ->check(tools::seconds(0.001, 86400))
        ->capture_default_str();
    app.add_option("--max-bytes", opt.max_bytes,
                   "the most body bytes to accept (more: exit 1); default: no limit")
        ->check(tools::whole(0, std::uint64_t(1) << 62));
    if (auto code = tools::parse_command_line(app, argc, argv, "https_get")) return *code;
    opt.url = *hr::parse_url(url_text); // (checked by the option's validator)
    std::signal(SIGPIPE, SIG_IGN);
    try {
        galay::tls::ClientConfig config{.alpn = {"http/1.1"}};
        if (!opt.ca.empty()) {
            auto pem = read_regular(opt.ca);
            if (!pem) return fail("--ca " + pem.error());
            config.ca_pem = std::move(*pem);
        }
        auto pinned = pin_ssl_cert_file();
        if (!pinned) return fail(pinned.error());
        const galay::tls::Context ctx = galay::tls::Context::client(config);
        if (*pinned >= 0) ::close(*pinned);
        return galay::block_on(fetch(opt, ctx));
    } catch (const std::exception& e) {
        return fail(e.what());
    }
}
