// The two forms of a task dump: text for people, JSON for tools (GET /tasks, galay-top).
#include "galay/task_dump.hpp"
#include "runtime/task_snapshot.hpp"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <unordered_map>
#include <vector>

namespace galay {

namespace {

// The text form appends into one string: a dump of 100,000 tasks is half a million lines, and a
// temporary string per piece was most of the time it took to print.
template <typename Int>
void append_int(std::string& out, Int v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

/// "12.3 ms", or "93.2 s" from 10 s on: one decimal, rounded half away from zero, in integers
/// (printf's floating-point formatting was a tenth of a large dump's time).
void append_ms(std::string& out, std::chrono::nanoseconds d) {
    const std::int64_t ns = d.count();
    const std::uint64_t mag = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : ns;
    const bool seconds = mag >= 10'000'000'000u;
    const std::uint64_t unit = seconds ? 100'000'000u : 100'000u; // a tenth of the unit shown
    const std::uint64_t tenths = (mag + unit / 2) / unit;
    if (ns < 0 && tenths != 0) out += '-';
    append_int(out, tenths / 10);
    out += '.';
    out += static_cast<char>('0' + tenths % 10);
    out += seconds ? " s" : " ms";
}

std::string address(const void* p) {
    char buf[24] = "0x";
    const auto r =
        std::to_chars(buf + 2, buf + sizeof buf, reinterpret_cast<std::uintptr_t>(p), 16);
    return std::string(buf, r.ptr);
}

void append_id(std::string& out, std::uint64_t id) {
    out += "task ";
    append_int(out, id >> 40);
    out += '.';
    append_int(out, id & ((std::uint64_t{1} << 40) - 1));
}

void append_worker(std::string& out, int worker) {
    if (worker < 0) {
        out += "scheduler";
        return;
    }
    out += "worker ";
    append_int(out, worker);
}

void append_wait(std::string& out, const TaskWait& w) {
    out += w.what;
    if (w.fd >= 0) {
        out += " fd ";
        append_int(out, w.fd);
    }
    if (w.bytes != 0) {
        out += ", ";
        append_int(out, w.bytes);
        out += " bytes";
    }
    if (w.object != nullptr) {
        out += ' ';
        out += address(w.object);
        if (!w.object_name.empty()) {
            out += " \"";
            out += w.object_name;
            out += '"';
        }
    }
    if (w.what == "mutex") {
        if (w.holder != 0) {
            out += ", held by ";
            append_id(out, w.holder);
        } else {
            out += ", holder unknown";
        }
    }
    if (w.children != 0) {
        out += ": ";
        append_int(out, w.children);
        out += w.children == 1 ? " child, " : " children, ";
        append_int(out, w.pending.size());
        out += " pending";
    }
    if (w.target != 0) {
        out += " of ";
        append_id(out, w.target);
        if (w.target_worker >= 0) {
            out += " (worker ";
            append_int(out, w.target_worker);
            out += ')';
        }
    }
    if (w.deadline_in) {
        if (*w.deadline_in >= std::chrono::nanoseconds(0)) {
            out += ", deadline in ";
            append_ms(out, *w.deadline_in);
        } else {
            out += ", deadline passed";
        }
    }
    out += ", waiting ";
    append_ms(out, w.waited);
}

void json_string(std::string& out, std::string_view s) {
    out += '"';
    for (const char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                out += buf;
            } else {
                out += c;
            }
        }
    }
    out += '"';
}

void json_field(std::string& out, const char* key, std::string_view v) {
    out += '"';
    out += key;
    out += "\":";
    json_string(out, v);
    out += ',';
}

void json_number(std::string& out, const char* key, long long v) {
    out += '"';
    out += key;
    out += "\":";
    append_int(out, v);
    out += ',';
}

void json_id(std::string& out, const char* key, std::uint64_t id) {
    out += '"';
    out += key;
    out += "\":\"";
    append_int(out, id >> 40);
    out += '.';
    append_int(out, id & ((std::uint64_t{1} << 40) - 1));
    out += "\",";
}

/// "backtrace":[names], leaf first.
void json_frames(std::string& out, const std::vector<TaskFrame>& frames) {
    out += "\"backtrace\":[";
    for (const TaskFrame& f : frames) {
        json_string(out, f.function);
        out += ',';
    }
    if (out.back() == ',') out.pop_back();
    out += ']';
}

void end_object(std::string& out) {
    if (out.back() == ',') out.pop_back();
    out += '}';
}

} // namespace

