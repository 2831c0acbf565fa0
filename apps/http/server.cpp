// http::Server (server.hpp): one connection's requests over plain TCP or TLS, and the accept loop.
#include "http/server.hpp"

#include "http/range.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <type_traits>

namespace http {

using namespace std::chrono_literals;
using galay::Result;

namespace {

// ---------------------------------------------------------------------------------------------
// The Date header: formatted at most once a second per thread.
// ---------------------------------------------------------------------------------------------

void format_date(std::time_t t, char (&out)[29]) noexcept {
    static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday % 7],
                  tm.tm_mday, kMonths[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                  tm.tm_sec);
    std::memcpy(out, buf, 29);
}

class DateCache {
public:
    std::string_view now() noexcept {
        timespec ts{};
        ::clock_gettime(CLOCK_REALTIME_COARSE, &ts); // vDSO: no system call
        if (ts.tv_sec != second_) {
            format_date(ts.tv_sec, text_);
            second_ = ts.tv_sec;
        }
        return {text_, sizeof text_};
    }
    /// The second of the text now() returned last.
    std::time_t second() const noexcept { return second_; }

private:
    std::time_t second_ = -1;
    char text_[29] = {};
};
thread_local DateCache t_date;

// ---------------------------------------------------------------------------------------------
// Formatting an answer straight into the writer's buffer.
// ---------------------------------------------------------------------------------------------

/// The most an answer's head takes (status line and our headers).
constexpr std::size_t kMaxHead = 512;

class Out {
public:
    explicit Out(std::span<char> room) noexcept
        : begin_(room.data())
        , p_(room.data())
        , end_(room.data() + room.size()) {}
    Out& operator<<(std::string_view s) noexcept {
        const std::size_t n = std::min(s.size(), static_cast<std::size_t>(end_ - p_));
        if (n == 0) return *this; // (an empty view may have no data pointer)
        std::memcpy(p_, s.data(), n);
        p_ += n;
        return *this;
    }
    Out& operator<<(std::uint64_t v) noexcept {
        p_ = std::to_chars(p_, end_, v).ptr;
        return *this;
    }
    std::size_t size() const noexcept { return static_cast<std::size_t>(p_ - begin_); }

private:
    char* begin_;
    char* p_;
    char* end_;
};

enum class Persist : std::uint8_t { keep_alive_11, keep_alive_10, close };

void put_head(Out& o, int status, std::string_view type, std::uint64_t length, Persist persist,
              std::string_view extra = {}) {
    o << "HTTP/1.1 " << static_cast<std::uint64_t>(status) << " " << reason_phrase(status)
      << "\r\nServer: galay\r\nDate: " << t_date.now() << "\r\nContent-Type: " << type
      << "\r\nContent-Length: " << length << "\r\n";
    if (persist == Persist::close)
        o << "Connection: close\r\n";
    else if (persist == Persist::keep_alive_10)
        o << "Connection: keep-alive\r\n";
    o << extra << "\r\n";
}

/// The fixed answer (GET / and HEAD /) rendered whole, status line to body, once a second per
/// thread for each kind (persistence x method): answering it is then one copy, not a dozen
/// pieces formatted (cachegrind, GET / at 1,000 connections: ~440 fewer instructions a request).
class FixedAnswers {
public:
    std::string_view get(std::uint64_t server, std::string_view body, Persist persist,
                         bool head_only) {
        (void)t_date.now(); // (moves to this second)
        Entry& e = entries_[static_cast<std::size_t>(persist) * 2 + (head_only ? 1 : 0)];
        if (e.server != server || e.second != t_date.second()) {
            e.text.resize(kMaxHead + (head_only ? 0 : body.size()));
            Out o(e.text);
            put_head(o, 200, "text/plain", body.size(), persist);
            if (!head_only) o << body;
            e.text.resize(o.size());
            e.server = server;
            e.second = t_date.second();
        }
        return e.text;
    }

private:
    struct Entry {
        std::uint64_t server = 0; // Server::id_ (0: none)
        std::time_t second = -1;
        std::string text;
    };
    std::array<Entry, 6> entries_;
};
thread_local FixedAnswers t_fixed;

/// Where each request head is parsed: one per thread, so the fields a request writes are in this
/// core's cache rather than in the connection's (cold) memory, and an idle connection holds no
/// Request (64 header slots, ~2.3 KiB). A request the fixed answer does not serve passes what
/// answer() needs (its method and target) by value: answer() may suspend, and another
/// connection's request would overwrite this one.
thread_local Request t_request;

std::string_view content_type(std::string_view path) noexcept {
    const std::size_t slash = path.rfind('/');
    const std::size_t dot = path.rfind('.');
    if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash))
        return "application/octet-stream";
    const std::string_view ext = path.substr(dot + 1);
    struct Entry {
        std::string_view ext, type;
    };
    static constexpr Entry kTypes[] = {
        {"html", "text/html; charset=utf-8"},
        {"htm", "text/html; charset=utf-8"},
        {"txt", "text/plain; charset=utf-8"},
        {"css", "text/css"},
        {"js", "text/javascript"},
        {"json", "application/json"},
        {"svg", "image/svg+xml"},
        {"png", "image/png"},
        {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},
        {"gif", "image/gif"},
        {"ico", "image/x-icon"},
        {"wasm", "application/wasm"},
        {"pdf", "application/pdf"},
    };
    for (const Entry& e : kTypes)
        if (iequals(e.ext, ext)) return e.type;
    return "application/octet-stream";
}

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// The path of a request target (origin-form or absolute-form), percent-decoded into `out`,
/// without its leading '/'. False: the target is not one we can serve (400).
bool decode_path(std::string_view target, std::string& out) {
    if (target.size() > 7 && iequals(target.substr(0, 7), "http://")) {
        const std::size_t slash = target.find('/', 7);
        target = slash == std::string_view::npos ? "/" : target.substr(slash);
    }
    if (target.empty() || target[0] != '/') return false;
    target = target.substr(0, target.find_first_of("?#"));
    out.clear();
    for (std::size_t i = 1; i < target.size(); ++i) {
        char c = target[i];
        if (c == '%') {
            if (i + 2 >= target.size()) return false;
            const int hi = hex_value(target[i + 1]);
            const int lo = hex_value(target[i + 2]);
            if (hi < 0 || lo < 0) return false;
            c = static_cast<char>(hi * 16 + lo);
            if (c == '\0') return false;
            i += 2;
        }
        out.push_back(c);
    }
    return true;
}

