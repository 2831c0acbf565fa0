// The io_uring driver's class (private to src/driver/uring/). Its members are defined by concept:
// ring_setup.cpp (ring creation, teardown), prepare.cpp (submit, SQE preparation, cancel),
// registered_files.cpp, fd_close.cpp (fds leaving the ring), recv_ring.cpp (multishot recv + buffer
// ring), reap.cpp (the loop: wait, wake-ups, completions). Small hot helpers stay inline here.
//
// One ring per scheduler thread. Each IoOp becomes one SQE whose user_data is the op's address;
// submissions are batched and flushed once per loop turn together with the wait
// (`io_uring_submit_and_wait_timeout`), so a busy loop costs one system call per turn, not per
// operation. Rings are created SINGLE_ISSUER|DEFER_TASKRUN where the kernel allows it (completions
// run in our thread, at our wait), falling back to COOP_TASKRUN, then plain.
#pragma once

#include "driver/common/buffer_pool.hpp"
#include "driver/common/op_scratch.hpp"
#include "driver/common/op_traits.hpp"
#include "driver/uring/fixed_buffers.hpp"
#include "driver/uring/multishot_accept.hpp"
#include "galay/runtime.hpp"
#include "runtime/fd_owners.hpp"
#include "runtime/scheduler_access.hpp"

#include <liburing.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace galay::detail {

// ring_setup.cpp
/// Create `ring` with the best flags this kernel takes; `flags_used` receives them. -errno.
int setup_ring(io_uring& ring, unsigned entries, unsigned* flags_used);
/// Tell ThreadSanitizer that a ring was mapped / is about to be unmapped (nothing otherwise).
void ring_mapped();
void ring_unmapping();
/// IORING_OP_SEND_ZC is available (probed once per process; send_zc.cpp).
bool uring_send_zc_supported() noexcept;
/// Why io_uring set-up failed, beyond the errno: the sysctl, the memlock limit ("" if neither).
std::string sysctl_note();
std::string memlock_note();

class UringDriver final : public Driver {
    // user_data values that are not an IoOp address (ops are at least 8-byte aligned).
    static constexpr std::uint64_t kIgnoreTag =
        1; // cancel requests: their own completion is not interesting
    static constexpr std::uint64_t kWakeTag = 2; // the eventfd read that lets other threads wake us
    static constexpr std::uint64_t kMultishotTag =
        3; // low 3 bits of a multishot recv: fd << 32 | gen << 3
    static constexpr std::uint64_t kRegisterTag =
        4; // FILES_UPDATE putting fd (ud >> 32) in its slot
    static constexpr std::uint64_t kUnregisterTag = 5; // FILES_UPDATE clearing a slot
    // IORING_OP_MSG_RING wake-ups. Exactly 7: a peer worker's ring woke us. A pointer | 7: the
    // MSG_RING we sent to that peer (a UringDriver, 8-aligned) failed; wake it by its eventfd.
    static constexpr std::uint64_t kMsgTag = 7;
    static constexpr std::uint16_t kBufferGroup = 0;
    static_assert(MultishotAccepts::kTag == 6); // multishot accept: fd << 32 | gen << 3

    /// What the driver keeps per op, in its driver scratch (driver/common/op_scratch.hpp).
    struct OpScratch {
        bool fixed_file; // issued on the fd's registered-file slot (set by prep before reading)
    };
    static bool& fixed_file(IoOp& op) noexcept { return driver_scratch<OpScratch>(op).fixed_file; }

    /// What the driver keeps per fd number: its registered-file slot and the state of its
    /// multishot recv. 16 bytes, four fds to a cache line: every op reads its fd's on submit
    /// and on completion, and with a thousand connections a wider entry (the queue below was in
    /// it) cost a cache miss per op.
    struct FdState {
        enum : std::uint8_t { kUnregistered = 0, kRegistered = 1, kRefused = 2 };
        bool owned = false;                // FdOwners names this driver (see runtime/fd_owners.hpp)
        std::uint8_t file = kUnregistered; // the registered-file slot numbered like the fd
        bool armed = false;                // a multishot recv for this generation is in the kernel
        bool armed_fixed = false;          // ... issued on the registered-file slot
        bool starved = false;              // stopped by ENOBUFS; re-armed once buffers come back
        bool paused = false;        // its share of the pool is queued: the recv is being cancelled
        bool stream = false;        // a TCP stream (recv/send ops): its close may be deferred
        std::uint8_t transfers = 0; // transfers before registration (see register_file)
        std::uint32_t generation = 0; // bumped when the fd is closed: older completions are stale
        /// One-shot ops in flight on this fd number (from submit to their last CQE; kept across
        /// closes, so it may count an op of an earlier file of the same number: it only errs high).
        std::uint32_t ops = 0;
    };
    static_assert(sizeof(FdState) == 16);

