// mini_redis/connection.cpp: the request/reply loop of one connection (see connection.hpp).
//
// Memory per connection is bounded on both sides. Reading: the buffer grows to hold one request
// (at most a 512 MiB bulk string, refused from its length line before it is read). Writing: once
// `flush_at` bytes of replies wait, they are sent before the next request is run, and the loop
// reads nothing more until the client has taken them, so a client that never reads its replies
// holds one batch of replies and stops being served (the kernel's socket buffers fill); the
// other connections of its worker go on.
#include "mini_redis/connection.hpp"

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

/// Counts a connection among the open ones while it lives.
struct Open {
    explicit Open(std::atomic<std::uint64_t>& n) noexcept
        : open(n)
        , before(n.fetch_add(1, std::memory_order_relaxed)) {}
    ~Open() { open.fetch_sub(1, std::memory_order_relaxed); }
    std::atomic<std::uint64_t>& open;
    std::uint64_t before; // open connections when this one came
};

} // namespace

galay::Task<void> serve_connection(Server& server, galay::TcpStream conn) {
    WorkerStats& stats = server.local_stats();
    WorkerStats::add(stats.connections);
    const Open open(server.open);
    if (open.before >= server.options.max_connections) {
        WorkerStats::add(stats.rejected);
        auto sent =
            co_await conn.send_all(std::string_view("-ERR max number of clients reached\r\n"));
        (void)sent;
        co_return;
    }
    // A request must fit in the reader: the largest bulk string and its length lines.
    galay::io::BufReader reader(conn, kMaxBulk + 4 * kMaxLine);
    Output output(conn, server.options.flush_at);
    Replies out(&output);
    RequestParser parser;
    for (;;) {
        const std::uint64_t scanned = parser.bytes_scanned();
        const RequestParser::Status status = parser.parse(reader.buffered());
        WorkerStats::add(stats.parser_bytes, parser.bytes_scanned() - scanned);
        bool close = status == RequestParser::Status::error;
        if (close) {
            out.error(parser.error()); // as Redis: answer, then close
        } else if (status == RequestParser::Status::complete) {
            const Args args = parser.args(); // views into the reader's buffer
            if (!args.empty()) {
                WorkerStats::add(stats.commands);
                const Command* cmd = find_command(args[0], server.options.extra_commands);
                try {
                    if (!reject(cmd, args, out) && !run_here(server, cmd, args, out))
                        co_await run_anywhere(server, cmd, args, out); // another shard's keys
                } catch (const std::exception& e) {
                    // A command that throws (here or on its shard) answers an error: the
                    // connection and the server go on. (A command writes its reply last.)
                    out.error(error_text(std::string("ERR ") + e.what()));
                }
                close = cmd != nullptr && cmd->name == "quit";
            }
            WorkerStats::peak(stats.max_input, reader.buffered().size());
            WorkerStats::peak(stats.max_output, output.pending());
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
        // Between requests: where a draining server lets a connection go.
        if (server.draining.load(std::memory_order_relaxed) && reader.buffered().empty()) co_return;
        auto received = co_await reader.fill();
        if (!received || *received == 0) co_return;
    }
}

} // namespace mini_redis