/// openat2(RESOLVE_BENEATH): the kernel refuses any path that leaves the root ("..", absolute
/// symlinks, magic links), whatever the request's path looks like. O_NONBLOCK: opening a FIFO
/// (or a device) for reading would otherwise wait for a writer, and the whole worker with it;
/// the caller checks the type of what it opened and clears the flag on a regular file.
int open_beneath(int root_fd, const char* path) noexcept {
    open_how how{};
    how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, root_fd, path, &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
    // Kernels before 5.6: refuse ".." and follow no symlink in the last component.
    std::string_view p(path);
    for (std::size_t at = p.find(".."); at != std::string_view::npos; at = p.find("..", at + 1)) {
        const bool starts = at == 0 || p[at - 1] == '/';
        const bool ends = at + 2 == p.size() || p[at + 2] == '/';
        if (starts && ends) {
            errno = EXDEV;
            return -1;
        }
    }
    return ::openat(root_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
}

/// What a path opened by open_beneath is to a request: a regular file to send (its O_NONBLOCK
/// cleared: on io_uring a read of a non-blocking file fails with EAGAIN where the page cache
/// misses, instead of waiting for the disk), a directory (404: only "dir/" has an index), or
/// anything else, a FIFO, a socket, a device (403: never read, it could block or never end).
enum class Kind : std::uint8_t { file, directory, other };
Kind file_kind(int fd, struct stat& st) noexcept {
    if (::fstat(fd, &st) != 0) return Kind::other;
    if (S_ISDIR(st.st_mode)) return Kind::directory;
    if (!S_ISREG(st.st_mode)) return Kind::other;
    // (Of the flags F_SETFL changes, open_beneath set only O_NONBLOCK: 0 clears it, no F_GETFL.)
    if (::fcntl(fd, F_SETFL, 0) != 0) return Kind::other;
    return Kind::file;
}

} // namespace

std::string format_http_date(std::time_t t) {
    char text[29];
    format_date(t, text);
    return std::string(text, sizeof text);
}

// ---------------------------------------------------------------------------------------------
// One connection
// ---------------------------------------------------------------------------------------------

/// One connection's requests, over a TcpStream (receives with recv_pooled) or a tls::Stream
/// (receives into the reader: TLS records are decrypted into it).
template <class S>
class Connection {
    static constexpr bool kPooled = std::is_same_v<S, galay::TcpStream>;

public:
    Connection(Server& server, S& conn) noexcept
        : server_(server)
        , count_(server.my_counters())
        , cfg_(server.config_)
        , conn_(conn)
        , reader_(conn, std::max(cfg_.read_buffer, cfg_.limits.max_head + 1))
        , writer_(conn, std::max<std::size_t>(cfg_.write_buffer, 2 * kMaxHead))
        , parser_(cfg_.limits) {}