    /// What an fd's multishot recv delivered that the task has not asked for yet (only fds
    /// that use recv_pooled have one): so a recv_pooled that times out or is cancelled loses
    /// nothing, the bytes come with the next call.
    struct Received {
        struct Completion {
            std::int32_t res;
            std::uint16_t buffer; // a pool buffer id, or a heap chunk id when `copied`
            bool copied = false;  // the bytes were moved out of the pool (see keep_share)
        };
        IoOp* waiter = nullptr;
        std::vector<Completion> queue;
        std::size_t head = 0;
        std::uint32_t pooled = 0; // queued completions that hold a pool buffer

        bool has_queued() const noexcept { return head < queue.size(); }
        static bool holds_pool_buffer(const Completion& c) noexcept {
            return c.res > 0 && !c.copied;
        }
        void push(Completion c) {
            pooled += holds_pool_buffer(c);
            queue.push_back(c);
        }
        Completion pop() noexcept {
            Completion c = queue[head++];
            if (head == queue.size()) queue.clear(), head = 0;
            pooled -= holds_pool_buffer(c);
            return c;
        }
    };
    using Completion = Received::Completion;

public:
    UringDriver(Scheduler& s, const SchedulerOptions& options);
    ~UringDriver() override;

    Backend backend() const noexcept override { return Backend::io_uring; }
    const char* name() const noexcept override { return "io_uring"; }
    std::size_t in_flight() const noexcept override { return in_flight_; }
    bool zero_copy_send() const noexcept override { return uring_send_zc_supported(); }
    std::size_t pool_buffers_in_use() const noexcept override {
        if (buf_ring_ == nullptr) return pool_->count() - pool_->available();
        return provisioned_ - ring_free_; // taken by the kernel and not given back
    }
    std::size_t pool_buffers_queued(int fd) const noexcept override {
        if (fd < 0 || static_cast<std::size_t>(fd) >= rx_.size()) return 0;
        return rx_[static_cast<std::size_t>(fd)].pooled;
    }
    bool receives_ahead(int fd) const noexcept override {
        return fd >= 0 && static_cast<std::size_t>(fd) < fds_.size() &&
               fds_[static_cast<std::size_t>(fd)].armed;
    }

    // prepare.cpp
    bool submit(IoOp& op) override;
    void cancel(IoOp& op) override;
    // recv_ring.cpp
    void give_back(std::uint16_t id) noexcept override;
    // fd_close.cpp
    void forget_fd(int fd) noexcept override;
    bool close_later(int fd) noexcept override;
    void loop_entered() noexcept override { ++loop_depth_; }
    void loop_left() noexcept override;
    void forget_fd_remote(int fd) noexcept override;
    // reap.cpp
    void wake() noexcept override;
    bool wake_peer(Driver& peer) noexcept override;
    void flush() noexcept override;
    void submit_queued() noexcept override;
    void poll(std::int64_t timeout_ns) override;
    void shutdown() noexcept override;

    bool runs_on_this_thread() const noexcept override {
        return std::this_thread::get_id() == thread_;
    }

    int register_buffer(BufferRegistration& r) noexcept override {
        return fixed_.add(ring_, *this, r);
    }
    void unregister_buffer(BufferRegistration& r) noexcept override { fixed_.remove(ring_, r); }

private:
    io_uring_sqe* sqe() {
        io_uring_sqe* e = io_uring_get_sqe(&ring_);
        while (e == nullptr) { // the submission queue is full: flush it and retry
            io_uring_submit(&ring_);
            e = io_uring_get_sqe(&ring_);
        }
        return e;
    }

