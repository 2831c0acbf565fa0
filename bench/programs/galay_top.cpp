// galay-top HOST:PORT: a live console for a galay program's metrics endpoint (GET /tasks and
// GET /metrics of galay/metrics_endpoint.hpp, as bench_server --metrics and http_server serve
// them): tasks by state, the longest waits (a when_all / when_any with its pending children),
// per-worker load, longest loop turn and stalls, refreshed every second in
// the style of top (plain ANSI escapes). --once prints one snapshot and exits, for scripts.
//
//     galay-top 127.0.0.1:9100            # until Ctrl-C
//     galay-top --once 127.0.0.1:9100     # one screen on stdout
//
// Exit codes: 0, 1 when the endpoint cannot be reached or answers something else, 2 bad
// arguments. Blocking sockets only: it is a client of one request a second.
#include "common/cli.hpp"

#include <nlohmann/json.hpp>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Args {
    std::string target; // HOST:PORT
    std::string host;
    std::string port;
    bool once = false;
    unsigned interval_ms = 1000;
    unsigned rows = 15;
};

struct Fetch {
    std::string body;
    std::string error; // empty: ok
};

/// GET `path` from host:port over one connection (Connection: close), 5 s bound per receive.
Fetch http_get(const Args& a, const std::string& path) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (const int rc = ::getaddrinfo(a.host.c_str(), a.port.c_str(), &hints, &res); rc != 0)
        return {{}, "cannot resolve " + a.host + ": " + ::gai_strerror(rc)};
    int fd = -1;
    std::string why = "no address";
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        timeval tv{.tv_sec = 5, .tv_usec = 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        why = std::strerror(errno);
        ::close(fd);
        fd = -1;
    }
    ::freeaddrinfo(res);
    if (fd < 0) return {{}, "cannot connect to " + a.target + ": " + why};
    const std::string req =
        "GET " + path + " HTTP/1.1\r\nHost: " + a.host + "\r\nConnection: close\r\n\r\n";
    std::string in;
    bool ok = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
    char buf[16384];
    ssize_t n;
    while (ok && (n = ::recv(fd, buf, sizeof buf, 0)) > 0)
        in.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    const std::size_t head_end = in.find("\r\n\r\n");
    if (!ok || head_end == std::string::npos)
        return {{}, a.target + path + ": no HTTP answer (is it a galay metrics endpoint?)"};
    const std::string status = in.substr(0, in.find("\r\n"));
    if (status.find(" 200 ") == std::string::npos) return {{}, a.target + path + ": " + status};
    return {in.substr(head_end + 4), {}};
}

/// Per-worker values of one family of the Prometheus text ("galay_<name>{worker="N"} v").
std::map<int, double> per_worker(const std::string& text, const std::string& name) {
    std::map<int, double> out;
    const std::string prefix = "galay_" + name + "{worker=\"";
    for (std::size_t at = text.find(prefix); at != std::string::npos;
         at = text.find(prefix, at + 1)) {
        if (at != 0 && text[at - 1] != '\n') continue;
        const std::size_t w = at + prefix.size();
        const std::size_t close = text.find("\"}", w);
        if (close == std::string::npos) continue;
        const int worker = std::atoi(text.c_str() + w);
        out[worker] = std::strtod(text.c_str() + close + 2, nullptr);
    }
    return out;
}

std::string ms(double ns) {
    char buf[32];
    if (ns >= 10e9)
        std::snprintf(buf, sizeof buf, "%.1f s", ns / 1e9);
    else
        std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
    return buf;
}

std::string wait_text(const nlohmann::json& w) {
    std::string s = w.value("what", "?");
    if (w.value("fd", -1) >= 0) s += " fd " + std::to_string(w.value("fd", -1));
    if (w.value("bytes", 0ull) != 0) s += " " + std::to_string(w.value("bytes", 0ull)) + " B";
    if (w.contains("object_name")) s += " \"" + w.value("object_name", "") + "\"";
    if (w.contains("holder")) s += " held by " + w.value("holder", "");
    if (w.contains("target")) s += " task " + w.value("target", "");
    if (w.contains("children")) // when_all / when_any
        s += " (" + std::to_string(w.contains("pending") ? w["pending"].size() : 0) + " of " +
             std::to_string(w.value("children", 0u)) + " children pending)";
    return s;
}

struct Sample {
    std::map<int, double> busy, parked;
};

