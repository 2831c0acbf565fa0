// The readiness driver (private to src/driver/epoll/), named for its first poller: the reactor
// that epoll (Linux) and kqueue (macOS, FreeBSD) share. Every op first tries its system call at
// once (non-blocking fds); only on EAGAIN is it queued on its fd, and it is retried when the
// poller reports the fd ready. Each fd is registered once, edge-triggered for both directions, on
// its first EAGAIN, so a connection costs one epoll_ctl (or kevent) in its lifetime and none per
// operation. The system calls that arm, wait and wake are the poller's
// (driver/poller/poller.hpp), chosen at compile time: no virtual call per event.
// File operations go to the file engine (libaio for O_DIRECT files, a small thread pool otherwise;
// see file_engine.hpp), created on the first one.
//
// Defined in epoll_driver.cpp (set-up, readiness registration, an op's system call, the poll
// loop, cancellation) and pooled_recv.cpp (recv_pooled's buffers and the ops waiting for one; the
// fault injection that withholds them).
#pragma once

#include "driver/common/buffer_pool.hpp"
#include "driver/common/op_queue.hpp"
#include "driver/epoll/file_engine.hpp"
#include "driver/poller/poller.hpp"
#include "driver/zero_copy.hpp"
#include "galay/runtime.hpp"
#include "runtime/fd_owners.hpp"
#include "runtime/scheduler_access.hpp"

#include <memory>
#include <thread>
#include <vector>

namespace galay::detail {

struct FdState {
    OpQueue readers;
    OpQueue writers;
    bool registered = false;
    // False after a short read (the socket was drained): the next read skips the try-first
    // system call and waits for the edge. Any data that arrives after that read raises a new
    // edge-triggered event, which sets this again.
    bool maybe_readable = true;
    // The peer closed or reset (the poller's kClosed seen: EPOLLRDHUP/HUP/ERR, EV_EOF). A short
    // read may then be followed by EOF with no further edge, so reads always try first.
    bool peer_closed = false;
    // An AsyncFd wait for readable and writable at once is queued with the readers: room to
    // write (kOutput) retries them too.
    bool poll_out_in_readers = false;
    // An AsyncFd wait registered it: a descriptor another library owns, which may keep its file
    // open past galay's forget (a dup, a forked child). forget_fd takes such a file out of the
    // set, where it would otherwise stay and wake the loop under its old tag until its last
    // close. (galay's own sockets skip that system call: their close is the file's last.)
    bool foreign = false;
    // FdOwners names this driver (a foreign registration): a forget on another thread comes
    // here through forget_fd_remote.
    bool owned = false;
    // Counts the fd's registrations: the current one's tag, which its events carry. A queued
    // op always waits under the current registration (forgetting the fd fails its ops), so an
    // event with this tag is about the file the op waits on; one with an older tag comes from
    // an earlier file of the number that a dup elsewhere keeps in the set.
    std::uint32_t registration = 0;
};
// (docs/guide/async-fd.md quotes its size: the memory per registration)
static_assert(sizeof(FdState) == 48);

class EpollDriver final : public Driver {
public:
    EpollDriver(Scheduler& s, const SchedulerOptions& options);
    ~EpollDriver() override;

    Backend backend() const noexcept override { return Poller::kBackend; }
    const char* name() const noexcept override { return Poller::kName; }
    bool zero_copy_send() const noexcept override { return msg_zerocopy_supported(); }
    std::size_t in_flight() const noexcept override {
        return waiting_ + (files_ ? files_->in_flight() : 0);
    }
    std::size_t pool_buffers_in_use() const noexcept override {
        return pool_.count() - pool_.available();
    }

