// mini_redis/connection.cpp: the request/reply loop of one connection (see connection.hpp).
//
// Memory per connection is bounded on both sides. Reading: the buffer grows to hold one request
// (at most a 512 MiB bulk string, refused from its length line before it is read). Writing: once
// `flush_at` bytes of replies wait, they are sent before the next request is run, and the loop
// reads nothing more until the client has taken them, so a client that never reads its replies
// holds one batch of replies and stops being served (the kernel's socket buffers fill; on
// io_uring its armed receive first holds a bounded share of the worker's receive pool, at most
// 8 x 64 KiB by default); the other connections of its worker go on.
#include "mini_redis/connection.hpp"

#include <algorithm>
#include <string>

namespace mini_redis {
namespace {

/// Where one connection's replies go: into the BufWriter's buffer while they fit (no system
/// call, no allocation), then into `spill`, in order, until the next flush.
class Output final : public Replies::Sink {
public:
    Output(galay::TcpStream& conn, std::size_t capacity)
        : writer(conn, capacity) {}
    void put(std::string_view bytes) override {
        if (spill.empty() && writer.try_write(bytes)) return;
        spill.append(bytes);
    }
    std::size_t pending() const noexcept { return writer.buffered() + spill.size(); }

    galay::io::BufWriter<galay::TcpStream> writer;
    std::string spill;
};

/// Counts a connection among its shard's open ones while it lives.
struct Open {
    explicit Open(Stats& s) noexcept
        : stats(s) {
        ++stats.connections;
        ++stats.open;
    }
    ~Open() { --stats.open; }
    Stats& stats;
};

} // namespace

galay::Task<void> serve_connection(Server& server, galay::TcpStream conn) {
    // The connection stays on the worker that accepted it: this worker's shard, for its life.
    Shard& shard = server.keyspace.local();
    Stats& stats = shard.stats;
    const Open open(stats);
    // A request must fit in the reader: the largest bulk string and its length lines.
    galay::io::BufReader reader(conn, kMaxBulk + 4 * kMaxLine);
    Output output(conn, server.options.flush_at);
    Replies out(&output);
    RequestParser parser;
    for (;;) {
        const std::uint64_t scanned = parser.bytes_scanned();
        const RequestParser::Status status = parser.parse(reader.buffered());
        stats.parser_bytes += parser.bytes_scanned() - scanned;
        bool close = status == RequestParser::Status::error;
        if (close) {
            out.error(parser.error()); // as Redis: answer, then close
        } else if (status == RequestParser::Status::complete) {
            const Args args = parser.args(); // views into the reader's buffer
            if (!args.empty()) {
                ++stats.commands;
                const Command* cmd = find_command(args[0], server.options.extra_commands);
                try {
                    if (!reject(cmd, args, out) && !run_here(server, shard, cmd, args, out))
                        co_await run_anywhere(server, shard, cmd, args, out); // other shards
                } catch (const std::exception& e) {
                    // A command that throws (here or on its shard) answers an error: the
                    // connection and the server go on. (A command writes its reply last.)
                    out.error(error_text(std::string("ERR ") + e.what()));
                }
                close = cmd != nullptr && cmd->name == "quit";
            }
            stats.max_input = std::max<std::uint64_t>(stats.max_input, reader.buffered().size());
            stats.max_output = std::max<std::uint64_t>(stats.max_output, output.pending());
            reader.consume(parser.size());
            parser.reset();
            // Pipelining: run the next request already received before sending anything,
            // unless enough replies wait (then the client must take them first).
            if (!close && output.pending() < server.options.flush_at) continue;
        }
        // Nothing complete left, or closing, or enough waiting: send the replies.
        if (!output.spill.empty()) {
            auto sent = co_await output.writer.write(output.spill);
            if (!sent) co_return;
            output.spill.clear();
        }
        auto flushed = co_await output.writer.flush();
        if (!flushed || close) co_return;
        if (status == RequestParser::Status::complete) continue;
        // At rest between requests: galay::idle lets a draining server close the connection
        // here at once (the wait ends with operation_canceled), and only here.
        // recv_pooled: on io_uring one multishot receive stays armed for the connection, so a
        // request costs no submission to wait for it; the bytes are copied behind the ones
        // buffered (a request can span receives).
        auto received = co_await galay::idle(conn.recv_pooled());
        if (!received || received->empty()) co_return;
        if (!reader.append({received->data(), received->size()})) co_return; // past the limit
    }
}

} // namespace mini_redis
