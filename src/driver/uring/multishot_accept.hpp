// Multishot accept for the io_uring driver (private to it).
//
// One IORING_OP_ACCEPT with IORING_ACCEPT_MULTISHOT per listening socket stays armed in the ring
// and posts one completion per new connection, so a server accepting a storm of connections
// submits nothing per connection. Completions the task has not asked for yet wait in the
// listener's queue (an accept that times out or is cancelled loses no connection); when the queue
// is long and nobody accepts, the multishot is cancelled so the kernel's listen backlog pushes
// back again, and it is re-armed by the next accept that finds the queue empty.
//
// The kernel feature (Linux >= 5.19) is probed once per process at run time
// (`multishot_accept_supported`); without it, or with `SchedulerOptions::multishot_accept` off,
// the driver issues one plain accept per call instead.
//
// A listener that is closed drops its state here: its multishot is cancelled by user_data, the
// connections accepted into the queue are closed (nobody will ever receive them), and a pending
// accept fails with ECANCELED. Completions of a listener that is gone are closed as they come.
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

/// Whether the kernel supports multishot accept (probed on a scratch ring once per process).
bool multishot_accept_supported() noexcept;

class MultishotAccepts {
public:
    /// user_data tag of multishot accept completions (low 3 bits; see uring_driver.hpp).
    static constexpr std::uint64_t kTag = 6;

    MultishotAccepts(io_uring& ring, Scheduler& sched, std::size_t& in_flight) noexcept
        : ring_(ring)
        , sched_(sched)
        , in_flight_(in_flight) {}
    ~MultishotAccepts(); // closes connections still queued
    MultishotAccepts(const MultishotAccepts&) = delete;
    MultishotAccepts& operator=(const MultishotAccepts&) = delete;

    /// Start an accept. True when it completed at once (a connection was already queued).
    bool submit(IoOp& op);
    /// Cancel a pending accept's wait; the multishot stays armed and later connections are
    /// queued for the next call.
    void cancel(IoOp& op) noexcept;
    /// `fd` is being closed: if it is a listener, drop everything held for it.
    void forget(int fd) noexcept;
    /// A completion tagged kTag.
    void on_cqe(std::uint64_t user_data, std::int32_t res, std::uint32_t flags) noexcept;

private:
    struct Listener {
        int fd = -1;
        std::uint32_t generation = 0; // bumped when the listener is closed
        bool armed = false;           // a multishot for this generation is in the kernel
        bool paused = false;          // cancelled because the queue was long; re-armed on demand
        IoOp* waiter = nullptr;
        std::vector<std::int32_t> queue; // accepted fds (or -errno) nobody has taken yet
        std::size_t head = 0;
        bool has_queued() const noexcept { return head < queue.size(); }
        std::int32_t pop() noexcept {
            std::int32_t v = queue[head++];
            if (head == queue.size()) queue.clear(), head = 0;
            return v;
        }
    };
    /// Queue length above which the multishot is cancelled while nobody accepts.
    static constexpr std::size_t kMaxQueued = 256;

    Listener* find(int fd) noexcept;
    Listener& find_or_add(int fd);
    void arm(Listener& l);
    void cancel_multishot(const Listener& l) noexcept;
    void deliver(IoOp& op, std::int32_t res) noexcept;
    static std::uint64_t tag(int fd, std::uint32_t generation) noexcept {
        return static_cast<std::uint64_t>(static_cast<std::uint32_t>(fd)) << 32 |
               std::uint64_t{generation & 0x1fffffff} << 3 | kTag;
    }
    io_uring_sqe* sqe() noexcept;

    io_uring& ring_;
    Scheduler& sched_;
    std::size_t& in_flight_;
    std::vector<Listener> listeners_; // few: searched linearly
};

} // namespace galay::detail
