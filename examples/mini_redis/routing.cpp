// mini_redis/routing.cpp: where a command runs: on the connection's own shard when everything it
// touches is there, else on the shards that own its keys, asked through the keyspace's invoke_on
// (see commands.hpp for what is atomic).
#include "mini_redis/server.hpp"

#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mini_redis {
namespace {

/// One shard's part of a multi-key command: the keys (and values, for MSET) it owns.
struct Part {
    std::vector<std::string_view> args; // views into the request
    std::vector<std::size_t> index;     // where each key was in the request
};

/// What one shard answers for its part: a count (DEL, EXISTS) or values (MGET).
struct PartResult {
    long long count = 0;
    std::vector<std::optional<std::string>> values;
};

PartResult run_part(std::string_view name, Store& s, Args args) {
    PartResult r;
    if (name == "mset") {
        for (std::size_t i = 0; i + 1 < args.size(); i += 2)
            s.set(args[i], args[i + 1]);
        return r;
    }
    for (std::string_view key : args) {
        if (name == "del") {
            r.count += s.erase(key) ? 1 : 0;
        } else {
            Store::Entry* e = s.find(key);
            if (name == "exists")
                r.count += e != nullptr ? 1 : 0;
            else
                r.values.push_back(e ? std::optional<std::string>(e->value) : std::nullopt);
        }
    }
    return r;
}

/// DBSIZE, FLUSHALL and INFO, from the totals of every shard.
void write_all(const Server& server, std::string_view name, const Stats& total, Replies& out) {
    if (name == "dbsize") return out.integer(static_cast<long long>(total.keys));
    if (name == "flushall") return out.simple("OK");
    // INFO [section...]: every section, whatever is asked.
    const auto up = std::chrono::steady_clock::now() - server.started;
    std::string text =
        "# Server\r\nredis_version:7.0.0\r\nmini_redis:galay-kernel\r\nredis_mode:standalone\r\n"
        "multiplexing_api:" +
        std::string(galay::current_scheduler().backend_name()) +
        "\r\nprocess_id:" + std::to_string(::getpid()) +
        "\r\ntcp_port:" + std::to_string(server.options.port) + "\r\nuptime_in_seconds:" +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(up).count()) +
        "\r\nworkers:" + std::to_string(server.options.workers) +
        "\r\n\r\n# Clients\r\nconnected_clients:" + std::to_string(total.open) +
        "\r\nmaxclients:" + std::to_string(server.options.max_connections) +
        "\r\nclient_recent_max_input_buffer:" + std::to_string(total.max_input) +
        "\r\nclient_recent_max_output_buffer:" + std::to_string(total.max_output) +
        "\r\n\r\n# Stats\r\ntotal_connections_received:" + std::to_string(total.connections) +
        "\r\ntotal_commands_processed:" + std::to_string(total.commands) +
        "\r\nrejected_connections:" + std::to_string(total.rejected) +
        "\r\nparser_bytes_scanned:" + std::to_string(total.parser_bytes) + "\r\n\r\n# Keyspace\r\n";
    if (total.keys > 0)
        text += "db0:keys=" + std::to_string(total.keys) +
                ",expires=" + std::to_string(total.with_deadline) + ",avg_ttl=0\r\n";
    out.bulk(text);
}

/// Which arguments are keys (with their values, for MSET), split by shard.
std::vector<Part> split(unsigned shards, const Command* cmd, Args a) {
    std::vector<Part> parts(shards);
    const std::size_t step = cmd->route == Route::pairs ? 2 : 1;
    for (std::size_t i = 1; i + step - 1 < a.size(); i += step) {
        Part& p = parts[shard_of(a[i], shards)];
        p.index.push_back(i);
        for (std::size_t k = 0; k < step; ++k)
            p.args.push_back(a[i + k]);
    }
    return parts;
}

void write_parts(const Command* cmd, Args a, std::vector<PartResult>& results,
                 const std::vector<Part>& parts, Replies& out) {
    if (cmd->name == "mset") return out.simple("OK");
    if (cmd->name != "mget") {
        long long n = 0;
        for (const PartResult& r : results)
            n += r.count;
        return out.integer(n);
    }
    // MGET: the values back in the order of the keys.
    std::vector<const std::optional<std::string>*> at(a.size(), nullptr);
    for (std::size_t s = 0; s < parts.size(); ++s)
        for (std::size_t k = 0; k < parts[s].index.size(); ++k)
            at[parts[s].index[k]] = &results[s].values[k];
    out.array(a.size() - 1);
    for (std::size_t i = 1; i < a.size(); ++i) {
        if (*at[i])
            out.bulk(**at[i]);
        else
            out.null();
    }
}

} // namespace

bool run_here(Server& server, Shard& here, const Command* cmd, Args a, Replies& out) {
    const unsigned shards = server.keyspace.size();
    switch (cmd->route) {
    case Route::here:
        cmd->here(server, a, out);
        return true;
    case Route::key:
        if (shard_of(a[1], shards) != here.index) return false;
        cmd->on_key(here.store, a, out);
        return true;
    default: // several keys, or every shard: run_anywhere
        return false;
    }
}

galay::Task<void> run_anywhere(Server& server, Shard& here, const Command* cmd, Args a,
                               Replies& out) {
    Keyspace& keyspace = server.keyspace;
    if (cmd->route == Route::key) {
        // The owner formats the reply; its bytes come back and are copied out. The call owns
        // copies of the arguments: if this connection is cut while it waits, the owner still
        // runs the command to its end. (Bound before the co_await: g++ 12 destroys a lambda
        // temporary that holds copies twice when its statement suspends.)
        auto call = keyspace.invoke_on(
            shard_of(a[1], keyspace.size()),
            [run = cmd->on_key, args = std::vector<std::string>(a.begin(), a.end())](Shard& s) {
                std::vector<std::string_view> views(args.begin(), args.end());
                Replies r;
                run(s.store, views, r);
                return std::move(r.bytes());
            });
        std::string bytes = co_await std::move(call);
        out.raw(bytes);
    } else if (cmd->route == Route::all) {
        auto all = totals(keyspace, cmd->name == "flushall");
        const Stats total = co_await std::move(all);
        write_all(server, cmd->name, total, out);
    } else { // keys, pairs: one part per shard, one shard after the other
        std::vector<Part> parts = split(keyspace.size(), cmd, a);
        std::vector<PartResult> results(parts.size());
        for (unsigned s = 0; s < parts.size(); ++s) {
            if (parts[s].index.empty()) continue;
            if (s == here.index) { // this worker's part: no copies, no message
                results[s] = run_part(cmd->name, here.store, parts[s].args);
                continue;
            }
            // Another shard's part travels as copies: that worker reads them while this
            // connection's buffer may already hold other bytes.
            auto call = keyspace.invoke_on(
                s, [name = cmd->name, args = std::vector<std::string>(
                                          parts[s].args.begin(), parts[s].args.end())](Shard& sh) {
                    std::vector<std::string_view> views(args.begin(), args.end());
                    return run_part(name, sh.store, views);
                });
            results[s] = co_await std::move(call);
        }
        write_parts(cmd, a, results, parts, out);
    }
}

} // namespace mini_redis