/// One screen from a task dump and a scrape (`prev`: the last poll's figures, for busy %).
std::string render(const Args& a, const nlohmann::json& dump, const std::string& metrics,
                   Sample& prev) {
    std::string out;
    char line[512];
    const auto& tasks = dump["tasks"];
    std::size_t ready = 0, waiting = 0;
    std::map<std::string, std::size_t> by_wait;
    for (const auto& t : tasks) {
        (t.value("state", "") == "ready" ? ready : waiting)++;
        for (const auto& w : t["waits"])
            by_wait[w.value("what", "?")]++;
    }
    std::snprintf(
        line, sizeof line, "galay-top %s   tasks %zu: %zu ready, %zu waiting   dump took %s\n",
        a.target.c_str(), tasks.size(), ready, waiting, ms(dump.value("took_ns", 0.0)).c_str());
    out += line;
    out += "waiting on:";
    for (const auto& [what, n] : by_wait)
        out += " " + what + " " + std::to_string(n);
    out += "\n\n";
    Sample now{per_worker(metrics, "busy_seconds_total"),
               per_worker(metrics, "parked_seconds_total")};
    const auto stalls = per_worker(metrics, "stalls_total");
    const auto turns = per_worker(metrics, "loop_turns_total");
    // The longest loop turn since the previous scrape (each scrape starts a new period).
    const auto longest_turn = per_worker(metrics, "longest_loop_turn_seconds");
    out += "WORKER  BACKEND    TASKS  BUSY%  LOOP TURNS  LONGEST TURN  STALLS  STATE\n";
    for (const auto& w : dump["workers"]) {
        const int id = w.value("worker", -1);
        const double db = now.busy[id] - prev.busy[id];
        const double dp = now.parked[id] - prev.parked[id];
        const double busy = db + dp > 0 ? 100.0 * db / (db + dp) : 0.0;
        const std::string state =
            w.value("answered", false)
                ? "ok"
                : "STUCK (no loop turn for " + ms(w.value("since_turn_ns", 0.0)) + ")";
        const std::string turn = longest_turn.contains(id) ? ms(longest_turn.at(id) * 1e9) : "-";
        std::snprintf(line, sizeof line, "%-7d %-10s %5zu  %5.1f  %10.0f  %12s  %6.0f  %s\n", id,
                      w.value("backend", "").c_str(), w.value("tasks", std::size_t{0}), busy,
                      turns.contains(id) ? turns.at(id) : 0.0, turn.c_str(),
                      stalls.contains(id) ? stalls.at(id) : 0.0, state.c_str());
        out += line;
    }
    prev = std::move(now);
    for (const auto& cycle : dump["deadlocks"]) {
        out += "DEADLOCK:";
        for (const auto& id : cycle)
            out += " task " + id.get<std::string>();
        out += " (each waits on a Mutex the next one holds)\n";
    }
    std::vector<const nlohmann::json*> longest;
    for (const auto& t : tasks)
        longest.push_back(&t);
    std::sort(longest.begin(), longest.end(), [](const auto* x, const auto* y) {
        return x->value("in_state_ns", 0ll) > y->value("in_state_ns", 0ll);
    });
    out += "\nLONGEST WAITS\nTASK          WORKER  STATE    FOR        NAME / ON / WHERE\n";
    for (std::size_t i = 0; i < longest.size() && i < a.rows; ++i) {
        const auto& t = *longest[i];
        std::string what = t.value("name", "");
        for (const auto& w : t["waits"])
            what += (what.empty() ? "" : "; ") + wait_text(w);
        if (!t["backtrace"].empty()) what += " in " + t["backtrace"][0].get<std::string>();
        std::snprintf(line, sizeof line, "%-13s %6d  %-7s  %-9s  %.200s\n",
                      t.value("id", "").c_str(), t.value("worker", -1),
                      t.value("state", "").c_str(), ms(t.value("in_state_ns", 0.0)).c_str(),
                      what.c_str());
        out += line;
    }
    return out;
}

} // namespace

int main(int argc, char** argv) {
    Args a;
    cli::App app{"A live console for a galay metrics endpoint (GET /tasks, GET /metrics)",
                 "galay-top"};
    app.add_option("endpoint", a.target, "HOST:PORT of the endpoint (bench_server --metrics)")
        ->required();
    app.add_flag("--once", a.once, "print one snapshot on stdout and exit");
    app.add_option("--interval-ms", a.interval_ms, "refresh period")
        ->check(galay::tools::whole(100, 60'000));
    app.add_option("--rows", a.rows, "tasks listed under LONGEST WAITS")
        ->check(galay::tools::whole(1, 10'000));
    if (auto code = galay::tools::parse_command_line(app, argc, argv, "galay-top")) return *code;
    const std::size_t colon = a.target.rfind(':');
    if (colon == std::string::npos || colon == 0)
        return galay::tools::print_exit(
            galay::tools::usage_error("galay-top", "endpoint: expected HOST:PORT"));
    a.host = a.target.substr(0, colon);
    if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']')
        a.host = a.host.substr(1, a.host.size() - 2); // [::1]:9100
    a.port = a.target.substr(colon + 1);
    if (!galay::tools::parse_whole(a.port, 1, 65535))
        return galay::tools::print_exit(galay::tools::usage_error(
            "galay-top", "endpoint: port '" + a.port + "' is not a number in [1, 65535]"));
    Sample prev;
    for (;;) {
        const Fetch dump = http_get(a, "/tasks?format=json");
        const Fetch metrics = dump.error.empty() ? http_get(a, "/metrics") : Fetch{};
        const std::string& error = !dump.error.empty() ? dump.error : metrics.error;
        if (!error.empty()) {
            std::fprintf(stderr, "galay-top: error: %s\n", error.c_str());
            return galay::tools::kExitFailure;
        }
        const nlohmann::json j = nlohmann::json::parse(dump.body, nullptr, false);
        if (j.is_discarded() || !j.contains("tasks") || !j.contains("workers")) {
            std::fprintf(stderr, "galay-top: error: %s/tasks?format=json: not a task dump\n",
                         a.target.c_str());
            return galay::tools::kExitFailure;
        }
        const std::string screen = render(a, j, metrics.body, prev);
        if (a.once) {
            std::fputs(screen.c_str(), stdout);
            return galay::tools::kExitOk;
        }
        std::fputs("\x1b[H\x1b[2J", stdout); // home, clear
        std::fputs(screen.c_str(), stdout);
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::milliseconds(a.interval_ms));
    }
}
