// The two forms of a task dump: text for people, JSON for tools (GET /tasks, galay-top).
#include "galay/task_dump.hpp"

#include <cinttypes>
#include <cstdio>

namespace galay {

namespace {

std::string ms(std::chrono::nanoseconds d) {
    char buf[32];
    const double v = static_cast<double>(d.count()) / 1e6;
    if (v >= 10'000 || v <= -10'000)
        std::snprintf(buf, sizeof buf, "%.1f s", v / 1000);
    else
        std::snprintf(buf, sizeof buf, "%.1f ms", v);
    return buf;
}

std::string address(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

std::string id_text(std::uint64_t id) {
    return "task " + format_task_id(id);
}

std::string worker_text(int worker) {
    return worker >= 0 ? "worker " + std::to_string(worker) : std::string("scheduler");
}

std::string wait_text(const TaskWait& w) {
    std::string s = w.what;
    if (w.fd >= 0) s += " fd " + std::to_string(w.fd);
    if (w.bytes != 0) s += ", " + std::to_string(w.bytes) + " bytes";
    if (w.object != nullptr) {
        s += " " + address(w.object);
        if (!w.object_name.empty()) s += " \"" + w.object_name + "\"";
    }
    if (w.what == "mutex")
        s += w.holder != 0 ? ", held by " + id_text(w.holder) : ", holder unknown";
    if (w.target != 0) {
        s += " of " + id_text(w.target);
        if (w.target_worker >= 0) s += " (worker " + std::to_string(w.target_worker) + ")";
    }
    if (w.deadline_in)
        s += *w.deadline_in >= std::chrono::nanoseconds(0) ? ", deadline in " + ms(*w.deadline_in)
                                                           : ", deadline passed";
    s += ", waiting " + ms(w.waited);
    return s;
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
    std::string out = "galay task dump: " + std::to_string(tasks.size()) + " tasks on " +
                      std::to_string(workers.size()) + " workers (" + ms(took) + ")\n";
    for (const WorkerDumpInfo& w : workers) {
        out += worker_text(w.worker) + " (" + w.backend + "): ";
        if (w.answered)
            out += std::to_string(w.tasks) + " tasks, snapshot held its loop " + ms(w.pause);
        else
            out += "STUCK: did not answer; no loop turn for " + ms(w.since_turn) + ", " +
                   std::to_string(w.stalls) + " stalls reported";
        out += '\n';
    }
    for (const auto& cycle : deadlocks) {
        out += "DEADLOCK: ";
        for (const std::uint64_t id : cycle)
            out += id_text(id) + " -> ";
        out += id_text(cycle.front()) + " (each waits on a Mutex the next one holds)\n";
    }
    for (const TaskInfo& t : tasks) {
        out += "\n" + id_text(t.id);
        if (!t.name.empty()) out += " \"" + t.name + "\"";
        out += " " + worker_text(t.worker) + ": ";
        out += t.state == TaskState::ready ? "ready" : "waiting " + ms(t.in_state);
        out += '\n';
        if (!t.spawned_at.empty()) out += "  spawned at " + t.spawned_at + "\n";
        for (const TaskWait& w : t.waits)
            out += "  waits on " + wait_text(w) + "\n";
        for (std::size_t i = 0; i < t.backtrace.size(); ++i)
            out += "  #" + std::to_string(i) + " " + t.backtrace[i].function + "\n";
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