    galay::Task<void> run();

private:
    static bool is_fixed_route(Method method, std::string_view target) noexcept;
    std::size_t fixed_size(bool head_only) const noexcept;
    /// The fixed answer, copied into the writer's buffer; false when it does not fit.
    bool put_fixed(bool head_only, Persist persist);
    /// Any other answer (files, errors, a fixed body larger than the buffer). Returns false when
    /// the connection must close.
    galay::Task<bool> answer(Method method, std::string_view target, Persist persist);
    /// A 200 with `body` of `type` when it does not fit the writer's buffer: the head, then the
    /// body (the fixed answer, and /metrics). `body` must live until the task ends.
    galay::Task<bool> answer_text(std::string_view body, std::string_view type, bool head_only,
                                  Persist persist);
    galay::Task<bool> answer_file(std::string_view target, Persist persist, bool head_only);
    /// The bytes [first, first + length) of `file` after the head in the writer. False when the
    /// connection must close (the file shrank, the client went away).
    galay::Task<bool> send_body(const galay::fs::File& file, std::uint64_t first,
                                std::uint64_t length);
    /// GET /metrics: the Runtime's figures in the Prometheus text format.
    galay::Task<bool> answer_metrics(bool head_only, Persist persist);
    /// GET /tasks: a task dump of the Runtime (galay/task_dump.hpp), text or JSON.
    galay::Task<bool> answer_tasks(bool json, bool head_only, Persist persist);
    /// Whether the writer has (or can grow to) `n` free bytes without sending.
    bool has_room(std::size_t n) { return writer_.spare(n).size() >= n; }
    /// Room for an answer's head in the writer (flushing first when there is not).
    galay::Task<bool> make_room(std::size_t n);
    /// A short plain-text answer (its body left out when head_only_).
    void put_simple(int status, std::string_view body, Persist persist,
                    std::string_view extra = {});
    /// Answer a refused request, then close gracefully.
    galay::Task<void> refuse(int status, std::string_view reason);
    /// Stop sending, then read (and drop) what the client still sends for a moment, so the
    /// answer already sent is not destroyed by a reset (closing a socket with unread input
    /// sends RST, and the client may then lose data it had not read yet).
    galay::Task<void> linger_close();
    galay::Task<bool> discard_body(std::uint64_t length);
    /// Place what a recv_pooled received: the pool buffer itself, to be parsed in place
    /// (pooled_). When the reader holds the start of a request, as much of it as the reader has
    /// room for goes behind that start (top_up), the rest stays in pooled_ for after. Returns
    /// the bytes received (0: the peer closed) or the receive's error.
    Result<std::size_t> take(Result<galay::PooledBuffer> got);
    /// Move the front of pooled_ into the reader, behind the unfinished request there: 2 KiB at
    /// a time (a head's usual rest is in it; the parser resumes where it stopped, and the reader
    /// stays in its first small block), at most what fits. False when nothing fits (the reader is
    /// full: that head cannot finish).
    bool top_up() {
        const std::size_t room = reader_.capacity() - reader_.buffered().size();
        const std::size_t n = std::min({room, pooled_.size(), std::size_t{2048}});
        if (n == 0 || !reader_.append(pooled_.substr(0, n))) return false;
        pooled_.remove_prefix(n);
        release_if_parsed();
        return true;
    }
    /// The bytes to parse: the reader's (the start of a request that came in pieces, and what
    /// top_up put behind it) first, then the pool buffer's not parsed yet.
    std::string_view input() const noexcept {
        return reader_.buffered().empty() ? pooled_ : reader_.buffered();
    }
    void consume_input(std::size_t n) noexcept {
        if (!reader_.buffered().empty())
            reader_.consume(n);
        else
            pooled_.remove_prefix(n);
    }
    void drop_pooled() noexcept {
        pooled_ = {};
        pool_.release();
    }
    /// Give the pool buffer back once every byte of it is parsed.
    void release_if_parsed() noexcept {
        if (pooled_.empty()) pool_.release();
    }

    /// The steady clock at its coarse resolution (a few ms): read twice per request for the
    /// idle and write deadlines, which are seconds long. CLOCK_MONOTONIC_COARSE is the same
    /// clock as steady_clock's, read from the vDSO without the TSC.
    static std::int64_t coarse_now_ns() noexcept {
        timespec ts{};
        ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
    }
    std::int64_t deadline(std::chrono::milliseconds d) const noexcept {
        return coarse_now_ns() + std::chrono::nanoseconds(d).count();
    }
    static std::chrono::steady_clock::time_point at(std::int64_t ns) noexcept {
        return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
    }