namespace {

/// Tasks with the same spawn site and async backtrace (thousands of connections parked in the
/// same read, say) share one stack: it is printed once and each task names it, as Go's grouped
/// goroutine profile does.
struct SameStack {
    static std::size_t hash(const TaskInfo* t) noexcept {
        std::size_t h = std::hash<std::string_view>{}(t->spawned_at);
        for (const TaskFrame& f : t->backtrace)
            h = h * 31 + std::hash<std::string_view>{}(f.function);
        return h;
    }
    std::size_t operator()(const TaskInfo* t) const noexcept { return hash(t); }
    bool operator()(const TaskInfo* a, const TaskInfo* b) const noexcept {
        return a->spawned_at == b->spawned_at &&
               std::equal(a->backtrace.begin(), a->backtrace.end(), b->backtrace.begin(),
                          b->backtrace.end(), [](const TaskFrame& x, const TaskFrame& y) {
                              return x.function == y.function;
                          });
    }
};

void append_stack(std::string& out, const TaskInfo& t) {
    if (!t.spawned_at.empty()) {
        out += "  spawned at ";
        out += t.spawned_at;
        out += '\n';
    }
    for (std::size_t i = 0; i < t.backtrace.size(); ++i) {
        out += "  #";
        append_int(out, i);
        out += ' ';
        out += t.backtrace[i].function;
        out += '\n';
    }
}

} // namespace

std::string detail::dump_text(const TaskDump& d) {
    const auto& workers = d.workers;
    const auto& tasks = d.tasks;
    const auto& deadlocks = d.deadlocks;
    const auto took = d.took;
    // Group the tasks by stack first: index of each task's stack, how many share it, and the
    // numbers shown for stacks shared by two tasks or more (1, 2, ... in order of first use).
    constexpr std::uint32_t kNone = ~std::uint32_t{0};
    std::vector<std::uint32_t> stack_of(tasks.size(), kNone);
    std::vector<const TaskInfo*> firsts;
    std::vector<std::uint32_t> counts;
    {
        std::unordered_map<const TaskInfo*, std::uint32_t, SameStack, SameStack> stacks;
        stacks.reserve(64);
        for (std::size_t i = 0; i < tasks.size(); ++i) {
            const TaskInfo& t = tasks[i];
            if (t.spawned_at.empty() && t.backtrace.empty()) continue; // nothing to show
            const auto [it, added] =
                stacks.try_emplace(&t, static_cast<std::uint32_t>(firsts.size()));
            if (added) {
                firsts.push_back(&t);
                counts.push_back(0);
            }
            stack_of[i] = it->second;
            ++counts[it->second];
        }
    }
    std::vector<std::uint32_t> shown(firsts.size(), 0); // 0: printed with its only task
    std::uint32_t shared = 0;
    for (std::size_t s = 0; s < firsts.size(); ++s)
        if (counts[s] > 1) shown[s] = ++shared;

    std::string out;
    // About 100 bytes per task line and its wait: one allocation for most dumps.
    out.reserve(256 + 80 * workers.size() + 100 * tasks.size());
    out += "galay task dump: ";
    append_int(out, tasks.size());
    out += " tasks on ";
    append_int(out, workers.size());
    out += " workers (";
    append_ms(out, took);
    out += ")\n";
    for (const WorkerDumpInfo& w : workers) {
        append_worker(out, w.worker);
        out += " (";
        out += w.backend;
        out += "): ";
        if (w.answered) {
            append_int(out, w.tasks);
            out += " tasks, snapshot held its loop ";
            append_ms(out, w.pause);
            out += " (CPU ";
            append_ms(out, w.pause_cpu);
            out += ")";
        } else {
            out += "STUCK: did not answer; no loop turn for ";
            append_ms(out, w.since_turn);
            out += ", ";
            append_int(out, w.stalls);
            out += " stalls reported";
        }
        out += '\n';
    }
    for (const auto& cycle : deadlocks) {
        out += "DEADLOCK: ";
        for (const std::uint64_t id : cycle) {
            append_id(out, id);
            out += " -> ";
        }
        append_id(out, cycle.front());
        out += " (each waits on a Mutex the next one holds)\n";
    }
    for (std::size_t s = 0; s < firsts.size(); ++s) {
        if (shown[s] == 0) continue;
        out += "\nstack ";
        append_int(out, shown[s]);
        out += ": ";
        append_int(out, counts[s]);
        out += " tasks\n";
        append_stack(out, *firsts[s]);
    }
    bool compact = false; // the previous task took one block of lines without its own stack
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        const TaskInfo& t = tasks[i];
        const std::uint32_t number = stack_of[i] == kNone ? 0 : shown[stack_of[i]];
        // A task showing its own stack is a paragraph; tasks naming a shared one are a list.
        if (number == 0 || !compact) out += '\n';
        compact = number != 0;
        append_id(out, t.id);
        if (!t.name.empty()) {
            out += " \"";
            out += t.name;
            out += '"';
        }
        out += ' ';
        append_worker(out, t.worker);
        out += ": ";
        if (t.state == TaskState::ready) {
            out += "ready";
        } else {
            out += "waiting ";
            append_ms(out, t.in_state);
        }
        if (number != 0) {
            out += ", stack ";
            append_int(out, number);
        }
        out += '\n';
        for (const TaskWait& w : t.waits) {
            out += "  waits on ";
            append_wait(out, w);
            out += '\n';
            for (const TaskChild& c : w.pending) { // "child 1: leaf() <- fetch()"
                out += "    child ";
                append_int(out, c.index);
                out += ':';
                for (std::size_t f = 0; f < c.backtrace.size(); ++f) {
                    out += f == 0 ? " " : " <- ";
                    out += c.backtrace[f].function;
                }
                out += '\n';
            }
        }
        if (number == 0) append_stack(out, t);
    }
    return out;
}

