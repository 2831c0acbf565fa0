// Fault injection in the drivers, for tests (and for running a tool under faults): chosen
// operations are made to fail or fall short the way the kernel may make them, so that tests can
// check that every public operation retries what it must retry and reports the rest, and that no
// byte is lost or duplicated on the way.
//
//     galay::detail::faults::Scope faults({.seed = 7, .interrupted = 0.2, .short_transfer = 0.3});
//     ... run operations: EINTR and short transfers happen, send_all/recv_exact still move
//     ... every byte; faults::counts() says how many were injected
//
// Compiled in only with the CMake option GALAY_FAULT_INJECTION (ON in the debug, asan, tsan and
// soak presets; OFF by default, in release and in what `cmake --install` installs): a production
// build ignores GALAY_FAULTS, and `install()` stops the program with a message there. For the
// same reason this header is not installed: the tests include it from src/ (their include path
// has it), so a program built against an installed galay cannot even name a plan.
// Off unless a plan is installed (by a test, or by GALAY_FAULTS in the environment, read once
// when the first scheduler starts: "seed=7,interrupted=0.2,short=0.3,fail=0.01,error=ECONNRESET").
// Off, each driver pays one predictable branch per operation. Decisions come from a seeded
// generator: a run with the same plan and the same sequence of operations injects the same faults.
//
// What each knob does (a probability per attempt of an eligible operation; keep it below 1):
//   interrupted     EINTR from the system call (epoll, file pool) or in the CQE (io_uring):
//                   retried by the driver, never seen by the caller.
//   would_block     EAGAIN: epoll waits for readiness (the injected EAGAIN is followed by a
//                   readiness report, as level-triggered readiness would give); io_uring issues
//                   the op again; an O_DIRECT file op on epoll is redone on the thread pool.
//   short_transfer  the kernel moves fewer bytes (at least one; datagrams: fewer messages) than
//                   asked: send_all/recv_exact/read_exact_at/write_all_at and UDP batches go on
//                   with the rest; plain send/recv/read_at/write_at return the shorter count.
//                   Not for O_DIRECT files, which the kernel only cuts short at the end.
//   fail            the operation fails with `error` (ECONNRESET, ENOBUFS, ENOMEM, ...) without
//                   moving anything: the caller gets that error.
//   canceled        io_uring: the CQE says -ECANCELED though nobody cancelled the op (the kernel
//                   does so when it tears requests down): the caller gets operation_canceled.
//   late            io_uring: a completion is handled one loop turn late (after its deadline may
//                   have fired): whatever it moved is still delivered.
//   end_multishot   io_uring: the kernel ends a connection's multishot recv: the driver arms it
//                   again, the caller sees nothing.
//   starve_ring     a buffer given back to the pool is kept out of it until the next loop turn,
//                   so that small pools run dry (io_uring: ENOBUFS ends the multishot recv, which
//                   is armed again when buffers are back; epoll: recv_pooled waits for one).
#pragma once

#include <cerrno>
#include <cstdint>

namespace galay::detail::faults {

struct Plan {
    std::uint64_t seed = 1;
    /// The operations the plan applies to: bit (1u << OpCode) for each (all by default).
    std::uint32_t ops = ~0u;
    double interrupted = 0;
    double would_block = 0;
    double short_transfer = 0;
    double fail = 0;
    int error = ECONNRESET; ///< the errno of `fail`
    double canceled = 0;
    double late = 0;
    double end_multishot = 0;
    double starve_ring = 0;
};

/// How many faults of each kind were injected since the plan was installed, and how often the
/// io_uring buffer ring was found empty (ENOBUFS) meanwhile.
struct Counts {
    std::uint64_t interrupted = 0;
    std::uint64_t would_block = 0;
    std::uint64_t short_transfer = 0;
    std::uint64_t fail = 0;
    std::uint64_t canceled = 0;
    std::uint64_t late = 0;
    std::uint64_t end_multishot = 0;
    std::uint64_t starve_ring = 0;
    std::uint64_t ring_empty = 0;
};

/// Install `plan` for every driver of the process (and reset the counts). Install and remove
/// plans while no operation is in flight.
void install(const Plan& plan) noexcept;
/// Remove the plan: no more faults.
void remove() noexcept;
Counts counts() noexcept;

/// Installs a plan for its lifetime.
class Scope {
public:
    explicit Scope(const Plan& plan) noexcept { install(plan); }
    ~Scope() { remove(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
};

} // namespace galay::detail::faults