    Server& server_;
    Server::Counters& count_; // this thread's
    const ServerConfig& cfg_;
    S& conn_;
    galay::io::BufReader<S> reader_;
    galay::io::BufWriter<S> writer_;
    RequestParser parser_;
    // Every receive is a recv_pooled: the bytes arrive in a buffer of the scheduler's pool, and
    // the requests in it are parsed and answered there, without a copy. The buffer goes back as
    // soon as its last byte is parsed (it is held while the requests in it are answered: one
    // buffer per connection at most); only the start of an unfinished request is copied into
    // reader_, which receives nothing itself, and the next receive's bytes behind it until it is
    // whole (2 KiB at a time: top_up); the rest of that receive is parsed in place after it. So a
    // connection waiting for its next request holds no read buffer at all, and on io_uring a
    // connection's receives are one multishot recv, not a submission per request. (A plain recv
    // must not be mixed in: on io_uring it could wait for bytes the multishot recv has already
    // taken.)
    galay::PooledBuffer pool_;
    std::string_view pooled_; // the bytes of pool_ not parsed yet
    std::string target_;      // a request target copied out of pool_ (capacity reused)
    std::string path_;        // decoded path of a static request (capacity reused)
    std::string range_;       // its Range header, copied out of the request ("": none)
    bool head_only_ = false;  // the request answered is a HEAD
};

template <class S>
galay::Task<void> Connection<S>::run() {
    std::int64_t request_start = 0; // when the first byte of an unfinished request was seen
    for (;;) {
        Request& req = t_request; // (valid until the next co_await)
        const bool from_pool = reader_.buffered().empty() && !pooled_.empty();
        ParseResult r = parser_.parse(input(), req);
        if (r.status == ParseStatus::complete) {
            parser_.reset();
            request_start = 0;
            // The views in req stay valid until the next receive: the reader's bytes are not
            // moved by a consume, and the pool buffer is held until its bytes are all parsed.
            consume_input(r.consumed);
            count_.requests.fetch_add(1, std::memory_order_relaxed);
            // Bodies we do not decode (chunked) or were asked to wait for (Expect) end the
            // connection after the answer instead.
            bool keep = req.keep_alive && !req.chunked && !req.expect_continue;
            const std::uint64_t body = req.content_length;
            const Persist persist = !keep                    ? Persist::close
                                    : req.version_minor == 0 ? Persist::keep_alive_10
                                                             : Persist::keep_alive_11;
            // The fixed answer is copied in place, without a coroutine of its own: the hot path
            // allocates nothing. Everything else goes through answer().
            const bool head_only = req.method == Method::head;
            if (!is_fixed_route(req.method, req.target)) {
                // answer() needs only the method and the target, by value. It may suspend (a
                // file read, a flush): a pool buffer with nothing more in it goes back first,
                // the target copied out of it (into a string whose capacity is reused).
                std::string_view target = req.target;
                // Range applies to GET only (RFC 9110 14.2); with If-Range the validator cannot
                // match (no ETag or Last-Modified is sent), so the whole file goes.
                range_.clear();
                if (req.method == Method::get && req.header("If-Range").empty())
                    range_.assign(req.header("Range"));
                if (from_pool && pooled_.empty()) {
                    target_.assign(target);
                    target = target_;
                    pool_.release();
                }
                const bool answered = co_await answer(req.method, target, persist);
                if (!answered) co_return;
            } else if (!put_fixed(head_only, persist)) {
                // No room behind the answers buffered so far: send them and try again. Still
                // no room: a body larger than the buffer.
                if (writer_.buffered() > 0) {
                    auto flushed =
                        co_await writer_.flush().deadline(at(deadline(cfg_.write_timeout)));
                    if (!flushed) co_return;
                }
                if (!put_fixed(head_only, persist)) {
                    const bool answered =
                        co_await answer_text(cfg_.body, "text/plain", head_only, persist);
                    if (!answered) co_return;
                }
            }
            if (!keep) {
                drop_pooled();
                co_await linger_close();
                co_return;
            }
            if (body > 0) {
                const bool skipped = co_await discard_body(body);
                if (!skipped) co_return;
            }
            release_if_parsed(); // the buffer goes back now, not when the next bytes arrive
            // A head that came in pieces left a block in the reader: with the request answered,
            // an empty reader gives it back (a waiting connection holds no read buffer).
            if (reader_.buffered().empty()) reader_.give_back();
            continue;
        }
        if (r.status == ParseStatus::error) {
            drop_pooled();
            count_.refused.fetch_add(1, std::memory_order_relaxed);
            co_await refuse(r.error_status, r.reason);
            co_return;
        }
        // Incomplete. The start of a request received into a pool buffer moves to the reader, so
        // that a connection waiting for the rest of its request holds no pool buffer. (It fits:
        // the reader is empty, and an unfinished head the parser has not refused is at most
        // max_head bytes after at most max_head of empty lines.) An unfinished request already in
        // the reader, with bytes received behind it (top_up took what fitted), takes more of them
        // and is parsed again, without a receive.
        if (!pooled_.empty()) {
            const bool moved = from_pool ? reader_.append(pooled_) : top_up();
            if (from_pool) drop_pooled();
            if (!moved) {
                drop_pooled();
                count_.refused.fetch_add(1, std::memory_order_relaxed);
                co_await refuse(431, "request head too large");
                co_return;
            }
            if (!from_pool) continue;
        }
        // Send the answers of the requests handled so far (one send for a whole pipelined
        // batch), then wait for more.
        if (writer_.buffered() > 0) {
            auto flushed = co_await writer_.flush().deadline(at(deadline(cfg_.write_timeout)));
            if (!flushed) co_return;
        }
        std::int64_t until;
        if (reader_.buffered().empty()) {
            until = deadline(cfg_.keepalive_timeout);
        } else {
            if (request_start == 0) request_start = coarse_now_ns();
            until = request_start + std::chrono::nanoseconds(cfg_.header_timeout).count();
        }
        Result<std::size_t> n;
        if constexpr (kPooled)
            n = take(co_await conn_.recv_pooled().deadline(at(until)));
        else
            n = co_await reader_.fill().deadline(at(until));
        if (!n) {
            if (n.error() == std::errc::timed_out) {
                count_.timeouts.fetch_add(1, std::memory_order_relaxed);
                const bool started = !reader_.buffered().empty();
                if (started) co_await refuse(408, "request head too slow");
            } else if (n.error() == galay::errc::limit_exceeded) {
                // Leading empty lines plus a head at the limit: the parser will not finish it.
                count_.refused.fetch_add(1, std::memory_order_relaxed);
                co_await refuse(431, "request head too large");
            }
            co_return;
        }
        if (*n == 0) co_return; // the client closed (perhaps in the middle of a request)
    }
}

