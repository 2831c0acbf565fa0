// A task dump on the dumping thread: frames named (dladdr + demangling, cached per function),
// mutex-wait cycles found, and the text and JSON forms (galay/task_dump.hpp).
#include "runtime/task_snapshot.hpp"

#include "galay/detail/spawned_task.hpp"
#include "runtime/elf_symbols.hpp"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace galay::detail {

namespace {

/// What a coroutine's resume function is called, made readable: GCC names it
/// "f(f()::_Z1fv.Frame*) [clone .actor]", Clang "f() [clone .resume]"; both become "f()".
std::string readable(std::string s) {
    if (const auto c = s.find(" [clone ."); c != std::string::npos) s.erase(c);
    // "(anonymous namespace)::" would be taken for an argument list below: set it aside.
    static constexpr std::string_view anon = "(anonymous namespace)";
    for (auto at = s.find(anon); at != std::string::npos; at = s.find(anon, at))
        s.replace(at, anon.size(), "{anonymous}");
    if (const auto frame = s.find(".Frame*)"); frame != std::string::npos) {
        // GCC: the actor takes the frame; the function's own signature is inside the argument
        // list, "f(" + "f(args)::..." : keep the inner "f(args)".
        const auto open = s.find('(');
        const auto scope = s.find(")::", open);
        if (open != std::string::npos && scope != std::string::npos && scope < frame)
            return s.substr(open + 1, scope + 1 - (open + 1));
    }
    return s;
}

std::string module_offset(const void* address) {
    Dl_info info{};
    if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s+0x%" PRIxPTR, info.dli_fname,
                  reinterpret_cast<std::uintptr_t>(address) -
                      reinterpret_cast<std::uintptr_t>(info.dli_fbase));
    return buf;
}

std::string name_of(const void* address) {
    Dl_info info{};
    if (dladdr(address, &info) == 0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%p", address);
        return buf;
    }
    // The symbol table first: a coroutine's resume function is a local symbol, which the
    // dynamic symbols that dladdr names never hold.
    std::string raw = elf_function_name(info.dli_fname, info.dli_fbase, address);
    if (raw.empty() && info.dli_sname != nullptr) raw = info.dli_sname;
    if (!raw.empty()) {
        int status = 0;
        char* d = abi::__cxa_demangle(raw.c_str(), nullptr, nullptr, &status);
        std::string out = status == 0 && d != nullptr ? readable(d) : raw;
        std::free(d);
        return out;
    }
    // No symbol (a stripped module): where it is, for `addr2line -f -C -e <module> <offset>`.
    return module_offset(address);
}

struct Named {
    std::string function, where;
};

/// A spawn site: its strings are static, so their addresses and the line identify it.
struct Place {
    const char* file;
    std::uint_least32_t line;
    const char* function;
    bool operator==(const Place&) const = default;
};

struct PlaceHash {
    std::size_t operator()(const Place& p) const noexcept {
        return std::hash<const void*>{}(p.file) ^ (std::size_t{p.line} * 0x9e3779b97f4a7c15u) ^
               (std::hash<const void*>{}(p.function) << 1);
    }
};

/// Function names by address and spawn sites by location, for the process's life (a few hundred
/// of each at most): a dump's frames and spawn sites are views of these (unordered_map's nodes
/// never move). Never destroyed, so that a dump kept in a static stays readable to the end.
struct Interned {
    std::mutex m;
    std::unordered_map<const void*, Named> names;
    std::unordered_map<Place, std::string, PlaceHash> places;
};

Interned& interned() {
    static auto* i = new Interned;
    return *i;
}

const Named& name_locked(Interned& in, const void* address) {
    auto it = in.names.find(address);
    if (it == in.names.end())
        it = in.names.emplace(address, Named{name_of(address), module_offset(address)}).first;
    return it->second;
}

std::string_view place_locked(Interned& in, const std::source_location& w) {
    if (w.file_name() == nullptr || *w.file_name() == '\0') return {};
    const Place key{w.file_name(), w.line(), w.function_name()};
    auto it = in.places.find(key);
    if (it == in.places.end())
        it = in.places
                 .emplace(key, std::string(w.file_name()) + ":" + std::to_string(w.line()) + " (" +
                                   w.function_name() + ")")
                 .first;
    return it->second;
}

} // namespace

