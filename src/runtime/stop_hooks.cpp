// The hooks a Runtime runs before its workers stop (runtime/stop_hooks.hpp): a list per Runtime,
// kept beside it rather than in it so that registering needs nothing of the Runtime's own state.
#include "runtime/stop_hooks.hpp"
#include "galay/detail/sharded_state.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace galay::detail {

namespace {

struct Registered {
    const Runtime* rt;
    std::weak_ptr<RuntimeStopHook> hook;
};

std::mutex g_hooks_mutex;
std::vector<Registered> g_hooks; // (guarded by g_hooks_mutex)

} // namespace

void on_runtime_shutdown(Runtime& rt, std::weak_ptr<RuntimeStopHook> hook) {
    std::lock_guard g(g_hooks_mutex);
    // Hooks whose owner is gone leave with each registration, so the list stays as long as
    // what is alive.
    std::erase_if(g_hooks, [](const Registered& r) { return r.hook.expired(); });
    g_hooks.push_back({&rt, std::move(hook)});
}

void run_stop_hooks(Runtime& rt) noexcept {
    std::vector<std::shared_ptr<RuntimeStopHook>> due;
    {
        std::lock_guard g(g_hooks_mutex);
        for (const Registered& r : g_hooks)
            if (r.rt == &rt)
                if (auto h = r.hook.lock()) due.push_back(std::move(h));
        std::erase_if(g_hooks, [&](const Registered& r) { return r.rt == &rt; });
    }
    // Outside the lock: a hook waits for the workers, whose tasks may register hooks meanwhile.
    for (auto& h : due)
        h->stop_before_shutdown();
}

} // namespace galay::detail