template <class S>
Result<std::size_t> Connection<S>::take(Result<galay::PooledBuffer> got) {
    if (!got) return std::unexpected(got.error());
    const std::size_t n = got->size();
    if (n == 0) return 0;
    pool_ = std::move(*got);
    pooled_ = {pool_.data(), n};
    // The rest of an unfinished request goes behind its start, in the reader. Only as much as
    // fits: a pipelined burst brings the next requests with it, a pool buffer's worth (64 KiB),
    // more than the reader holds; they stay in pooled_ and are parsed there after it.
    if (!reader_.buffered().empty() && !top_up()) return galay::fail(galay::errc::limit_exceeded);
    return n;
}

template <class S>
galay::Task<bool> Connection<S>::make_room(std::size_t n) {
    if (has_room(n)) co_return true;
    co_return static_cast<bool>(
        co_await writer_.flush().deadline(at(deadline(cfg_.write_timeout))));
}

template <class S>
void Connection<S>::put_simple(int status, std::string_view body, Persist persist,
                               std::string_view extra) {
    Out o(writer_.spare(kMaxHead + body.size() + 1));
    put_head(o, status, "text/plain; charset=utf-8", body.size() + 1, persist, extra);
    if (!head_only_) o << body << "\n"; // (the answer to HEAD has the length, not the body)
    writer_.commit(o.size());
}

template <class S>
bool Connection<S>::is_fixed_route(Method method, std::string_view target) noexcept {
    return (method == Method::get || method == Method::head) &&
           (target == "/" || target.starts_with("/?"));
}

template <class S>
std::size_t Connection<S>::fixed_size(bool head_only) const noexcept {
    return kMaxHead + (head_only ? 0 : cfg_.body.size());
}

template <class S>
bool Connection<S>::put_fixed(bool head_only, Persist persist) {
    const std::span<char> room = writer_.spare(fixed_size(head_only));
    if (room.size() < fixed_size(head_only)) return false;
    const std::string_view answer = t_fixed.get(server_.id_, cfg_.body, persist, head_only);
    std::memcpy(room.data(), answer.data(), answer.size());
    writer_.commit(answer.size());
    return true;
}

