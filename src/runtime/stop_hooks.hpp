// What a Runtime stops before its workers stop (a Sharded's shards, each on its own worker):
// registered by on_runtime_shutdown (galay/detail/sharded_state.hpp), run by RuntimeCore's
// shutdown while every worker still runs.
#pragma once

namespace galay {
class Runtime;
namespace detail {
/// On the thread calling Runtime::shutdown, before the workers are told to stop: call every hook
/// registered for `rt` that is still alive, once.
void run_stop_hooks(Runtime& rt) noexcept;
} // namespace detail
} // namespace galay
