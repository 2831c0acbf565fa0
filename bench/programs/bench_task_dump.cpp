// bench_task_dump: what a task dump (galay/task_dump.hpp) costs with many tasks alive, and what
// its bookkeeping costs in memory per task.
//
//     bench_task_dump --tasks 100000 --dumps 5 --backend io_uring
//
// Spawns --tasks tasks over --workers workers, half waiting on a long sleep and half on a
// Channel receive, then takes --dumps dumps from the main thread and prints, per dump: the time
// from the request to the last line of its text (request, every worker's snapshot, naming the
// frames, formatting), and the longest time a worker's loop was held by its snapshot (the
// lengthening of that loop turn, timed by the worker around the snapshot). Also the heap bytes
// per task (mallinfo2 before and after spawning, frames and the bookkeeping included): run it on
// a build with GALAY_TASK_DUMP=OFF to see what the bookkeeping adds. --json prints one object.
#include "common/tool_support.hpp"

#include <galay/galay.hpp>
#include <malloc.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

using namespace galay;

namespace {

Task<void> sleeper() {
    (void)co_await sleep(std::chrono::hours(1));
}

Task<void> receiver(Channel<int>& ch) {
    (void)co_await ch.recv();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
    Backend backend = Backend::io_uring;
    unsigned tasks = 100'000;
    unsigned workers = 2;
    unsigned dumps = 5;
    bool json = false;
    CLI::App app{"Task dump cost: time to the last line, loop hold, bytes per task",
                 "bench_task_dump"};
    tools::add_backend_flag(app, &backend);
    app.add_option("--tasks", tasks, "tasks alive during the dumps")
        ->check(tools::whole(1, 1'000'000));
    app.add_option("--workers", workers, "Runtime workers")->check(tools::whole(1, 64));
    app.add_option("--dumps", dumps, "dumps to take")->check(tools::whole(1, 1000));
    app.add_flag("--json", json, "print one JSON object");
    if (auto code = tools::parse_command_line(app, argc, argv, "bench_task_dump")) return *code;

    RuntimeOptions o;
    o.workers = workers;
    o.scheduler.backend = backend;
    std::optional<Runtime> rt;
    try {
        rt.emplace(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_task_dump: cannot start the runtime: %s\n", e.what());
        return tools::kExitFailure;
    }
    std::vector<std::unique_ptr<Channel<int>>> channels;
    for (unsigned w = 0; w < workers; ++w)
        channels.push_back(std::make_unique<Channel<int>>(1));
    const std::size_t heap0 = mallinfo2().uordblks;
    for (unsigned i = 0; i < tasks; ++i) {
        const unsigned w = i % workers;
        if (i % 2 == 0)
            rt->spawn_on(w, sleeper());
        else
            rt->spawn_on(w, receiver(*channels[w]));
    }
    // Every task placed and suspended: the dump sees them all waiting.
    TaskDump d;
    for (int tries = 0; tries < 1000; ++tries) {
        d = task_dump(*rt, {.answer_within = std::chrono::milliseconds(5000)});
        std::size_t waiting = 0;
        for (const TaskInfo& t : d.tasks)
            waiting += t.state == TaskState::waiting && !t.waits.empty();
        if (waiting >= tasks) break;
    }
    d = TaskDump{}; // (its memory is not the tasks')
    const std::size_t heap1 = mallinfo2().uordblks;
    std::vector<double> to_last_line_ms, hold_ms, took_ms;
    std::size_t lines = 0;
    for (unsigned i = 0; i < dumps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const TaskDump x = task_dump(*rt, {.answer_within = std::chrono::milliseconds(5000)});
        const std::string text = x.text();
        const auto t1 = std::chrono::steady_clock::now();
        lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
        to_last_line_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        took_ms.push_back(std::chrono::duration<double, std::milli>(x.took).count());
        double hold = 0;
        for (const WorkerDumpInfo& w : x.workers)
            hold = std::max(hold, std::chrono::duration<double, std::milli>(w.pause).count());
        hold_ms.push_back(hold);
    }
    const double bytes_per_task =
        static_cast<double>(heap1 > heap0 ? heap1 - heap0 : 0) / static_cast<double>(tasks);
    if (json) {
        nlohmann::json out;
        out["backend"] = backend_name(backend);
        out["tasks"] = tasks;
        out["workers"] = workers;
        out["task_dump_bookkeeping"] = GALAY_TASK_DUMP != 0;
        out["heap_bytes_per_task"] = bytes_per_task;
        out["to_last_line_ms"] = to_last_line_ms;
        out["task_dump_ms"] = took_ms;
        out["max_loop_hold_ms"] = hold_ms;
        out["lines"] = lines;
        std::printf("%s\n", out.dump().c_str());
    } else {
        std::printf("bench_task_dump: %u tasks on %u workers (%s), bookkeeping %s\n", tasks,
                    workers, backend_name(backend), GALAY_TASK_DUMP ? "on" : "off");
        std::printf("heap per task (frames included): %.0f bytes\n", bytes_per_task);
        std::printf("dump, request to last line of text: median %.1f ms [%.1f-%.1f], %zu lines\n",
                    median(to_last_line_ms),
                    *std::min_element(to_last_line_ms.begin(), to_last_line_ms.end()),
                    *std::max_element(to_last_line_ms.begin(), to_last_line_ms.end()), lines);
        std::printf("  of which task_dump (snapshots, frames named): median %.1f ms\n",
                    median(took_ms));
        std::printf("longest loop hold by a snapshot: median %.2f ms [%.2f-%.2f]\n",
                    median(hold_ms), *std::min_element(hold_ms.begin(), hold_ms.end()),
                    *std::max_element(hold_ms.begin(), hold_ms.end()));
    }
    rt->shutdown();
    return tools::kExitOk;
}
