// mini_redis/commands.cpp: what each command does on one shard, the command table, and the checks
// before a command runs (routing.cpp says where it runs). Replies and error texts are Redis 7.0's,
// byte for byte, for every request the differential test sends (tests/mini_redis/test_diff.py).
#include "mini_redis/server.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <climits>
#include <string>

namespace mini_redis {
namespace {

/// Whether `a` is `word` (lower case) in any case.
bool is(std::string_view a, std::string_view word) noexcept {
    return a.size() == word.size() &&
           std::equal(a.begin(), a.end(), word.begin(), [](char x, char w) {
               return (x >= 'A' && x <= 'Z' ? static_cast<char>(x + 32) : x) == w;
           });
}

constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
constexpr std::string_view kSyntax = "ERR syntax error";

std::string invalid_expire(std::string_view cmd) {
    return "ERR invalid expire time in '" + std::string(cmd) + "' command";
}

// --- commands on one key (Route::key): they run on the key's shard ---------------------------

void get(Store& s, Args a, Replies& out) {
    if (Store::Entry* e = s.find(a[1]))
        out.bulk(e->value);
    else
        out.null();
}

// SET key value [NX | XX] [EX seconds | PX milliseconds]
void set(Store& s, Args a, Replies& out) {
    bool nx = false, xx = false;
    std::string_view unit, expire;
    for (std::size_t j = 3; j < a.size(); ++j) {
        if (is(a[j], "nx") && !xx)
            nx = true;
        else if (is(a[j], "xx") && !nx)
            xx = true;
        else if ((is(a[j], "ex") || is(a[j], "px")) && unit.empty() && j + 1 < a.size()) {
            unit = a[j];
            expire = a[++j];
        } else
            return out.error(kSyntax);
    }
    Millis deadline = 0;
    if (!unit.empty()) {
        long long n = 0;
        if (!parse_int(expire, n)) return out.error(kNotInteger);
        const bool seconds = is(unit, "ex");
        if (n <= 0 || (seconds && n > LLONG_MAX / 1000)) return out.error(invalid_expire("set"));
        const Millis now = now_ms();
        const long long ms = seconds ? n * 1000 : n;
        if (ms > LLONG_MAX - now) return out.error(invalid_expire("set"));
        deadline = now + ms;
    }
    const bool exists = s.find(a[1]) != nullptr;
    if ((nx && exists) || (xx && !exists)) return out.null();
    Store::Entry& e = s.set(a[1], a[2]);
    s.set_deadline(a[1], e, deadline);
    out.simple("OK");
}

void incr_by(Store& s, std::string_view key, long long by, Replies& out) {
    Store::Entry* e = s.find(key);
    long long v = 0;
    if (e != nullptr && !parse_int(e->value, v)) return out.error(kNotInteger);
    if ((by < 0 && v < 0 && by < LLONG_MIN - v) || (by > 0 && v > 0 && by > LLONG_MAX - v))
        return out.error("ERR increment or decrement would overflow");
    v += by;
    if (e != nullptr)
        e->value = std::to_string(v); // keeps the deadline, as Redis does
    else
        s.set(key, std::to_string(v));
    out.integer(v);
}

void incr(Store& s, Args a, Replies& out) {
    incr_by(s, a[1], 1, out);
}

void decr(Store& s, Args a, Replies& out) {
    incr_by(s, a[1], -1, out);
}

void incrby(Store& s, Args a, Replies& out) {
    long long by = 0;
    if (!parse_int(a[2], by)) return out.error(kNotInteger);
    incr_by(s, a[1], by, out);
}

// EXPIRE / PEXPIRE key time [NX | XX | GT | LT]
void expire_in(Store& s, Args a, Replies& out, bool seconds) {
    bool nx = false, xx = false, gt = false, lt = false;
    for (std::size_t j = 3; j < a.size(); ++j) {
        if (is(a[j], "nx"))
            nx = true;
        else if (is(a[j], "xx"))
            xx = true;
        else if (is(a[j], "gt"))
            gt = true;
        else if (is(a[j], "lt"))
            lt = true;
        else
            return out.error(error_text("ERR Unsupported option " + std::string(a[j])));
    }
    if (nx && (xx || gt || lt))
        return out.error("ERR NX and XX, GT or LT options at the same time are not compatible");
    if (gt && lt) return out.error("ERR GT and LT options at the same time are not compatible");
    long long when = 0;
    if (!parse_int(a[2], when)) return out.error(kNotInteger);
    const char* name = seconds ? "expire" : "pexpire";
    if (seconds) {
        if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000)
            return out.error(invalid_expire(name));
        when *= 1000;
    }
    const Millis now = now_ms();
    if (when > LLONG_MAX - now) return out.error(invalid_expire(name));
    when += now;
    Store::Entry* e = s.find(a[1]);
    if (e == nullptr) return out.integer(0);
    const Millis current = e->deadline; // 0: none, which GT and LT take as infinite
    if ((nx && current != 0) || (xx && current == 0) || (gt && (current == 0 || when <= current)) ||
        (lt && current != 0 && when >= current))
        return out.integer(0);
    if (when <= now)
        s.erase(a[1]); // a deadline already past deletes the key
    else
        s.set_deadline(a[1], *e, when);
    out.integer(1);
}

void expire(Store& s, Args a, Replies& out) {
    expire_in(s, a, out, true);
}

void pexpire(Store& s, Args a, Replies& out) {
    expire_in(s, a, out, false);
}

void ttl_in(Store& s, Args a, Replies& out, bool ms) {
    Store::Entry* e = s.find(a[1]);
    if (e == nullptr) return out.integer(-2);
    if (e->deadline == 0) return out.integer(-1);
    const long long left = std::max<long long>(e->deadline - now_ms(), 0);
    out.integer(ms ? left : (left + 500) / 1000);
}

void ttl(Store& s, Args a, Replies& out) {
    ttl_in(s, a, out, false);
}

void pttl(Store& s, Args a, Replies& out) {
    ttl_in(s, a, out, true);
}

void persist(Store& s, Args a, Replies& out) {
    Store::Entry* e = s.find(a[1]);
    const bool had = e != nullptr && e->deadline != 0;
    if (had) s.set_deadline(a[1], *e, 0);
    out.integer(had ? 1 : 0);
}

// --- commands that touch no key (Route::here) -------------------------------------------------

void ping(Server&, Args a, Replies& out) {
    if (a.size() > 2) return out.error("ERR wrong number of arguments for 'ping' command");
    if (a.size() == 2) return out.bulk(a[1]);
    out.simple("PONG");
}

void echo(Server&, Args a, Replies& out) {
    out.bulk(a[1]);
}

void quit(Server&, Args, Replies& out) {
    out.simple("OK"); // the connection closes after sending it
}

void command_entry(const Command& c, Replies& out) {
    const bool keys = c.route == Route::key || c.route == Route::keys || c.route == Route::pairs;
    out.array(6);
    out.bulk(c.name);
    out.integer(c.arity);
    out.array(0); // flags
    out.integer(keys ? 1 : 0);
    out.integer(c.route == Route::key ? 1 : keys ? -1 : 0);
    out.integer(c.route == Route::pairs ? 2 : keys ? 1 : 0);
}

// COMMAND [COUNT | DOCS | INFO name...]: what clients ask for at start-up.
void command(Server& server, Args a, Replies& out) {
    const auto& extra = server.options.extra_commands;
    const std::size_t count = builtin_commands().size() + extra.size();
    if (a.size() == 1) {
        out.array(count);
        for (const Command& c : builtin_commands())
            command_entry(c, out);
        for (const Command& c : extra)
            command_entry(c, out);
    } else if (is(a[1], "count")) {
        out.integer(static_cast<long long>(count));
    } else if (is(a[1], "docs")) {
        out.array(0);
    } else if (is(a[1], "info")) {
        out.array(a.size() - 2);
        for (std::size_t i = 2; i < a.size(); ++i) {
            if (const Command* c = find_command(a[i], extra))
                command_entry(*c, out);
            else
                out.null();
        }
    } else {
        out.error(
            error_text("ERR unknown subcommand '" + std::string(a[1]) + "'. Try COMMAND HELP."));
    }
}

// CONFIG GET pattern...: the few parameters clients read (redis-benchmark asks for two).
void config(Server& server, Args a, Replies& out) {
    if (!is(a[1], "get"))
        return out.error(
            error_text("ERR unknown subcommand '" + std::string(a[1]) + "'. Try CONFIG HELP."));
    if (a.size() < 3) return out.error("ERR wrong number of arguments for 'config|get' command");
    const std::string params[][2] = {
        {"maxclients", std::to_string(server.options.max_connections)},
        {"port", std::to_string(server.options.port)},
        {"save", ""},
        {"appendonly", "no"},
        {"databases", "1"},
    };
    // A name without a glob character comes back as it was asked (Redis's reply does that too).
    std::vector<std::pair<std::string_view, const std::string*>> hits;
    for (const auto& p : params)
        for (std::size_t i = 2; i < a.size(); ++i)
            if (::fnmatch(std::string(a[i]).c_str(), p[0].c_str(), FNM_CASEFOLD) == 0) {
                const bool glob = a[i].find_first_of("*?[") != std::string_view::npos;
                hits.emplace_back(glob ? std::string_view(p[0]) : a[i], &p[1]);
                break;
            }
    out.array(hits.size() * 2);
    for (const auto& [name, value] : hits) {
        out.bulk(name);
        out.bulk(*value);
    }
}

constexpr Command kCommands[] = {
    // The benchmark's two first: the table is searched in order.
    {"get", 2, Route::key, get},
    {"set", -3, Route::key, set},
    {"ping", -1, Route::here, nullptr, ping},
    {"echo", 2, Route::here, nullptr, echo},
    {"del", -2, Route::keys},
    {"exists", -2, Route::keys},
    {"incr", 2, Route::key, incr},
    {"decr", 2, Route::key, decr},
    {"incrby", 3, Route::key, incrby},
    {"mget", -2, Route::keys},
    {"mset", -3, Route::pairs},
    {"expire", -3, Route::key, expire},
    {"pexpire", -3, Route::key, pexpire},
    {"ttl", 2, Route::key, ttl},
    {"pttl", 2, Route::key, pttl},
    {"persist", 2, Route::key, persist},
    {"dbsize", 1, Route::all},
    {"flushall", -1, Route::all},
    {"info", -1, Route::all},
    {"quit", -1, Route::here, nullptr, quit},
    {"command", -1, Route::here, nullptr, command},
    {"config", -2, Route::here, nullptr, config},
};

} // namespace

