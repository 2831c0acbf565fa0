// mini_redis/resp.hpp: RESP2, the Redis protocol: requests read from bytes, replies written out.
//
// A request is an array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`, what every client
// library and redis-cli send) or an inline line (`SET "a b" c\r\n`, what a person types into nc,
// with Redis's quotes and escapes). The parser is resumable: it keeps where it stopped, so a
// request that arrives a byte at a time is scanned once in all (linear cost), not once per arrival.
// Its limits are Redis's: a bulk string of at most 512 MiB, refused from its length line before any
// of it is read; a header or inline line of at most 64 KiB. The error texts are Redis's too, so
// that clients see what they expect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mini_redis {

/// The largest bulk string a request may carry (Redis's proto-max-bulk-len).
inline constexpr std::size_t kMaxBulk = 512u * 1024 * 1024;
/// The longest length line or inline request (Redis's PROTO_INLINE_MAX_SIZE).
inline constexpr std::size_t kMaxLine = 64 * 1024;

/// Reads requests, one at a time, from the bytes a connection has received.
class RequestParser {
public:
    enum class Status { incomplete, complete, error };

    /// Go on parsing the request that starts at `in[0]` (`in`: every byte received and not yet
    /// consumed). `complete`: args() and size() describe it; `error`: error() has the reply.
    /// Bytes already scanned by an earlier call are not scanned again.
    Status parse(std::string_view in);
    /// The arguments of the complete request: views into the bytes given to parse() (or, for an
    /// inline request, into the parser's own copies).
    std::span<const std::string_view> args() const noexcept { return args_; }
    /// Bytes the complete request took (to consume from the connection's buffer).
    std::size_t size() const noexcept { return pos_; }
    /// After `error`: the message, without "-ERR " (the connection is closed after it).
    const std::string& error() const noexcept { return error_; }
    /// Start on the next request (after a complete one has been consumed).
    void reset() noexcept;
    /// Bytes examined so far, over every request: what the linear-cost test reads.
    std::uint64_t bytes_scanned() const noexcept { return scanned_; }

private:
    /// The position of the '\r' (or '\n' for inline) ending the line at pos_, or npos when it
    /// has not arrived; remembers how far it searched.
    std::size_t find_line_end(std::string_view in, char end);
    Status fail(std::string message);
    Status parse_inline(std::string_view in);

    std::size_t pos_ = 0;         // next byte of the request to parse
    std::size_t searched_ = 0;    // a line end was looked for up to here
    long long args_left_ = -1;    // bulk strings still to read; -1: the '*' line is next
    long long bulk_len_ = -1;     // length of the bulk string being read; -1: its '$' line is next
    std::vector<std::size_t> at_; // each argument's offset and length, in pairs
    std::vector<std::string_view> args_;
    std::vector<std::string> inline_args_; // an inline request's arguments, unquoted
    std::string error_;
    std::uint64_t scanned_ = 0;
};

/// Redis's reading of an integer (string2ll): optional '-', no '+', no leading zero, no spaces,
/// fits in 64 bits. False for anything else.
bool parse_int(std::string_view s, long long& out) noexcept;

/// Writes replies as RESP2 bytes, to a string (a shard's answer to another worker) or through a
/// sink (a connection's output buffer, see connection.hpp).
class Replies {
public:
    /// Where the bytes go when they do not go to the Replies' own string.
    struct Sink {
        virtual void put(std::string_view bytes) = 0;

    protected:
        ~Sink() = default;
    };
    explicit Replies(Sink* sink = nullptr) noexcept
        : sink_(sink) {}

    void simple(std::string_view s);  // +OK
    void error(std::string_view s);   // -ERR ... (`s` includes the "ERR " prefix)
    void integer(long long n);        // :42
    void bulk(std::string_view s);    // $3\r\nabc
    void null();                      // $-1 (nil)
    void array(std::size_t n);        // *n, then n replies
    void raw(std::string_view bytes); // replies already in RESP (another shard's)
    /// The bytes written so far when there is no sink (and a way to take them).
    std::string& bytes() noexcept { return own_; }

private:
    void put(std::string_view bytes) {
        if (sink_ != nullptr)
            sink_->put(bytes);
        else
            own_.append(bytes);
    }
    void header(char type, long long n); // <type><n>\r\n
    Sink* sink_;
    std::string own_;
};

/// An error reply's text as Redis builds one from a format: a '\0' ends an argument (printf's
/// %s), '\r' and '\n' become spaces (an error is one line).
std::string error_text(std::string_view s);

} // namespace mini_redis
