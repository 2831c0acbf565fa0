// The two forms of a task dump: text for people, JSON for tools (GET /tasks, galay-top).
#include "galay/task_dump.hpp"

#include <charconv>
#include <cinttypes>
#include <cstdio>

namespace galay {

namespace {

// The text form appends into one string: a dump of 100,000 tasks is half a million lines, and a
// temporary string per piece was most of the time it took to print.
void append_ms(std::string& out, std::chrono::nanoseconds d) {
    char buf[32];
    const double v = static_cast<double>(d.count()) / 1e6;
    const int n = v >= 10'000 || v <= -10'000 ? std::snprintf(buf, sizeof buf, "%.1f s", v / 1000)
                                              : std::snprintf(buf, sizeof buf, "%.1f ms", v);
    out.append(buf, static_cast<std::size_t>(n));
}

std::string address(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

template <typename Int>
void append_int(std::string& out, Int v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
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
    out += "\":" + std::to_string(v) + ",";
}

void end_object(std::string& out) {
    if (out.back() == ',') out.pop_back();
    out += '}';
}

} // namespace

std::string TaskDump::text() const {
    std::string out;
    // About 120 bytes per task line and its wait and frames: one allocation for most dumps.
    out.reserve(256 + 80 * workers.size() + 160 * tasks.size());
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
    for (const TaskInfo& t : tasks) {
        out += '\n';
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
        out += '\n';
        if (!t.spawned_at.empty()) {
            out += "  spawned at ";
            out += t.spawned_at;
            out += '\n';
        }
        for (const TaskWait& w : t.waits) {
            out += "  waits on ";
            append_wait(out, w);
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
    return out;
}

std::string TaskDump::json() const {
    std::string out = "{";
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
        json_field(out, "id", format_task_id(t.id));
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
            if (w.holder != 0) json_field(out, "holder", format_task_id(w.holder));
            if (w.target != 0) {
                json_field(out, "target", format_task_id(w.target));
                json_number(out, "target_worker", w.target_worker);
            }
            end_object(out);
            out += ',';
        }
        if (out.back() == ',') out.pop_back();
        out += "],\"backtrace\":[";
        for (const TaskFrame& f : t.backtrace) {
            json_string(out, f.function);
            out += ',';
        }
        if (out.back() == ',') out.pop_back();
        out += "]},";
    }
    if (out.back() == ',') out.pop_back();
    out += "]}";
    return out;
}

} // namespace galay