std::span<const Command> builtin_commands() noexcept {
    return kCommands;
}

const Command* find_command(std::string_view name, std::span<const Command> extra) noexcept {
    for (const Command& c : kCommands)
        if (is(name, c.name)) return &c;
    for (const Command& c : extra)
        if (is(name, c.name)) return &c;
    return nullptr;
}

bool reject(const Command* cmd, Args a, Replies& out) {
    if (cmd == nullptr) {
        // Redis's text: the name and the first arguments, quoted, up to 128 characters.
        std::string name(a[0].substr(0, 128)), args;
        for (std::size_t i = 1; i < a.size() && args.size() < 128; ++i) {
            // Appended piece by piece: "'" + std::string(...) draws g++ 12's false -Wrestrict.
            args += '\'';
            args += a[i].substr(0, a[i].find('\0')).substr(0, 128 - args.size() + 1);
            args += "' ";
        }
        out.error(error_text("ERR unknown command '" + name.substr(0, name.find('\0')) +
                             "', with args beginning with: " + args));
        return true;
    }
    const auto n = static_cast<int>(a.size());
    if ((cmd->arity > 0 && n != cmd->arity) || (cmd->arity < 0 && n < -cmd->arity) ||
        (cmd->route == Route::pairs && n % 2 == 0)) {
        out.error("ERR wrong number of arguments for '" + std::string(cmd->name) + "' command");
        return true;
    }
    // FLUSHALL's one option (the others take theirs where they run).
    if (cmd->name == "flushall" && a.size() > 1 &&
        !(a.size() == 2 && (is(a[1], "async") || is(a[1], "sync")))) {
        out.error(kSyntax);
        return true;
    }
    return false;
}

} // namespace mini_redis