template <class S>
galay::Task<bool> Connection<S>::answer(Method method, std::string_view target, Persist persist) {
    head_only_ = method == Method::head;
    if (method != Method::get && method != Method::head) {
        const bool room = co_await make_room(kMaxHead);
        if (!room) co_return false;
        put_simple(405, "method not allowed", persist, "Allow: GET, HEAD\r\n");
        co_return true;
    }
    const bool head_only = method == Method::head;
    if (is_fixed_route(method, target))
        co_return co_await answer_text(cfg_.body, "text/plain", head_only, persist);
    // The pages of galay's scrape endpoint, read the same way it reads them.
    const galay::metrics::ScrapeRequest page = galay::metrics::scrape_target(target);
    if (page == galay::metrics::ScrapeRequest::metrics && galay::Runtime::current() != nullptr)
        co_return co_await answer_metrics(head_only, persist);
    if ((page == galay::metrics::ScrapeRequest::tasks ||
         page == galay::metrics::ScrapeRequest::tasks_json) &&
        galay::Runtime::current() != nullptr)
        co_return co_await answer_tasks(page == galay::metrics::ScrapeRequest::tasks_json,
                                        head_only, persist);
    co_return co_await answer_file(target, persist, head_only);
}

template <class S>
galay::Task<bool> Connection<S>::answer_tasks(bool json, bool head_only, Persist persist) {
    // Taken and formatted on the blocking pool: this connection's own worker answers the dump
    // too, and its loop is not held by the formatting.
    const std::string body = co_await galay::task_dump_report_async(
        *galay::Runtime::current(),
        json ? galay::TaskDumpFormat::json : galay::TaskDumpFormat::text);
    co_return co_await answer_text(body, json ? "application/json" : "text/plain; charset=utf-8",
                                   head_only, persist);
}

template <class S>
galay::Task<bool> Connection<S>::answer_metrics(bool head_only, Persist persist) {
    // Rendered per scrape: a scrape every few seconds is no load next to the requests.
    const std::string body = galay::metrics::prometheus_text(*galay::Runtime::current());
    co_return co_await answer_text(body, "text/plain; version=0.0.4; charset=utf-8", head_only,
                                   persist);
}

template <class S>
galay::Task<bool> Connection<S>::answer_text(std::string_view body, std::string_view type,
                                             bool head_only, Persist persist) {
    const bool room = co_await make_room(kMaxHead);
    if (!room) co_return false;
    Out o(writer_.spare(kMaxHead));
    put_head(o, 200, type, body.size(), persist);
    writer_.commit(o.size());
    if (!head_only) {
        auto written = co_await writer_.write(body).deadline(at(deadline(cfg_.write_timeout)));
        if (!written) co_return false;
    }
    co_return true;
}