std::string detail::dump_json(const TaskDump& d) {
    const auto& workers = d.workers;
    const auto& tasks = d.tasks;
    const auto& deadlocks = d.deadlocks;
    const auto took = d.took;
    std::string out = "{";
    out.reserve(256 + 200 * workers.size() + 300 * tasks.size());
    json_number(out, "took_ns", took.count());
    out += "\"workers\":[";
    for (const WorkerDumpInfo& w : workers) {
        out += '{';
        json_number(out, "worker", w.worker);
        json_field(out, "backend", w.backend);
        out += std::string("\"answered\":") + (w.answered ? "true," : "false,");
        json_number(out, "tasks", static_cast<long long>(w.tasks));
        json_number(out, "stalls", static_cast<long long>(w.stalls));
        json_number(out, "since_turn_ns", w.since_turn.count());
        json_number(out, "pause_ns", w.pause.count());
        json_number(out, "pause_cpu_ns", w.pause_cpu.count());
        json_number(out, "snapshot_cpu_ns", w.snapshot_cpu.count());
        json_number(out, "chunks", static_cast<long long>(w.chunks));
        end_object(out);
        out += ',';
    }
    if (out.back() == ',') out.pop_back();
    out += "],\"deadlocks\":[";
    for (const auto& cycle : deadlocks) {
        out += '[';
        for (const std::uint64_t id : cycle) {
            json_string(out, format_task_id(id));
            out += ',';
        }
        if (out.back() == ',') out.pop_back();
        out += "],";
    }
    if (out.back() == ',') out.pop_back();
    out += "],\"tasks\":[";
    for (const TaskInfo& t : tasks) {
        out += '{';
        json_id(out, "id", t.id);
        json_field(out, "name", t.name);
        json_number(out, "worker", t.worker);
        json_field(out, "state", t.state == TaskState::ready ? "ready" : "waiting");
        json_number(out, "in_state_ns", t.in_state.count());
        json_field(out, "spawned_at", t.spawned_at);
        out += "\"waits\":[";
        for (const TaskWait& w : t.waits) {
            out += '{';
            json_field(out, "what", w.what);
            json_number(out, "fd", w.fd);
            json_number(out, "bytes", static_cast<long long>(w.bytes));
            if (w.deadline_in) json_number(out, "deadline_in_ns", w.deadline_in->count());
            json_number(out, "waited_ns", w.waited.count());
            if (w.object != nullptr) json_field(out, "object", address(w.object));
            if (!w.object_name.empty()) json_field(out, "object_name", w.object_name);
            if (w.holder != 0) json_id(out, "holder", w.holder);
            if (w.target != 0) {
                json_id(out, "target", w.target);
                json_number(out, "target_worker", w.target_worker);
            }
            if (w.children != 0) {
                json_number(out, "children", static_cast<long long>(w.children));
                out += "\"pending\":[";
                for (const TaskChild& c : w.pending) {
                    out += '{';
                    json_number(out, "index", static_cast<long long>(c.index));
                    json_frames(out, c.backtrace);
                    out += "},";
                }
                if (out.back() == ',') out.pop_back();
                out += "],";
            }
            end_object(out);
            out += ',';
        }
        if (out.back() == ',') out.pop_back();
        out += "],";
        json_frames(out, t.backtrace);
        out += "},";
    }
    if (out.back() == ',') out.pop_back();
    out += "]}";
    return out;
}

} // namespace galay