void convert_tasks(const RawDump& raw, bool backtraces, TaskDump& out) {
    out.tasks.reserve(out.tasks.size() + raw.tasks.size());
    Interned& in = interned();
    std::lock_guard lk(in.m); // once for the whole worker's share, not per frame
    for (const RawTask& r : raw.tasks) {
        TaskInfo t;
        t.id = r.id;
        t.name = r.name;
        t.worker = raw.worker;
        t.state = r.state;
        t.spawned_at = place_locked(in, r.where);
        std::int64_t oldest = 0;
        if (r.wait_count != 0) t.waits.reserve(r.wait_count);
        for (std::uint32_t i = 0; i < r.wait_count; ++i) {
            const WaitDesc& d = raw.waits[r.wait_begin + i];
            TaskWait w;
            w.what = d.what != nullptr ? std::string_view(d.what) : std::string_view("other");
            w.fd = d.fd;
            w.bytes = d.bytes;
            if (d.deadline_ns != 0)
                w.deadline_in = std::chrono::nanoseconds(d.deadline_ns - raw.now_ns);
            if (d.since_ns != 0) {
                w.waited =
                    std::chrono::nanoseconds(std::max<std::int64_t>(0, raw.now_ns - d.since_ns));
                if (oldest == 0 || d.since_ns < oldest) oldest = d.since_ns;
            }
            w.object = d.object;
            if (d.object_name != nullptr) w.object_name = d.object_name;
            w.holder = d.holder;
            w.target = d.target;
            w.target_worker = d.target_worker;
            w.children = d.children;
            for (std::uint32_t k = 0; k < d.pending && d.children != 0; ++k) {
                const RawChild& rc = raw.children[d.child_begin + k];
                TaskChild c;
                c.index = rc.index;
                for (std::uint32_t f = 0; f < rc.frame_count; ++f) {
                    const void* a = raw.frames[rc.frame_begin + f];
                    const Named& n = name_locked(in, a);
                    c.backtrace.push_back(TaskFrame{a, n.function, n.where});
                }
                w.pending.push_back(std::move(c));
            }
            t.waits.push_back(std::move(w));
        }
        if (t.state == TaskState::waiting && oldest != 0)
            t.in_state = std::chrono::nanoseconds(std::max<std::int64_t>(0, raw.now_ns - oldest));
        if (backtraces) t.backtrace.reserve(r.frame_count);
        for (std::uint32_t i = 0; i < r.frame_count; ++i) {
            const void* a = raw.frames[r.frame_begin + i];
            const Named& n = name_locked(in, a);
            t.backtrace.push_back(TaskFrame{a, n.function, n.where});
        }
        out.tasks.push_back(std::move(t));
    }
}

void find_deadlocks(TaskDump& d) {
    // Each task waits on at most a few mutexes: follow "waits on a mutex held by" edges; a walk
    // that comes back to a task on its own path is a cycle (reported once, from its lowest id).
    std::unordered_map<std::uint64_t, const TaskInfo*> by_id;
    for (const TaskInfo& t : d.tasks)
        by_id[t.id] = &t;
    std::unordered_map<std::uint64_t, int> colour; // 0 new, 1 on the path, 2 finished
    std::vector<std::uint64_t> path;
    auto visit = [&](auto&& self, std::uint64_t id) -> void {
        colour[id] = 1;
        path.push_back(id);
        const auto it = by_id.find(id);
        if (it != by_id.end())
            for (const TaskWait& w : it->second->waits) {
                if (w.what != "mutex" || w.holder == 0 || w.holder == id) continue;
                const int c = colour[w.holder];
                if (c == 0) {
                    self(self, w.holder);
                } else if (c == 1) {
                    const auto from = std::find(path.begin(), path.end(), w.holder);
                    std::vector<std::uint64_t> cycle(from, path.end());
                    const auto low = std::min_element(cycle.begin(), cycle.end());
                    std::rotate(cycle.begin(), low, cycle.end());
                    if (std::find(d.deadlocks.begin(), d.deadlocks.end(), cycle) ==
                        d.deadlocks.end())
                        d.deadlocks.push_back(std::move(cycle));
                }
            }
        path.pop_back();
        colour[id] = 2;
    };
    for (const TaskInfo& t : d.tasks)
        if (colour[t.id] == 0) visit(visit, t.id);
}

std::string backtrace_text(const void* task) {
    const auto* t = static_cast<const SpawnBase*>(task);
    std::vector<const void*> frames;
    std::coroutine_handle<> f = t->root;
    for (int depth = 0; f && depth < 64; ++depth) {
        frames.push_back(*static_cast<void* const*>(f.address()));
        f = promise_base_of(f).child;
    }
    std::string out;
    Interned& in = interned();
    std::lock_guard lk(in.m);
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
        if (!out.empty()) out += " <- ";
        out += name_locked(in, *it).function;
    }
    return out;
}

} // namespace galay::detail

namespace galay {

std::string format_task_id(std::uint64_t id) {
    return std::to_string(id >> 40) + "." + std::to_string(id & ((std::uint64_t{1} << 40) - 1));
}

} // namespace galay
