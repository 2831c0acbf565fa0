// mini_redis/routing.cpp: where a command runs: on the connection's own shard when everything it
// touches is there, else on the shards that own its keys, each asked in turn (see commands.hpp for
// what is atomic).
#include "mini_redis/server.hpp"

#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mini_redis {
namespace {

/// One shard's part of a multi-key command: the keys (and values, for MSET) it owns, copied so
/// that the shard's worker can read them whatever happens to the connection meanwhile.
struct Part {
    std::vector<std::string> args;
    std::vector<std::size_t> index; // where each key was in the request
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

/// What one shard answers for DBSIZE, FLUSHALL and INFO.
struct ShardSize {
    std::size_t keys = 0, with_deadline = 0;
};

ShardSize run_all(std::string_view name, Store& s) {
    if (name == "flushall") s.clear();
    return {s.size(), s.with_deadline()};
}

void write_all(Server& server, std::string_view name, ShardSize total, Replies& out) {
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
        "\r\n\r\n# Clients\r\nconnected_clients:" + std::to_string(server.open.load()) +
        "\r\nmaxclients:" + std::to_string(server.options.max_connections) +
        "\r\nclient_recent_max_input_buffer:" +
        std::to_string(server.largest(&WorkerStats::max_input)) +
        "\r\nclient_recent_max_output_buffer:" +
        std::to_string(server.largest(&WorkerStats::max_output)) +
        "\r\n\r\n# Stats\r\ntotal_connections_received:" +
        std::to_string(server.total(&WorkerStats::connections)) +
        "\r\ntotal_commands_processed:" + std::to_string(server.total(&WorkerStats::commands)) +
        "\r\nrejected_connections:" + std::to_string(server.total(&WorkerStats::rejected)) +
        "\r\nparser_bytes_scanned:" + std::to_string(server.total(&WorkerStats::parser_bytes)) +
        "\r\n\r\n# Keyspace\r\n";
    if (total.keys > 0)
        text += "db0:keys=" + std::to_string(total.keys) +
                ",expires=" + std::to_string(total.with_deadline) + ",avg_ttl=0\r\n";
    out.bulk(text);
}

/// Which arguments are keys (with their values, for MSET), split by shard.
std::vector<Part> split(const Keyspace& ks, const Command* cmd, Args a) {
    std::vector<Part> parts(ks.shards());
    const std::size_t step = cmd->route == Route::pairs ? 2 : 1;
    for (std::size_t i = 1; i + step - 1 < a.size(); i += step) {
        Part& p = parts[ks.shard_of(a[i])];
        p.index.push_back(i);
        for (std::size_t k = 0; k < step; ++k)
            p.args.emplace_back(a[i + k]);
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

bool run_here(Server& server, const Command* cmd, Args a, Replies& out) {
    Keyspace& ks = server.keyspace;
    const unsigned here = Keyspace::here();
    switch (cmd->route) {
    case Route::here:
        cmd->here(server, a, out);
        return true;
    case Route::key:
        if (ks.shard_of(a[1]) != here) return false;
        cmd->on_key(ks.local(), a, out);
        return true;
    case Route::keys:
    case Route::pairs: {
        const std::size_t step = cmd->route == Route::pairs ? 2 : 1;
        for (std::size_t i = 1; i < a.size(); i += step)
            if (ks.shard_of(a[i]) != here) return false;
        std::vector<PartResult> results{run_part(cmd->name, ks.local(), a.subspan(1))};
        std::vector<Part> parts(1);
        for (std::size_t i = 1; i < a.size(); i += step)
            parts[0].index.push_back(i);
        write_parts(cmd, a, results, parts, out);
        return true;
    }
    case Route::all:
        if (ks.shards() != 1) return false;
        write_all(server, cmd->name, run_all(cmd->name, ks.local()), out);
        return true;
    }
    return false;
}

galay::Task<void> run_anywhere(Server& server, const Command* cmd, Args a, Replies& out) {
    Keyspace& ks = server.keyspace;
    if (cmd->route == Route::key) {
        // The other shard formats the reply; its bytes come back and are copied out. (The
        // lambda is named before the co_await: g++ 12 destroys a lambda temporary that holds
        // copies twice when its statement suspends.)
        auto on_shard = [run = cmd->on_key,
                         args = std::vector<std::string>(a.begin(), a.end())](Store& s) {
            std::vector<std::string_view> views(args.begin(), args.end());
            Replies r;
            run(s, views, r);
            return std::move(r.bytes());
        };
        std::string bytes = co_await ks.on(ks.shard_of(a[1]), std::move(on_shard));
        out.raw(bytes);
    } else if (cmd->route == Route::all) {
        ShardSize total;
        for (unsigned s = 0; s < ks.shards(); ++s) {
            const ShardSize part =
                co_await ks.on(s, [name = cmd->name](Store& st) { return run_all(name, st); });
            total.keys += part.keys;
            total.with_deadline += part.with_deadline;
        }
        write_all(server, cmd->name, total, out);
    } else { // keys, pairs: one part per shard, in shard order
        std::vector<Part> parts = split(ks, cmd, a);
        std::vector<PartResult> results(parts.size());
        for (unsigned s = 0; s < parts.size(); ++s) {
            if (parts[s].index.empty()) continue;
            auto part = [name = cmd->name, args = std::move(parts[s].args)](Store& st) {
                std::vector<std::string_view> views(args.begin(), args.end());
                return run_part(name, st, views);
            };
            results[s] = co_await ks.on(s, std::move(part));
        }
        write_parts(cmd, a, results, parts, out);
    }
}

} // namespace mini_redis