template <class S>
galay::Task<bool> Connection<S>::answer_file(std::string_view target, Persist persist,
                                             bool head_only) {
    const bool room = co_await make_room(kMaxHead);
    if (!room) co_return false;
    if (!decode_path(target, path_)) {
        put_simple(400, "bad request target", persist);
        co_return true;
    }
    if (server_.root_fd_ < 0) {
        put_simple(404, "not found", persist);
        co_return true;
    }
    if (path_.empty() || path_.back() == '/') path_ += "index.html";
    const int fd = open_beneath(server_.root_fd_, path_.c_str());
    if (fd < 0) {
        put_simple(errno == EACCES ? 403 : 404, errno == EACCES ? "forbidden" : "not found",
                   persist);
        co_return true;
    }
    galay::fs::File file(fd, galay::fs::File::Buffered{}); // (open_beneath: no O_DIRECT)
    struct stat st {};
    const Kind kind = file_kind(fd, st);
    if (kind != Kind::file) {
        if (kind == Kind::directory)
            put_simple(404, "not found", persist);
        else
            put_simple(403, "forbidden: not a regular file", persist);
        co_return true;
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    ByteRange range = parse_range(range_, size);
    if (range.kind == ByteRange::Kind::unsatisfiable) {
        char extra[64];
        const int n = std::snprintf(extra, sizeof extra, "Content-Range: bytes */%llu\r\n",
                                    static_cast<unsigned long long>(size));
        put_simple(416, "range not satisfiable", persist, std::string_view(extra, n));
        co_return true;
    }
    char extra[96];
    int extra_len = 0;
    if (range.kind == ByteRange::Kind::partial) {
        extra_len = std::snprintf(extra, sizeof extra, "Content-Range: bytes %llu-%llu/%llu\r\n",
                                  static_cast<unsigned long long>(range.first),
                                  static_cast<unsigned long long>(range.first + range.length - 1),
                                  static_cast<unsigned long long>(size));
    } else {
        range.first = 0;
        range.length = size;
    }
    {
        Out o(writer_.spare(kMaxHead));
        put_head(o, extra_len > 0 ? 206 : 200, content_type(path_), range.length, persist,
                 std::string_view(extra, static_cast<std::size_t>(extra_len)));
        writer_.commit(o.size());
    }
    if (head_only) co_return true;
    co_return co_await send_body(file, range.first, range.length);
}

template <class S>
galay::Task<bool> Connection<S>::send_body(const galay::fs::File& file, std::uint64_t first,
                                           std::uint64_t length) {
    // A body larger than the writer's buffer goes from the page cache to the socket with
    // sendfile (plain TCP only: TLS encrypts in user space), after the head; a smaller one is
    // copied behind its head and leaves with it in one send.
    if constexpr (kPooled) {
        if (length > cfg_.write_buffer && cfg_.file_send == ServerConfig::FileSend::sendfile) {
            auto flushed = co_await writer_.flush().deadline(at(deadline(cfg_.write_timeout)));
            if (!flushed) co_return false;
            for (std::uint64_t off = first, end = first + length; off < end;) {
                const std::uint64_t piece = std::min<std::uint64_t>(end - off, 1u << 30);
                Result<std::size_t> n = co_await file.send_to(conn_, off, piece)
                                            .deadline(at(deadline(cfg_.write_timeout)));
                if (!n || *n < piece) co_return false; // the file shrank: close, never hang
                off += *n;
            }
            co_return true;
        }
    }
    // The file's bytes go straight into the writer's buffer: a small file leaves with its head
    // in one send; a large one in buffer-sized pieces.
    for (std::uint64_t off = first, end = first + length; off < end;) {
        const auto piece = static_cast<std::size_t>(
            std::min<std::uint64_t>(writer_.capacity(), end - off)); // (grows the buffer)
        if (writer_.spare(piece).size() < std::min<std::size_t>(piece, 4096)) {
            const bool room = co_await make_room(piece);
            if (!room) co_return false;
        }
        std::span<char> room = writer_.spare(piece);
        const std::size_t want =
            static_cast<std::size_t>(std::min<std::uint64_t>(room.size(), end - off));
        Result<std::size_t> n = co_await file.read_at(room.first(want), off);
        if (!n || *n == 0) co_return false; // the file shrank: the promised length cannot be met
        writer_.commit(*n);
        off += *n;
    }
    co_return true;
}

template <class S>
galay::Task<bool> Connection<S>::discard_body(std::uint64_t length) {
    for (;;) {
        // What arrived with the head (in the reader, then in the pool buffer) first.
        while (length > 0 && !input().empty()) {
            const std::size_t skipped =
                static_cast<std::size_t>(std::min<std::uint64_t>(input().size(), length));
            consume_input(skipped);
            length -= skipped;
        }
        release_if_parsed(); // (not held while waiting for the rest)
        if (length == 0) co_return true;
        if (writer_.buffered() > 0) {
            auto flushed = co_await writer_.flush().deadline(at(deadline(cfg_.write_timeout)));
            if (!flushed) co_return false;
        }
        // (Both are empty here: what take() places is the body's next bytes, and what
        // follows the body stays for the next request.)
        Result<std::size_t> n;
        if constexpr (kPooled)
            n = take(co_await conn_.recv_pooled().deadline(at(deadline(cfg_.header_timeout))));
        else
            n = co_await reader_.fill().deadline(at(deadline(cfg_.header_timeout)));
        if (!n || *n == 0) co_return false;
    }
}

template <class S>
galay::Task<void> Connection<S>::refuse(int status, std::string_view reason) {
    const bool room = co_await make_room(kMaxHead + reason.size() + 1);
    if (!room) co_return;
    head_only_ = false; // (a refused request's method is not trusted: the reason goes)
    if (has_room(kMaxHead + reason.size() + 1)) put_simple(status, reason, Persist::close);
    co_await linger_close();
}

template <class S>
galay::Task<void> Connection<S>::linger_close() {
    if (writer_.buffered() > 0) {
        auto flushed = co_await writer_.flush().deadline(at(deadline(cfg_.write_timeout)));
        if (!flushed) co_return;
    }
    const std::int64_t until = deadline(1000ms);
    if constexpr (kPooled) {
        (void)conn_.shutdown(galay::Shutdown::write);
        // Drop at most 64 KiB for at most a second, then close whatever the client does.
        // (recv_pooled, as every receive of a connection: on io_uring a plain recv could wait
        // for bytes that the connection's multishot receive has already taken.)
        for (std::size_t dropped = 0; dropped < (64u << 10);) {
            Result<galay::PooledBuffer> n = co_await conn_.recv_pooled().deadline(at(until));
            if (!n || n->empty()) break;
            dropped += n->size();
        }
    } else {
        // close_notify first: the client then knows the answer is whole.
        auto notified = co_await conn_.shutdown().deadline(at(until));
        if (!notified) co_return;
        for (std::size_t dropped = 0; dropped < (64u << 10);) {
            reader_.consume(reader_.buffered().size());
            Result<std::size_t> n = co_await reader_.fill().deadline(at(until));
            if (!n || *n == 0) break;
            dropped += *n;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

Result<std::shared_ptr<Server>> Server::create(ServerConfig config) {
    static std::atomic<std::uint64_t> next_id{1};
    std::shared_ptr<Server> s(new Server(std::move(config)));
    s->id_ = next_id.fetch_add(1, std::memory_order_relaxed);
    if (!s->config_.root.empty()) {
        s->root_fd_ = ::open(s->config_.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->root_fd_ < 0) return galay::fail(errno);
    }
    return s;
}

Server::Counters& Server::my_counters() noexcept {
    const int w = galay::this_worker();
    const std::size_t slot = w >= 0 && static_cast<std::size_t>(w) + 1 < kSlots ? w + 1 : 0;
    return counters_[slot];
}

ServerStats Server::stats() const noexcept {
    ServerStats s;
    for (std::size_t i = 0; i < kSlots; ++i) {
        const Counters& c = counters_[i];
        s.requests += c.requests.load(std::memory_order_relaxed);
        s.refused += c.refused.load(std::memory_order_relaxed);
        s.timeouts += c.timeouts.load(std::memory_order_relaxed);
        s.connections += c.connections.load(std::memory_order_relaxed);
        s.handshakes_refused += c.handshakes_refused.load(std::memory_order_relaxed);
    }
    s.handshakes_in_progress = handshakes_.load(std::memory_order_relaxed);
    return s;
}

Server::~Server() {
    if (root_fd_ >= 0) ::close(root_fd_);
}

galay::Task<void> Server::serve_connection(galay::TcpStream conn) {
    if (config_.tls) return serve_tls(std::move(conn));
    return serve_plain(std::move(conn));
}

galay::Task<void> Server::serve_plain(galay::TcpStream conn) {
    my_counters().connections.fetch_add(1, std::memory_order_relaxed);
    Connection<galay::TcpStream> c(*this, conn);
    co_await c.run();
}

galay::Task<void> Server::serve_tls(galay::TcpStream conn) {
    my_counters().connections.fetch_add(1, std::memory_order_relaxed);
    // A slot among max_handshakes before any TLS state exists: beyond it the connection is
    // closed at once (conn goes out of scope), and costs nothing more.
    if (handshakes_.fetch_add(1, std::memory_order_relaxed) >= config_.max_handshakes) {
        handshakes_.fetch_sub(1, std::memory_order_relaxed);
        my_counters().handshakes_refused.fetch_add(1, std::memory_order_relaxed);
        co_return;
    }
    struct Slot {
        std::atomic<std::size_t>& n;
        ~Slot() { n.fetch_sub(1, std::memory_order_relaxed); }
    };
    std::optional<Slot> slot(std::in_place, handshakes_);
    galay::tls::Stream stream = galay::tls::Stream::server(*config_.tls, std::move(conn));
    // The handshake is bounded like a request head: a client that stalls in it is dropped.
    auto shaken = co_await stream.handshake().timeout(config_.header_timeout);
    slot.reset(); // (done, or failed: either way no longer in progress)
    if (!shaken) {
        my_counters().refused.fetch_add(1, std::memory_order_relaxed);
        co_return;
    }
    {
        Connection<galay::tls::Stream> c(*this, stream);
        co_await c.run();
    }
    (void)co_await stream.shutdown().timeout(1s); // close_notify (once: after linger_close, no-op)
}

galay::Task<void> Server::accept_loop(galay::TcpListener& listener) {
    for (;;) {
        auto conn = co_await listener.accept();
        if (conn) {
            galay::spawn(serve_connection(std::move(*conn)));
        } else if (conn.error() == std::errc::operation_canceled) {
            co_return;
        } else if (conn.error() == std::errc::too_many_files_open) {
            std::fprintf(stderr, "http_server: accept: %s (raise ulimit -n)\n",
                         conn.error().message().c_str());
            (void)co_await galay::sleep(10ms);
        } else if (conn.error() != std::errc::connection_aborted) {
            std::fprintf(stderr, "http_server: accept: %s\n", conn.error().message().c_str());
        }
    }
}

} // namespace http
