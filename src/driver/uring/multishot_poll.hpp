// Multishot readiness waits for AsyncFd in edge mode (private to the io_uring driver).
//
// An AsyncFd made with Trigger::edge waits only after its descriptor said EAGAIN. Its first
// wait arms one IORING_OP_POLL_ADD with IORING_POLL_ADD_MULTI for the events asked so far; the
// poll stays in the kernel and posts a completion per readiness edge, which is remembered here
// as "ready" until the next wait for those events (the caller's EAGAIN says the readiness seen
// before it is used up). So a wait costs no submission: it completes at once when an edge came
// after the caller's EAGAIN, else it parks until the next completion. The kernel checks the
// descriptor again when it runs each wake-up, so an edge that came before the caller's read
// and was used up by it posts nothing.
//
// A wait for events the armed poll does not cover replaces it (cancel by user_data, arm the
// union); a poll the kernel ends (no IORING_CQE_F_MORE) is armed again while waits are parked.
// `forget` (the AsyncFd is dropped, the number re-announced or closed) cancels the poll by its
// user_data, which names this registration only, and fails the parked waits with ECANCELED.
#pragma once

#include "galay/detail/io_op.hpp"

#include <liburing.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace galay {
class Scheduler;
}

namespace galay::detail {

class MultishotPolls {
public:
    /// user_data tag (low 3 bits; bit 3 is always set, so a tag is never the wake-up's 2).
    static constexpr std::uint64_t kTag = 2;

    MultishotPolls(io_uring& ring, Scheduler& sched, std::size_t& in_flight) noexcept
        : ring_(ring)
        , sched_(sched)
        , in_flight_(in_flight) {}
    MultishotPolls(const MultishotPolls&) = delete;
    MultishotPolls& operator=(const MultishotPolls&) = delete;

    /// True when `op` (OpCode::poll, edge mode) completed at once.
    bool submit(IoOp& op);
    /// Fail a parked wait with ECANCELED; the poll stays armed.
    void cancel(IoOp& op) noexcept;
    /// `fd` is dropped or closed: cancel its poll, fail its waits, forget its readiness.
    void forget(int fd) noexcept;
    /// A completion tagged kTag.
    void on_cqe(std::uint64_t user_data, std::int32_t res, std::uint32_t flags) noexcept;

private:
    struct Entry {
        std::uint32_t generation = 0; // bumped when the poll is replaced or the fd forgotten
        unsigned armed = 0;           // the armed poll's events (0: none in the kernel)
        unsigned ready = 0;           // revents posted since the waits used them up
        std::vector<IoOp*> waiters;
    };

    static std::uint64_t tag(int fd, std::uint32_t generation) noexcept {
        return static_cast<std::uint64_t>(static_cast<std::uint32_t>(fd)) << 32 |
               std::uint64_t{generation & 0x0fffffff} << 4 | 8 | kTag;
    }
    void arm(int fd, Entry& e, unsigned events);
    void cancel_poll(int fd, const Entry& e) noexcept;
    void finish(IoOp& op, std::int32_t res) noexcept;
    io_uring_sqe* sqe() noexcept;

    io_uring& ring_;
    Scheduler& sched_;
    std::size_t& in_flight_;
    std::vector<Entry> fds_; // indexed by fd, grown by the fds that use edge mode
};

} // namespace galay::detail