    bool submit(IoOp& op) override;
    /// Queue `op` until its fd is ready. Returns false (the op is pending) or true with an error.
    bool wait_ready(IoOp& op);
    void cancel(IoOp& op) override;
    void give_back(std::uint16_t id) noexcept override;
    /// A buffer came back: serve the recv_pooled ops that waited for one.
    void give_back_wakes();
    void forget_fd(int fd) noexcept override;
    /// An AsyncFd let go of on another thread (remote_forget.cpp): the file leaves the epoll set
    /// there and then, its state here is cleared by this thread before it next uses the number.
    void forget_fd_remote(int fd) noexcept override;
    bool runs_on_this_thread() const noexcept override {
        return std::this_thread::get_id() == thread_;
    }
    void wake() noexcept override;
    void poll(std::int64_t timeout_ns) override;
    void shutdown() noexcept override;

private:
    /// Clear the state of the fds forgotten on other threads (remote_forget.cpp).
    void drain_remote_forgets() noexcept;
    void drain_remote_forgets_if_any() noexcept {
        if (remote_forgets_.pending()) [[unlikely]]
            drain_remote_forgets();
    }
    /// Record a foreign registration's owner, so that a forget on any thread comes here.
    void own(int fd, FdState& st) noexcept;
    void disown_all() noexcept;

    // --- fault injection (driver/common/fault_plan.hpp) ----------------------------------------
    /// A fault for this attempt of `op` instead of its system call: an errno to pretend (0:
    /// none); `len` may be cut for a short transfer. An injected EAGAIN is followed by a
    /// readiness report at the next poll, as it would be for bytes that are really there.
    int injected_fault(const IoOp& op, std::size_t& len);
    void report_injected_readiness();
    void release_withheld();

    FdState& state(int fd);
    /// A read returned less than it asked for: the socket has nothing more right now. (Not
    /// after MSG_PEEK: peeked bytes stay readable without a new edge.)
    void drained(const IoOp& op) noexcept;
    void fail_all(OpQueue& list, int err) noexcept;
    /// Run the waiting ops of the fds of the poller's last n events.
    void handle_events(int n);
    /// Retry the waiting ops of one direction in order until one would block again.
    void retry(OpQueue& list);
    /// Run the op's system call. Returns true when the op is finished (result set), false when it
    /// would block.
    bool attempt(IoOp& op) noexcept;
    /// A poll op (AsyncFd): from the event being handled when it is its registration's and the
    /// poller reports the level (driver/readiness.hpp), else with a poll(2).
    bool attempt_poll(IoOp& op) noexcept;

    Scheduler& sched_;
    const std::thread::id thread_ = std::this_thread::get_id();
    BufferPool pool_;
    Poller poller_;
    std::vector<FdState> fds_;
    // While handle_events retries an fd's ops: that fd and its event's bits when the event comes
    // from its current registration (-1 otherwise, and outside handle_events).
    int event_fd_ = -1;
    std::uint32_t event_bits_ = 0;
    // At most kEventsPerPoll ready fds per wait. The ops of every fd in a batch run their
    // system calls first, then the coroutines of the whole batch resume: each connection's
    // memory (its op, frame, buffers and the pool buffer its bytes landed in) is touched once
    // in each half. With hundreds at a time the first half's lines and pages are gone by the
    // second, so a bounded batch costs less CPU per request (docs/benchmarks/experiments.md). The
    // kernel keeps the others ready, in order, for the next call.
    static constexpr std::size_t kEventsPerPoll = Poller::kMaxEvents;
    static constexpr int kFairRounds = 16; // fair_completions: more waits of one poll
    bool fair_ = false; // SchedulerOptions::fair_completions: poll drains every ready fd
    std::size_t waiting_ = 0;
    OpQueue starved_; // recv_pooled ops waiting for a pool buffer
    std::unique_ptr<EpollFileEngine> files_;
    std::vector<int> fault_ready_;        // fds with an injected EAGAIN: retried next poll
    std::vector<std::uint16_t> withheld_; // buffers an injected starve_ring keeps a turn
    RemoteForgets remote_forgets_;
};

} // namespace galay::detail