    // prepare.cpp
    void prep(IoOp& op);
    static void prep_plain(io_uring_sqe* e, IoOp& op, std::uint32_t len);
    bool inject(io_uring_sqe* e, IoOp& op, std::uint32_t& len);
    std::int32_t injected_result(IoOp* op, std::int32_t res) noexcept;

    // registered_files.cpp, and the hot helpers inline
    void setup_file_table();
    void on_files_update(std::uint64_t ud, std::int32_t res) noexcept;
    bool uses_fixed(int fd) const noexcept {
        return fd >= 0 && static_cast<std::size_t>(fd) < fds_.size() &&
               fds_[static_cast<std::size_t>(fd)].file == FdState::kRegistered;
    }

    /// Record this driver as the fd's owner, so that closing it on any thread comes back here.
    bool own(int fd, FdState& st) noexcept {
        if (st.owned) return true;
        if (!FdOwners::in_range(fd) || !FdOwners::claim(fd, this)) return false;
        st.owned = true;
        return true;
    }

    void register_file(int fd, bool stream) {
        if (fd < 0 || static_cast<std::size_t>(fd) >= slot_values_.size()) return;
        FdState& st = state(fd);
        st.stream |= stream;
        if (st.file != FdState::kUnregistered) return;
        // A file is registered on its second transfer, a stream on its fourth: a slot costs two
        // FILES_UPDATE requests (and for a file, at close, a system call to make the kernel drop
        // the slot's reference), and saves a reference-count round trip per later op. One read
        // per open (a static file per HTTP request) or a connection that makes one round trip
        // (a health check, a client without keep-alive) would pay more than it saves.
        if (st.transfers < (st.stream ? kStreamUnregisteredTransfers : 1)) {
            ++st.transfers;
            return;
        }
        if (!own(fd, st)) return;
        st.file = FdState::kRegistered;
        io_uring_sqe* e = sqe();
        io_uring_prep_files_update(e, &slot_values_[static_cast<std::size_t>(fd)], 1, fd);
        io_uring_sqe_set_data64(e, static_cast<std::uint64_t>(fd) << 32 | kRegisterTag);
    }

    /// One-shot ops on `fd` may be in flight (the multishot ones are cancelled by their tag).
    bool has_ops(int fd) const noexcept {
        return in_flight_ != 0 && fd >= 0 && static_cast<std::size_t>(fd) < fds_.size() &&
               fds_[static_cast<std::size_t>(fd)].ops != 0;
    }

    FdState& state(int fd) { return grown_to(fds_, fd); }
    Received& received(int fd) { return grown_to(rx_, fd); }
    /// Entry `fd` of a table indexed by fd number, growing the table (at least doubling) to it.
    template <class T>
    static T& grown_to(std::vector<T>& table, int fd) {
        const auto i = static_cast<std::size_t>(fd);
        if (i >= table.size()) table.resize(std::max(i + 1, table.size() * 2));
        return table[i];
    }

    // fd_close.cpp
    void drop_fd_state(int fd) noexcept;
    void drain_remote_forgets() noexcept;
    void let_go_now() noexcept;

    // reap.cpp
    void arm_wake();
    unsigned reap();
    struct LateCqe {
        std::uint64_t user_data;
        std::int32_t res;
    };
    void on_op_cqe(IoOp* op, std::int32_t res, bool may_delay);
    /// A CQE of a send_zc op (send_zc.cpp): true when the op goes on to on_op_cqe with `res`
    /// (the notification came, or none will), false while it waits for the notification.
    static bool send_zc_cqe(IoOp& op, std::int32_t& res, std::uint32_t flags) noexcept;
    static bool mmsg_ready(IoOp& op, int res) noexcept;

