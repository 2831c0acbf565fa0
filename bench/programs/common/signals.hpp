// SIGINT/SIGTERM for the tools (no galay code here: aio_bench uses it too).
//
// The first SIGINT or SIGTERM asks the tool to stop: `on_first` runs (in the handler, so it must
// be async-signal-safe), stop_signal() returns the signal, and stop_fd() becomes readable, so a
// coroutine can wait for it (bench/programs/common/tool_support.hpp: wait_for_stop_signal). The
// tool then stops measuring, prints what it measured and exits normally.
//
// A second one exits at once: `on_forced_exit` runs (async-signal-safe: e.g. unlink the tool's
// files), then the signal is re-raised with its default action, so the parent sees the process
// killed by it (exit status 128 + signal in a shell).
//
// Except the copy `timeout` sends: on expiry it signals its child and then its whole process
// group, so the child gets the same signal twice, microseconds apart, from the same process.
// A repeat of the first signal from the same sending process (kill(2), not the terminal) within
// one second counts as the same request. Ctrl-C twice, or a different signal, still forces the
// exit.
#pragma once

#include <csignal>

namespace galay::tools {

/// Install the handlers for SIGINT and SIGTERM (once per process).
void install_stop_handlers(void (*on_first)() = nullptr, void (*on_forced_exit)() = nullptr);

/// The signal that asked the tool to stop, or 0.
int stop_signal() noexcept;

/// Readable once a stop signal arrived (one byte); -1 before install_stop_handlers.
int stop_fd() noexcept;

/// What the handler decides for a signal that arrives after the first one. Exposed for tests.
struct SignalFacts {
    int sig = 0;
    int code = 0; ///< siginfo si_code: SI_USER for kill(2), SI_KERNEL for the terminal
    long pid = 0; ///< the sender
    long long at_ns = 0;
};
/// True when `later` is the duplicate `timeout` sends (see above), false when it forces the exit.
bool is_duplicate_stop(const SignalFacts& first, const SignalFacts& later) noexcept;

} // namespace galay::tools
