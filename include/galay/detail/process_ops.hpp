// The awaitable of process::Child::wait() (galay/process.hpp): the child's exit through its
// pidfd. Made only by the Child it waits for (docs/driver.md: who makes an operation).
#pragma once

#include "galay/detail/io_awaitable.hpp"
#include "galay/error.hpp"

#include <signal.h>

namespace galay::process {
struct ExitStatus;
class Child;
} // namespace galay::process

namespace galay::process::detail {

/// Waits for `child` to exit and reaps it -> Result<ExitStatus>.
class [[nodiscard]] WaitAwaitable : public galay::detail::IoAwaitable<WaitAwaitable> {
public:
    bool await_ready() const noexcept;
    void prepare() noexcept { op_.buf = &info_; }
    Result<ExitStatus> result();

private:
    friend class process::Child;
    explicit WaitAwaitable(Child& child) noexcept;

    Child* child_;
    siginfo_t info_{};
};

} // namespace galay::process::detail