    // recv_ring.cpp, and the hot helpers inline
    void setup_buffer_ring(const SchedulerOptions& options);
    void provision_buffers() noexcept;
    void release_withheld() noexcept;
    bool submit_pooled(IoOp& op);
    void arm_multishot(int fd, FdState& m);
    void on_multishot(std::uint64_t ud, std::int32_t res, std::uint32_t flags);
    std::size_t queue_cap() const noexcept;
    void keep_share(Completion& c);
    void pause(int fd, FdState& m);
    void rearm_starved();
    /// Stage buffer `id` at the ring's tail; the kernel sees it after publish_buffers().
    void ring_put(std::uint16_t id) noexcept {
        io_uring_buf_ring_add(buf_ring_, pool_->address(id), pool_->size(), id,
                              io_uring_buf_ring_mask(pool_->count()), staged_++);
        ++ring_free_;
    }
    /// One release store of the tail makes every buffer staged since the last call visible.
    void publish_buffers() noexcept {
        if (staged_ == 0) return;
        io_uring_buf_ring_advance(buf_ring_, staged_);
        staged_ = 0;
    }
    void deliver(IoOp& op, Completion c) noexcept {
        op.result = c.res;
        if (c.res > 0) {
            op.aux = c.buffer;
            op.buf = c.copied ? chunks_[c.buffer - pool_->count()].get() : pool_->address(c.buffer);
        }
    }
    static std::uint64_t multishot_tag(int fd, std::uint32_t generation) noexcept {
        return static_cast<std::uint64_t>(fd) << 32 | std::uint64_t{generation & 0x1fffffff} << 3 |
               kMultishotTag;
    }

    Scheduler& sched_;
    const std::thread::id thread_ = std::this_thread::get_id(); // SINGLE_ISSUER: the only submitter
    io_uring ring_{};
    std::unique_ptr<BufferPool> pool_;
    io_uring_buf_ring* buf_ring_ = nullptr;
    std::size_t buf_ring_bytes_ = 0;
    /// Transfers a stream makes on its plain fd before it is registered: the multishot recv's
    /// arm and a request and a reply (the connection-churn study's counts).
    static constexpr std::uint8_t kStreamUnregisteredTransfers = 3;
    static inline int kNoFile = -1; // FILES_UPDATE value that empties a slot
    std::vector<int> slot_values_;  // slot_values_[i] == i, read by FILES_UPDATE; size = table size
    RemoteForgets remote_forgets_;
    static constexpr std::size_t kBufferSlack = 32;
    std::size_t armed_multishots_ = 0;
    std::size_t demand_ = 0;    // buffers consumed (or missed: ENOBUFS) since the last wait
    std::size_t ring_free_ = 0; // buffers the kernel may pick (including staged ones)
    unsigned provisioned_ = 0;  // ids [0, provisioned_) have been handed to the ring
    int staged_ = 0;            // added at the tail since the last publish_buffers()
    std::vector<FdState> fds_;
    std::vector<Received> rx_; // indexed by fd, grown only by fds that receive into the pool
    std::vector<int> starved_;
    // Bytes copied out of the pool by keep_share, lent like pool buffers under ids from
    // pool_->count() up (give_back frees them).
    std::vector<std::unique_ptr<char[]>> chunks_;
    std::vector<std::uint16_t> free_chunks_;
    bool shutting_down_ = false;
    unsigned loop_depth_ = 0; // block_on loops running on this thread (close_later)
    // Fault injection (driver/common/fault_plan.hpp); empty unless a plan is installed.
    struct Injected {
        IoOp* op;
        std::int32_t res;
    };
    std::vector<Injected> injected_;      // NOPs standing for a failed op
    std::vector<LateCqe> late_;           // completions held back one loop turn
    std::vector<std::uint16_t> withheld_; // buffers kept out of the ring one loop turn
    unsigned flags_ = 0;
    int wake_fd_ = -1;
    std::uint64_t wake_buf_ = 0;
    static constexpr unsigned kKernelTaskWorkPass = 20; // IO_LOCAL_TW_DEFAULT_MAX (Linux 6.13)
    static constexpr int kFairRounds = 64;
    bool fair_ = false;        // SchedulerOptions::fair_completions: poll drains the kernel
    bool msg_ring_ = false;    // wake peers with IORING_OP_MSG_RING
    bool msgs_queued_ = false; // MSG_RING SQEs queued since the last submission
    std::size_t in_flight_ = 0;
    FixedBufferTable fixed_; // registered buffers (fs::FixedBuffer)
    bool multishot_accept_ = false;
    MultishotAccepts accepts_{ring_, sched_, in_flight_}; // (after the members it refers to)
};

} // namespace galay::detail
