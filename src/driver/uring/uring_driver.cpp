// The io_uring driver: one ring per scheduler thread. Each IoOp becomes one SQE whose user_data is
// the op's address; submissions are batched and flushed once per loop turn together with the
// wait (`io_uring_submit_and_wait_timeout`), so a busy loop costs one system call per turn, not
// per operation. Rings are created SINGLE_ISSUER|DEFER_TASKRUN where the kernel allows it
// (completions run in our thread, at our wait), falling back to COOP_TASKRUN, then plain.
#include "driver/common/buffer_pool.hpp"
#include "driver/common/faults.hpp"
#include "driver/mmsg.hpp"
#include "driver/uring/fixed_buffers.hpp"
#include "driver/uring/multishot_accept.hpp"
#include "galay/runtime.hpp"
#include "runtime/drivers.hpp"
#include "runtime/fd_owners.hpp"

#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace galay::detail {
namespace {

// user_data values that are not an IoOp address (ops are at least 8-byte aligned).
constexpr std::uint64_t kIgnoreTag = 1; // cancel requests: their own completion is not interesting
constexpr std::uint64_t kWakeTag = 2;   // the eventfd read that lets other threads wake us
constexpr std::uint64_t kMultishotTag = 3;  // low 3 bits of a multishot recv: fd << 32 | gen << 3
constexpr std::uint64_t kRegisterTag = 4;   // FILES_UPDATE putting fd (ud >> 32) in its slot
constexpr std::uint64_t kUnregisterTag = 5; // FILES_UPDATE clearing a slot
static_assert(MultishotAccepts::kTag == 6); // multishot accept: fd << 32 | gen << 3
// IORING_OP_MSG_RING wake-ups. Exactly 7: a peer worker's ring woke us. A pointer | 7: the
// MSG_RING we sent to that peer (a UringDriver, 8-aligned) failed; wake it by its eventfd.
constexpr std::uint64_t kMsgTag = 7;
constexpr std::uint16_t kBufferGroup = 0;

/// What the driver keeps per fd number: its registered-file slot, and its multishot recv.
/// Completions the task has not asked for yet wait in `queue`, so a recv_pooled that times out or
/// is cancelled loses nothing: the bytes come with the next call.
struct FdState {
    enum : std::uint8_t { kUnregistered = 0, kRegistered = 1, kRefused = 2 };
    bool owned = false;                // FdOwners names this driver (see runtime/fd_owners.hpp)
    std::uint8_t file = kUnregistered; // the registered-file slot numbered like the fd
    struct Completion {
        std::int32_t res;
        std::uint16_t buffer; // a pool buffer id, or a heap chunk id when `copied`
        bool copied = false;  // the bytes were moved out of the pool (see keep_share)
    };
    std::uint32_t generation = 0; // bumped when the fd is closed: older completions are stale
    bool armed = false;           // a multishot recv for this generation is in the kernel
    bool armed_fixed = false;     // ... issued on the registered-file slot
    bool starved = false;         // stopped by ENOBUFS; re-armed once buffers come back
    bool paused = false;          // its share of the pool is queued: the recv is being cancelled
    bool stream = false;          // a TCP stream (recv/send ops): its close may be deferred
    /// One-shot ops in flight on this fd number (from submit to their last CQE; kept across
    /// closes, so it may count an op of an earlier file of the same number: it only errs high).
    std::uint32_t ops = 0;
    IoOp* waiter = nullptr;
    std::vector<Completion> queue;
    std::size_t head = 0;
    std::uint32_t pooled = 0; // queued completions that hold a pool buffer

    bool has_queued() const noexcept { return head < queue.size(); }
    static bool holds_pool_buffer(const Completion& c) noexcept { return c.res > 0 && !c.copied; }
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

int errno_from_name(const char* s) {
    struct Named {
        const char* name;
        int value;
    };
    static constexpr Named names[] = {{"ENOSYS", ENOSYS}, {"EPERM", EPERM},
                                      {"EACCES", EACCES}, {"EINVAL", EINVAL},
                                      {"ENOMEM", ENOMEM}, {"EOPNOTSUPP", EOPNOTSUPP}};
    for (const Named& n : names)
        if (std::strcmp(s, n.name) == 0) return n.value;
    int v = std::atoi(s);
    return v > 0 ? v : ENOSYS;
}

std::string sysctl_note() {
    std::ifstream f("/proc/sys/kernel/io_uring_disabled");
    int v = 0;
    if (f >> v && v != 0)
        return "; kernel.io_uring_disabled=" + std::to_string(v) +
               (v == 2 ? " (io_uring is disabled for all processes)"
                       : " (io_uring is limited to the io_uring_group)");
    return {};
}

// liburing maps and unmaps its rings with raw system calls, which ThreadSanitizer does not see.
// A ring mapped where another thread's ring was unmapped inherits that ring's access history, and
// the first SQE prepared in it is reported as a race with the other, long gone, thread. The kernel
// orders the unmap before the map; these two calls tell ThreadSanitizer so (nothing otherwise).
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
char g_ring_mappings; // the address the two synchronise on
void ring_mapped() {
    __tsan_acquire(&g_ring_mappings);
}
void ring_unmapping() {
    __tsan_release(&g_ring_mappings);
}
#else
void ring_mapped() {}
void ring_unmapping() {}
#endif

/// io_uring set-up fails with ENOMEM under a small RLIMIT_MEMLOCK (unprivileged users) far more
/// often than for want of memory: say which limit and how to raise it.
std::string memlock_note() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return {};
    return " (RLIMIT_MEMLOCK is " + std::to_string(rl.rlim_cur / 1024) +
           " KiB: raise it with `ulimit -l unlimited` or LimitMEMLOCK=, or use "
           "GALAY_BACKEND=epoll)";
}

int setup_ring(io_uring& ring, unsigned entries, unsigned* flags_used) {
    const unsigned attempts[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_COOP_TASKRUN,
        0,
    };
    int ret = -EINVAL;
    for (unsigned flags : attempts) {
        io_uring_params p{};
        p.flags = flags | IORING_SETUP_CQSIZE;
        p.cq_entries = entries * 8; // room for many connections' completions per turn
        ret = io_uring_queue_init_params(entries, &ring, &p);
        if (ret == 0) {
            ring_mapped();
            if (flags_used != nullptr) *flags_used = flags;
            return 0;
        }
        if (ret != -EINVAL) return ret; // EPERM/ENOSYS/ENOMEM: flags are not the problem
    }
    return ret;
}

constexpr struct {
    int op;
    const char* name;
} kRequiredOps[] = {
    {IORING_OP_ACCEPT, "ACCEPT"},   {IORING_OP_CONNECT, "CONNECT"},
    {IORING_OP_RECV, "RECV"},       {IORING_OP_SEND, "SEND"},
    {IORING_OP_READV, "READV"},     {IORING_OP_WRITEV, "WRITEV"},
    {IORING_OP_SENDMSG, "SENDMSG"}, {IORING_OP_RECVMSG, "RECVMSG"},
    {IORING_OP_CLOSE, "CLOSE"},     {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
    {IORING_OP_READ, "READ"},       {IORING_OP_WRITE, "WRITE"},
    {IORING_OP_FSYNC, "FSYNC"},     {IORING_OP_FALLOCATE, "FALLOCATE"},
};

/// IORING_OP_MSG_RING (5.18) and IOSQE_CQE_SKIP_SUCCESS (5.17), probed once per process.
bool msg_ring_supported() {
    static const bool supported = [] {
        io_uring ring;
        if (setup_ring(ring, 8, nullptr) < 0) return false;
        bool ok = false;
        if (io_uring_probe* probe = io_uring_get_probe_ring(&ring)) {
            ok = io_uring_opcode_supported(probe, IORING_OP_MSG_RING) &&
                 (ring.features & IORING_FEAT_CQE_SKIP) != 0;
            io_uring_free_probe(probe);
        }
        io_uring_queue_exit(&ring);
        return ok;
    }();
    return supported;
}

class UringDriver final : public Driver {
public:
    UringDriver(Scheduler& s, const SchedulerOptions& options)
        : sched_(s) {
        unsigned entries = options.ring_entries == 0 ? 1024 : options.ring_entries;
        int ret = setup_ring(ring_, entries, &flags_);
        if (ret < 0)
            throw Error(errno_code(-ret), "galay: io_uring_queue_init failed" + sysctl_note() +
                                              (ret == -ENOMEM ? memlock_note() : ""));
        setup_buffer_ring(options);
        if (options.register_files) setup_file_table();
        multishot_accept_ = options.multishot_accept && multishot_accept_supported();
        wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (wake_fd_ < 0) {
            int e = errno;
            ring_unmapping();
            io_uring_queue_exit(&ring_);
            throw Error(errno_code(e), "galay: eventfd failed");
        }
        arm_wake();
        msg_ring_ = options.msg_ring_wake && msg_ring_supported();
    }

    ~UringDriver() override {
        { // nobody may name us as an owner once we are gone
            std::lock_guard lock(FdOwners::mutex());
            for (std::size_t fd = 0; fd < fds_.size(); ++fd)
                if (fds_[fd].owned) FdOwners::disown(static_cast<int>(fd), this);
        }
        ring_unmapping();
        io_uring_queue_exit(&ring_); // (drops the registered files with the ring)
        ::close(wake_fd_);
        if (buf_ring_ != nullptr) ::munmap(buf_ring_, buf_ring_bytes_);
    }

    Backend backend() const noexcept override { return Backend::io_uring; }
    const char* name() const noexcept override { return "io_uring"; }
    std::size_t in_flight() const noexcept override { return in_flight_; }
    std::size_t pool_buffers_in_use() const noexcept override {
        if (buf_ring_ == nullptr) return pool_->count() - pool_->available();
        return provisioned_ - ring_free_; // taken by the kernel and not given back
    }
    std::size_t pool_buffers_queued(int fd) const noexcept override {
        if (fd < 0 || static_cast<std::size_t>(fd) >= fds_.size()) return 0;
        return fds_[static_cast<std::size_t>(fd)].pooled;
    }
    bool receives_ahead(int fd) const noexcept override {
        return fd >= 0 && static_cast<std::size_t>(fd) < fds_.size() &&
               fds_[static_cast<std::size_t>(fd)].armed;
    }

    bool submit(IoOp& op) override {
        if (remote_forget_pending_.load(std::memory_order_relaxed)) drain_remote_forgets();
        if (is_mmsg(op.code) && attempt_mmsg(op)) return true; // see driver/mmsg.hpp
        if (op.code == OpCode::accept && multishot_accept_) {
            own(op.fd, state(op.fd)); // the armed accept holds the listener: closes come here
            return accepts_.submit(op);
        }
        if (op.code == OpCode::recv_pooled && buf_ring_ != nullptr) return submit_pooled(op);
        if (op.code == OpCode::recv_pooled) { // no buffer rings: a plain recv into a pool buffer
            int id = pool_->take();
            if (id < 0) {
                op.result = -ENOBUFS;
                return true;
            }
            op.aux = static_cast<std::uint64_t>(id);
            op.buf = pool_->address(static_cast<std::uint16_t>(id));
            op.len = pool_->size();
        }
        if (op.code == OpCode::close)
            forget_fd_everywhere(op.fd); // (clears a registered slot before the close runs)
        else if (registers_file(op.code))
            register_file(op.fd, op.code == OpCode::recv || op.code == OpCode::send);
        else if (op.code == OpCode::accept && op.fd >= 0)
            own(op.fd, state(op.fd)); // the pending accept holds the listener: see close_fd
        prep(op);
        op.pending = true;
        ++in_flight_;
        if (op.fd >= 0) ++state(op.fd).ops;
        return false;
    }

    void give_back(std::uint16_t id) noexcept override {
        if (id >= pool_->count()) { // a chunk keep_share() copied out of the pool
            chunks_[id - pool_->count()].reset();
            free_chunks_.push_back(id);
            return;
        }
        if (faults::on()) [[unlikely]] {
            if (faults::hit(faults::Kind::starve_ring, OpCode::recv_pooled)) {
                withheld_.push_back(id); // back at the next poll
                return;
            }
        }
        if (buf_ring_ == nullptr) {
            pool_->put(id);
            return;
        }
        ring_put(id); // published with the next submission (publish_buffers)
    }

    void cancel(IoOp& op) override {
        if (!op.pending) return;
        if (op.code == OpCode::accept && multishot_accept_) return accepts_.cancel(op);
        if (op.code == OpCode::recv_pooled && buf_ring_ != nullptr) {
            // Only the wait is cancelled: the multishot recv stays armed and whatever arrives
            // is queued for the next call.
            FdState& m = fds_[static_cast<std::size_t>(op.fd)];
            if (m.waiter != &op) return;
            m.waiter = nullptr;
            op.result = -ECANCELED;
            sched_.complete(op);
            return;
        }
        io_uring_sqe* e = sqe();
        io_uring_prep_cancel64(e, reinterpret_cast<std::uint64_t>(&op), 0);
        io_uring_sqe_set_data64(e, kIgnoreTag);
    }

    void forget_fd(int fd) noexcept override {
        const unsigned queued = io_uring_sq_ready(&ring_);
        drop_fd_state(fd);
        if (fd >= 0 && static_cast<std::size_t>(fd) < fds_.size() && fds_[fd].owned) {
            fds_[fd].owned = false;
            FdOwners::disown(fd, this);
        }
        // close(2) does not cancel io_uring requests that hold the file: do it explicitly, when
        // any does (a cancel by fd walks every pending request: with 1,000 connections waiting
        // in recv, closing a file read once per HTTP request cost more than the read).
        if (has_ops(fd)) {
            io_uring_sqe* e = sqe();
            io_uring_prep_cancel_fd(e, fd, IORING_ASYNC_CANCEL_ALL);
            io_uring_sqe_set_data64(e, kIgnoreTag);
        }
        if (io_uring_sq_ready(&ring_) != queued) let_go_now();
    }

    bool runs_on_this_thread() const noexcept override {
        return std::this_thread::get_id() == thread_;
    }

    // Closing a TCP stream inside the loop costs no system call of its own: the multishot cancel,
    // the slot clearing and an IORING_OP_CLOSE (in that order) go with the loop's next
    // submission, which comes before it waits or block_on returns (loop_left). So the FIN leaves
    // within the loop turn, and the kernel, not a close(2), drops the fd. Listeners, UDP sockets
    // and files are closed at once instead (let_go_now + close(2)): binding their port again, or
    // a lock on the file, must not wait for the loop.
    bool close_later(int fd) noexcept override {
        if (loop_depth_ == 0 || shutting_down_ || fd < 0 ||
            static_cast<std::size_t>(fd) >= fds_.size() || !fds_[fd].stream)
            return false;
        drop_fd_state(fd);
        if (fds_[fd].owned) {
            fds_[fd].owned = false;
            FdOwners::disown(fd, this);
        }
        if (has_ops(fd)) { // (before the close: by fd, it must still name this file)
            io_uring_sqe* e = sqe();
            io_uring_prep_cancel_fd(e, fd, IORING_ASYNC_CANCEL_ALL);
            io_uring_sqe_set_data64(e, kIgnoreTag);
        }
        io_uring_sqe* e = sqe();
        io_uring_prep_close(e, fd);
        io_uring_sqe_set_data64(e, kIgnoreTag);
        closes_queued_ = true;
        return true;
    }
    void loop_entered() noexcept override { ++loop_depth_; }
    void loop_left() noexcept override {
        --loop_depth_;
        if (closes_queued_) let_go_now();
    }

    void forget_fd_remote(int fd) noexcept override {
        // Called with FdOwners::mutex() held; ownership is already given up. The fd number may
        // be reused at once, but it can only reach this thread through something synchronised
        // after the flag below, and submit() drops the old state before using any fd.
        remote_forgets_.push_back(fd);
        remote_forget_pending_.store(true, std::memory_order_release);
        wake();
    }

    void wake() noexcept override {
        std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    }

    // Waking another worker's ring: an IORING_OP_MSG_RING SQE in our own ring posts a CQE
    // (kMsgTag) straight into the peer's completion queue. It is submitted with our next
    // io_uring_enter (the loop polls right after the batch that posted), so it costs no system
    // call of its own, where an eventfd write costs one; the peer wakes from its wait on that
    // CQE with no read to re-arm. CQE_SKIP_SUCCESS: a completion comes back only when the message
    // failed (the peer's CQ is full, ...), and then the peer's eventfd wakes it instead.
    bool wake_peer(Driver& peer) noexcept override {
        if (!msg_ring_ || peer.backend() != Backend::io_uring) return false;
        auto& target = static_cast<UringDriver&>(peer);
        io_uring_sqe* e = sqe();
        io_uring_prep_msg_ring(e, target.ring_.ring_fd, 0, kMsgTag, 0);
        e->flags |= IOSQE_CQE_SKIP_SUCCESS;
        io_uring_sqe_set_data64(e, reinterpret_cast<std::uint64_t>(&target) | kMsgTag);
        msgs_queued_ = true;
        return true;
    }

    void flush() noexcept override {
        msgs_queued_ = false;
        if (io_uring_sq_ready(&ring_) > 0) let_go_now();
    }

    void poll(std::int64_t timeout_ns) override {
        msgs_queued_ = false; // submitted below
        if (remote_forget_pending_.load(std::memory_order_acquire)) drain_remote_forgets();
        if (!withheld_.empty() || !late_.empty()) [[unlikely]] {
            release_withheld();
            timeout_ns = 0; // (late completions are handled by this turn's reap)
        }
        if (buf_ring_ != nullptr) {
            provision_buffers();
            publish_buffers();
            if (!starved_.empty() && ring_free_ > 0) rearm_starved();
        }
        int ret;
        if (timeout_ns == 0) {
            ret = io_uring_submit_and_get_events(&ring_);
        } else if (timeout_ns < 0) {
            ret = io_uring_submit_and_wait(&ring_, 1);
        } else {
            __kernel_timespec ts{.tv_sec = timeout_ns / 1'000'000'000,
                                 .tv_nsec = timeout_ns % 1'000'000'000};
            io_uring_cqe* cqe = nullptr;
            ret = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
        }
        if (ret >= 0 || ret == -ETIME) closes_queued_ = false; // (submitted with the wait)
        if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY && ret != -EAGAIN) {
            std::fprintf(stderr, "galay: io_uring_enter failed: %s\n", std::strerror(-ret));
            std::abort();
        }
        reap();
    }

    void shutdown() noexcept override {
        shutting_down_ = true;
        if (closes_queued_) let_go_now();
        release_withheld();
        if (in_flight_ != 0) {
            io_uring_sqe* e = sqe();
            io_uring_prep_cancel64(e, 0, IORING_ASYNC_CANCEL_ANY);
            io_uring_sqe_set_data64(e, kIgnoreTag);
        }
        // Bounded: a request that ignores cancellation (a regular-file read in progress)
        // finishes on its own within the device's latency.
        for (int i = 0; i < 1000 && in_flight_ != 0; ++i) {
            __kernel_timespec ts{.tv_sec = 0, .tv_nsec = 10'000'000};
            io_uring_cqe* cqe = nullptr;
            io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
            reap();
        }
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

    /// Make the kernel act on the cancellations and slot clearings just queued before the fd is
    /// closed: submit them, and run the completions they cause (with DEFER_TASKRUN those run only
    /// when this thread enters the kernel asking for events), so that every reference the ring
    /// held on the file is dropped when this returns. Otherwise they would go with the next loop
    /// turn, and after block_on returned that may be never: no FIN, the port still bound, and a
    /// cancel-by-fd issued after close(2) finds nothing. The completions are reaped by the next
    /// poll as usual.
    void let_go_now() noexcept {
        int r;
        do
            r = io_uring_submit_and_get_events(&ring_);
        while (r == -EINTR);
        closes_queued_ = false;
    }

    void arm_wake() {
        io_uring_sqe* e = sqe();
        io_uring_prep_read(e, wake_fd_, &wake_buf_, sizeof wake_buf_, 0);
        io_uring_sqe_set_data64(e, kWakeTag);
    }

    void prep(IoOp& op) {
        io_uring_sqe* e = sqe();
        std::uint32_t len = op.remaining();
        if (faults::on()) [[unlikely]] {
            if (inject(e, op, len)) return;
        }
        // fs::FixedBuffer: READ_FIXED / WRITE_FIXED when the op lies inside its registration.
        const bool prepared = op.fixed_buffer && fixed_.prep(e, op);
        if (!prepared) prep_plain(e, op, len);
        op.fixed_file = op.code != OpCode::close && uses_fixed(op.fd);
        if (op.fixed_file) e->flags |= IOSQE_FIXED_FILE; // slot number == fd
        io_uring_sqe_set_data(e, &op);
    }

    // --- fault injection (galay/detail/faults.hpp) ----------------------------------------------
    /// Ops whose CQE may say EINTR (and, for sockets, EAGAIN): issued again, as a system call
    /// would be retried.
    static bool retried_when_interrupted(OpCode c) noexcept {
        switch (c) {
        case OpCode::accept:
        case OpCode::recv:
        case OpCode::recv_pooled: // (without buffer rings: a plain recv)
        case OpCode::send:
        case OpCode::recvmsg:
        case OpCode::sendmsg:
        case OpCode::read_at:
        case OpCode::write_at:
        case OpCode::readv_at:
        case OpCode::writev_at:
        case OpCode::fsync:
        case OpCode::fdatasync:
            return true;
        default:
            return false;
        }
    }
    static bool is_file_op(OpCode c) noexcept {
        return c == OpCode::read_at || c == OpCode::write_at || c == OpCode::readv_at ||
               c == OpCode::writev_at || c == OpCode::fsync || c == OpCode::fdatasync ||
               c == OpCode::fallocate;
    }

    /// Replace this issue of `op` by a fault: a NOP whose CQE carries the injected error (true),
    /// or a shorter `len`. EAGAIN is not injected into file ops: a real one comes from an
    /// O_NONBLOCK file and is reported, not retried (it would come back every time).
    bool inject(io_uring_sqe* e, IoOp& op, std::uint32_t& len) {
        if (shutting_down_ || !retried_when_interrupted(op.code)) return false;
        int err = faults::refusal(op.code);
        if (err == 0 && faults::hit(faults::Kind::canceled, op.code)) err = ECANCELED;
        if (err == EAGAIN && is_file_op(op.code)) err = EINTR;
        if (err != 0) {
            io_uring_prep_nop(e);
            io_uring_sqe_set_data(e, &op);
            op.fixed_file = false;
            injected_.push_back({&op, -err});
            return true;
        }
        const bool has_len = op.code == OpCode::recv || op.code == OpCode::send ||
                             ((op.code == OpCode::read_at || op.code == OpCode::write_at) &&
                              !op.direct && !op.fixed_buffer);
        if (has_len && len > 1 && faults::hit(faults::Kind::short_transfer, op.code))
            len = faults::shorter(len);
        return false;
    }

    /// The result an injected NOP stands for (its own CQE says 0).
    std::int32_t injected_result(IoOp* op, std::int32_t res) noexcept {
        for (std::size_t i = 0; i < injected_.size(); ++i) {
            if (injected_[i].op != op) continue;
            res = injected_[i].res;
            injected_[i] = injected_.back();
            injected_.pop_back();
            break;
        }
        return res;
    }

    void release_withheld() noexcept {
        std::vector<std::uint16_t> ids;
        ids.swap(withheld_);
        for (std::uint16_t id : ids) {
            if (buf_ring_ == nullptr)
                pool_->put(id);
            else
                ring_put(id);
        }
    }

    static void prep_plain(io_uring_sqe* e, IoOp& op, std::uint32_t len) {
        switch (op.code) {
        case OpCode::accept:
            io_uring_prep_accept(e, op.fd, op.address(),
                                 reinterpret_cast<socklen_t*>(op.address_length()),
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
            break;
        case OpCode::connect:
            io_uring_prep_connect(e, op.fd, op.address(), op.len);
            break;
        case OpCode::recv:
        case OpCode::recv_pooled: // (without buffer rings: into the pool buffer set in submit)
            io_uring_prep_recv(e, op.fd, op.cursor(), len, op.msg_flags);
            break;
        case OpCode::send:
            io_uring_prep_send(e, op.fd, op.cursor(), len, op.msg_flags | MSG_NOSIGNAL);
            break;
        case OpCode::recvmsg:
            io_uring_prep_recvmsg(e, op.fd, static_cast<msghdr*>(op.buf), op.msg_flags);
            break;
        case OpCode::sendmsg:
            io_uring_prep_sendmsg(e, op.fd, static_cast<const msghdr*>(op.buf),
                                  op.msg_flags | MSG_NOSIGNAL);
            break;
        case OpCode::close:
            io_uring_prep_close(e, op.fd);
            break;
        case OpCode::read_at:
            io_uring_prep_read(e, op.fd, op.cursor(), len, op.offset + op.done);
            break;
        case OpCode::write_at:
            io_uring_prep_write(e, op.fd, op.cursor(), len, op.offset + op.done);
            break;
        case OpCode::readv_at:
            io_uring_prep_readv(e, op.fd, static_cast<const iovec*>(op.buf), op.len, op.offset);
            break;
        case OpCode::writev_at:
            io_uring_prep_writev(e, op.fd, static_cast<const iovec*>(op.buf), op.len, op.offset);
            break;
        case OpCode::fsync:
            io_uring_prep_fsync(e, op.fd, 0);
            break;
        case OpCode::fdatasync:
            io_uring_prep_fsync(e, op.fd, IORING_FSYNC_DATASYNC);
            break;
        case OpCode::fallocate:
            io_uring_prep_fallocate(e, op.fd, op.msg_flags, op.offset, op.aux);
            break;
        case OpCode::recvmmsg: // wait for readiness, then the system call (mmsg_ready)
            io_uring_prep_poll_add(e, op.fd, POLLIN);
            break;
        case OpCode::sendmmsg:
            io_uring_prep_poll_add(e, op.fd, POLLOUT);
            break;
        }
    }

    // --- registered files ------------------------------------------------------------------
    // An fd that is used for transfers is put into the ring's file table, in the slot of the same
    // number, the first time it is used (a FILES_UPDATE request queued before the op, so it costs
    // no system call). Ops on it then skip the per-request fget/fput of the file. The slot is
    // cleared (another FILES_UPDATE) before galay closes or releases the fd, on whatever thread.

    static bool registers_file(OpCode c) noexcept {
        switch (c) {
        case OpCode::recv:
        case OpCode::send:
        case OpCode::recv_pooled:
        case OpCode::recvmsg:
        case OpCode::sendmsg:
        case OpCode::read_at:
        case OpCode::write_at:
        case OpCode::readv_at:
        case OpCode::writev_at:
            return true;
        default:
            return false;
        }
    }

    void setup_file_table() {
        rlimit rl{};
        std::size_t n = 65536; // (the kernel allocates 8 bytes per slot up front)
        if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n)
            n = static_cast<std::size_t>(rl.rlim_cur);
        if (n == 0 || io_uring_register_files_sparse(&ring_, static_cast<unsigned>(n)) != 0)
            return; // (kernels before 5.19, or no room): plain fds
        slot_values_.resize(n);
        for (std::size_t i = 0; i < n; ++i)
            slot_values_[i] = static_cast<int>(i);
    }

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
        if (st.file != FdState::kUnregistered || !own(fd, st)) return;
        st.file = FdState::kRegistered;
        io_uring_sqe* e = sqe();
        io_uring_prep_files_update(e, &slot_values_[static_cast<std::size_t>(fd)], 1, fd);
        io_uring_sqe_set_data64(e, static_cast<std::uint64_t>(fd) << 32 | kRegisterTag);
    }

    /// Drop what this driver holds for `fd` (its multishot recv, its registered slot, queued
    /// buffers), before the fd is closed or handed over. Ownership is the caller's business.
    void drop_fd_state(int fd) noexcept {
        if (multishot_accept_) accepts_.forget(fd);
        if (fd < 0 || static_cast<std::size_t>(fd) >= fds_.size()) return;
        FdState& m = fds_[static_cast<std::size_t>(fd)];
        if (m.armed) {
            // The armed recv holds the socket open: closing the fd alone would never send
            // the FIN. Cancel it by its user_data, which (unlike the fd number, closed and
            // perhaps reused before this is submitted) names exactly this connection's recv.
            io_uring_sqe* e = sqe();
            io_uring_prep_cancel64(e, multishot_tag(fd, m.generation), 0);
            io_uring_sqe_set_data64(e, kIgnoreTag);
        }
        if (m.file == FdState::kRegistered) { // the slot's reference would keep it open too
            io_uring_sqe* e = sqe();
            io_uring_prep_files_update(e, &kNoFile, 1, fd);
            io_uring_sqe_set_data64(e, static_cast<std::uint64_t>(fd) << 32 | kUnregisterTag);
        }
        m.file = FdState::kUnregistered; // (a refusal was about that file, not the number)
        m.armed_fixed = false;
        ++m.generation; // completions of the old connection are now stale
        m.armed = false;
        m.starved = false;
        m.paused = false;
        m.stream = false;
        while (m.has_queued()) {
            FdState::Completion c = m.pop();
            if (c.res > 0) give_back(c.buffer);
        }
        if (IoOp* w = std::exchange(m.waiter, nullptr)) {
            w->result = -ECANCELED;
            sched_.complete(*w);
        }
    }

    void drain_remote_forgets() noexcept {
        std::vector<int> fds;
        {
            std::lock_guard lock(FdOwners::mutex());
            fds.swap(remote_forgets_);
            remote_forget_pending_.store(false, std::memory_order_relaxed);
        }
        for (int fd : fds) {
            if (static_cast<std::size_t>(fd) < fds_.size()) fds_[fd].owned = false;
            drop_fd_state(fd);
        }
    }

    /// A FILES_UPDATE completed. A failed registration leaves the fd on plain ops; ops already
    /// issued on the empty slot fail with EBADF and are issued again (see reap).
    void on_files_update(std::uint64_t ud, std::int32_t res) noexcept {
        if (res >= 0 || (ud & 7) != kRegisterTag) return;
        FdState& st = state(static_cast<int>(ud >> 32));
        if (st.file == FdState::kRegistered) st.file = FdState::kRefused;
    }

    void reap() {
        if (!late_.empty()) [[unlikely]] { // completions an injected delay held back a turn
            std::vector<LateCqe> late;
            late.swap(late_);
            for (const LateCqe& c : late)
                on_op_cqe(reinterpret_cast<IoOp*>(c.user_data), c.res, false);
        }
        io_uring_cqe* cqe;
        unsigned head;
        unsigned seen = 0;
        io_uring_for_each_cqe(&ring_, head, cqe) {
            ++seen;
            const std::uint64_t ud = cqe->user_data;
            if (ud == kIgnoreTag) continue;
            if (ud == kWakeTag) {
                arm_wake();
                continue;
            }
            if ((ud & 7) == kMsgTag) {
                if (ud != kMsgTag) reinterpret_cast<UringDriver*>(ud & ~std::uint64_t{7})->wake();
                continue; // (ud == kMsgTag: another worker woke us)
            }
            if ((ud & 7) == kMultishotTag) {
                on_multishot(ud, cqe->res, cqe->flags);
                continue;
            }
            if ((ud & 7) == MultishotAccepts::kTag) {
                accepts_.on_cqe(ud, cqe->res, cqe->flags);
                continue;
            }
            if ((ud & 7) == kRegisterTag || (ud & 7) == kUnregisterTag) {
                on_files_update(ud, cqe->res);
                continue;
            }
            on_op_cqe(reinterpret_cast<IoOp*>(ud), cqe->res, true);
        }
        io_uring_cq_advance(&ring_, seen);
    }

    struct LateCqe {
        std::uint64_t user_data;
        std::int32_t res;
    };

    void on_op_cqe(IoOp* op, std::int32_t res, bool may_delay) {
        if (!injected_.empty()) [[unlikely]]
            res = injected_result(op, res);
        if (faults::on() && may_delay && !shutting_down_) [[unlikely]] {
            if (faults::hit(faults::Kind::late, op->code)) {
                late_.push_back({reinterpret_cast<std::uint64_t>(op), res});
                return;
            }
        }
        if (res == -EBADF && op->fixed_file && !uses_fixed(op->fd)) {
            prep(*op); // its slot was never filled: again on the plain fd
            return;
        }
        if ((res == -EINTR || (res == -EAGAIN && !is_file_op(op->code))) &&
            retried_when_interrupted(op->code)) {
            // Interrupted, or a socket that would block after all: issue it again, as a system
            // call would be retried (a file's EAGAIN, from O_NONBLOCK, is reported instead).
            if (!op->cancelled) {
                prep(*op);
                return;
            }
            res = -ECANCELED;
        }
        if (is_mmsg(op->code)) {
            if (!mmsg_ready(*op, res)) {
                prep(*op); // it would block again: wait for the next readiness
                return;
            }
        } else if (op->absorb(res)) {
            if (!op->cancelled) {
                prep(*op); // the rest of a short `all` transfer
                return;
            }
            op->result = -ECANCELED; // stopped part-way (a deadline maps it to timed_out)
        }
        if (op->code == OpCode::recv_pooled && op->result <= 0) // (no buffer rings)
            pool_->put(static_cast<std::uint16_t>(op->aux));    // nothing arrived in it
        --in_flight_;
        if (op->fd >= 0 && static_cast<std::size_t>(op->fd) < fds_.size() &&
            fds_[static_cast<std::size_t>(op->fd)].ops != 0)
            --fds_[static_cast<std::size_t>(op->fd)].ops;
        sched_.complete(*op);
    }

    /// The readiness poll of a batch op completed with `res`. Returns true when the op is finished,
    /// false when its system call would still block.
    static bool mmsg_ready(IoOp& op, int res) noexcept {
        if (res < 0) {
            op.absorb(res); // cancelled, timed out, or the poll failed
            return true;
        }
        if (attempt_mmsg(op)) return true;
        if (!op.cancelled) return false;
        op.result = -ECANCELED;
        return true;
    }

    void setup_buffer_ring(const SchedulerOptions& options) {
        unsigned count = options.pool_buffers;
        if (count == 0 || count > 32768 || (count & (count - 1)) != 0)
            throw Error(errno_code(EINVAL), "galay: pool_buffers must be a power of two <= 32768");
        pool_ = std::make_unique<BufferPool>(count, options.pool_buffer_size);
        buf_ring_bytes_ = sizeof(io_uring_buf) * count;
        void* mem = ::mmap(nullptr, buf_ring_bytes_, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) return; // plain recv into pool buffers instead
        auto* br = static_cast<io_uring_buf_ring*>(mem);
        io_uring_buf_ring_init(br);
        io_uring_buf_reg reg{};
        reg.ring_addr = reinterpret_cast<std::uint64_t>(br);
        reg.ring_entries = count;
        reg.bgid = kBufferGroup;
        if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) { // kernels before 5.19
            ::munmap(mem, buf_ring_bytes_);
            return;
        }
        buf_ring_ = br;
        provision_buffers();
        publish_buffers();
    }

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
    /// The kernel takes buffers from the ring's head and we return them at its tail, so every
    /// buffer ever handed to it stays in rotation. Handing over only as many as the load needs
    /// (twice what the last wait consumed) keeps that rotation small enough to stay in the cache
    /// and the TLB: 10,000 busy connections cycle through a few hundred buffers, not the whole
    /// pool. The pool only grows; a recv that found the ring empty (ENOBUFS) counts as demand
    /// and is re-armed once buffers are back.
    void provision_buffers() noexcept {
        const unsigned count = pool_->count();
        // Floor: one per armed recv (the most one wait can take) up to 1024, so that a burst on
        // a few hundred connections never meets an empty ring (ENOBUFS ends the multishot recv,
        // and re-arming it costs more than the buffer); above that, twice the last demand.
        const std::size_t floor = std::min<std::size_t>(armed_multishots_ + kBufferSlack, 1024);
        const std::size_t want = std::max(floor, 2 * demand_);
        demand_ = 0;
        while (ring_free_ < want && provisioned_ < count)
            ring_put(static_cast<std::uint16_t>(provisioned_++));
    }

    /// One-shot ops on `fd` may be in flight (the multishot ones are cancelled by their tag).
    bool has_ops(int fd) const noexcept {
        return in_flight_ != 0 && fd >= 0 && static_cast<std::size_t>(fd) < fds_.size() &&
               fds_[static_cast<std::size_t>(fd)].ops != 0;
    }

    FdState& state(int fd) {
        if (static_cast<std::size_t>(fd) >= fds_.size())
            fds_.resize(std::max<std::size_t>(static_cast<std::size_t>(fd) + 1, fds_.size() * 2));
        return fds_[static_cast<std::size_t>(fd)];
    }

    void deliver(IoOp& op, FdState::Completion c) noexcept {
        op.result = c.res;
        if (c.res > 0) {
            op.aux = c.buffer;
            op.buf = c.copied ? chunks_[c.buffer - pool_->count()].get() : pool_->address(c.buffer);
        }
    }

    bool submit_pooled(IoOp& op) {
        FdState& m = state(op.fd);
        if (m.has_queued()) { // already arrived: no suspension, no system call
            deliver(op, m.pop());
            return true;
        }
        m.waiter = &op;
        op.pending = true;
        if (!m.armed && !m.starved) {
            own(op.fd, m); // the armed recv holds the socket: a close anywhere must cancel it
            register_file(op.fd, true);
            m.stream = true;
            arm_multishot(op.fd, m);
        }
        return false;
    }

    void arm_multishot(int fd, FdState& m) {
        io_uring_sqe* e = sqe();
        io_uring_prep_recv(e, fd, nullptr, 0, 0);
        m.armed_fixed = uses_fixed(fd);
        if (m.armed_fixed) e->flags |= IOSQE_FIXED_FILE;
        e->ioprio |= IORING_RECV_MULTISHOT;
        e->flags |= IOSQE_BUFFER_SELECT;
        e->buf_group = kBufferGroup;
        io_uring_sqe_set_data64(e, multishot_tag(fd, m.generation));
        m.armed = true;
        ++armed_multishots_;
        ++in_flight_;
    }

    static std::uint64_t multishot_tag(int fd, std::uint32_t generation) noexcept {
        return static_cast<std::uint64_t>(fd) << 32 | std::uint64_t{generation & 0x1fffffff} << 3 |
               kMultishotTag;
    }

    void on_multishot(std::uint64_t ud, std::int32_t res, std::uint32_t flags) {
        const int fd = static_cast<int>(ud >> 32);
        const std::uint32_t gen = static_cast<std::uint32_t>(ud >> 3) & 0x1fffffff;
        const bool more = flags & IORING_CQE_F_MORE;
        const bool has_buffer = flags & IORING_CQE_F_BUFFER;
        const auto bid = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
        if (has_buffer) --ring_free_, ++demand_;
        FdState& m = state(fd);
        const bool current = gen == (m.generation & 0x1fffffff);
        if (!more) {
            --in_flight_;
            --armed_multishots_;
            if (current) m.armed = false, m.paused = false;
        }
        if (!current) { // the connection that armed it is gone
            if (has_buffer) give_back(bid);
            return;
        }
        if (res == -EBADF && !more && m.armed_fixed && !uses_fixed(fd)) {
            arm_multishot(fd, m); // its slot was never filled: again on the plain fd
            return;
        }
        if (res == -ENOBUFS) { // the ring ran dry: resume once buffers are given back
            faults::ring_empty();
            ++demand_;
            m.starved = true;
            starved_.push_back(fd);
            return;
        }
        if (!more && res == -ECANCELED && !shutting_down_) {
            // Ended by a cancel that is not the connection's close (that one makes the completion
            // stale): pause() asked for it, or the kernel tore the request down. Nothing to
            // deliver; armed again now if the task waits, else when it next asks.
            if (m.waiter != nullptr) arm_multishot(fd, m);
            return;
        }
        if (faults::on() && more && res > 0 && !m.paused) [[unlikely]] {
            if (faults::hit(faults::Kind::end_multishot, OpCode::recv_pooled)) {
                io_uring_sqe* e = sqe(); // as the kernel may end it: its final CQE follows
                io_uring_prep_cancel64(e, multishot_tag(fd, m.generation), 0);
                io_uring_sqe_set_data64(e, kIgnoreTag);
            }
        }
        FdState::Completion c{res, bid};
        if (IoOp* w = std::exchange(m.waiter, nullptr)) {
            deliver(*w, c);
            sched_.complete(*w);
            return;
        }
        if (m.pooled >= queue_cap()) { // its share of the pool is used up
            if (more && !m.paused) pause(fd, m);
            if (c.res > 0) keep_share(c);
        }
        m.push(c);
    }

    // --- a bounded share of the pool per connection -------------------------------------------
    // A multishot recv keeps taking pool buffers for as long as bytes arrive, whether or not its
    // task asks for them. A task that stops receiving (its echo waits on a peer that never reads)
    // would let its connection take the whole pool and starve every other one. So once a
    // connection holds `queue_cap()` queued pool buffers, its recv is cancelled: further bytes
    // wait in the socket (whose window then closes on the sender), and the recv is armed again
    // when the task has taken everything queued and asks for more. What the kernel delivered
    // before the cancel took effect (one loop turn can bring dozens of completions) is copied
    // out of the pool into chunks of its own, so the pool share stays at the cap; that copy is
    // made once per stall, on the stalled connection only. The echo path, where the task waits
    // for data, never queues and never comes here.

    /// Completions one connection may have queued: an eighth of the pool up to 8 (8 x 64 KiB by
    /// default), and 1 when fewer than an eighth of the buffers are left, so that many stalled
    /// connections together cannot exhaust it either.
    std::size_t queue_cap() const noexcept {
        const std::size_t count = pool_->count();
        const std::size_t left = ring_free_ + (count - provisioned_);
        if (left < count / 8) return 1;
        return std::clamp<std::size_t>(count / 8, 1, 8);
    }

    /// Move the bytes of `c` out of its pool buffer into a heap chunk and give the buffer back.
    /// Keeps the buffer when the chunk ids are exhausted (65536 - pool size of them).
    void keep_share(FdState::Completion& c) {
        std::uint16_t id;
        if (!free_chunks_.empty()) {
            id = free_chunks_.back();
            free_chunks_.pop_back();
        } else if (pool_->count() + chunks_.size() <= UINT16_MAX) {
            id = static_cast<std::uint16_t>(pool_->count() + chunks_.size());
            chunks_.emplace_back();
        } else {
            return;
        }
        auto& chunk = chunks_[id - pool_->count()];
        chunk = std::make_unique_for_overwrite<char[]>(static_cast<std::size_t>(c.res));
        std::memcpy(chunk.get(), pool_->address(c.buffer), static_cast<std::size_t>(c.res));
        give_back(c.buffer);
        c.buffer = id;
        c.copied = true;
    }

    void pause(int fd, FdState& m) {
        m.paused = true;
        io_uring_sqe* e = sqe();
        io_uring_prep_cancel64(e, multishot_tag(fd, m.generation), 0);
        io_uring_sqe_set_data64(e, kIgnoreTag);
    }

    void rearm_starved() {
        std::vector<int> fds;
        fds.swap(starved_);
        for (int fd : fds) {
            FdState& m = state(fd);
            if (!m.starved) continue;
            m.starved = false;
            // One whose share is queued waits for its task to drain it (submit_pooled re-arms).
            if (!m.armed && (m.waiter != nullptr || m.pooled < queue_cap())) arm_multishot(fd, m);
        }
    }

    Scheduler& sched_;
    const std::thread::id thread_ = std::this_thread::get_id(); // SINGLE_ISSUER: the only submitter
    io_uring ring_{};
    std::unique_ptr<BufferPool> pool_;
    io_uring_buf_ring* buf_ring_ = nullptr;
    std::size_t buf_ring_bytes_ = 0;
    static inline int kNoFile = -1; // FILES_UPDATE value that empties a slot
    std::vector<int> slot_values_;  // slot_values_[i] == i, read by FILES_UPDATE; size = table size
    std::vector<int> remote_forgets_; // guarded by FdOwners::mutex()
    std::atomic<bool> remote_forget_pending_{false};
    static constexpr std::size_t kBufferSlack = 32;
    std::size_t armed_multishots_ = 0;
    std::size_t demand_ = 0;    // buffers consumed (or missed: ENOBUFS) since the last wait
    std::size_t ring_free_ = 0; // buffers the kernel may pick (including staged ones)
    unsigned provisioned_ = 0;  // ids [0, provisioned_) have been handed to the ring
    int staged_ = 0;            // added at the tail since the last publish_buffers()
    std::vector<FdState> fds_;
    std::vector<int> starved_;
    // Bytes copied out of the pool by keep_share, lent like pool buffers under ids from
    // pool_->count() up (give_back frees them).
    std::vector<std::unique_ptr<char[]>> chunks_;
    std::vector<std::uint16_t> free_chunks_;
    bool shutting_down_ = false;
    unsigned loop_depth_ = 0;    // block_on loops running on this thread (close_later)
    bool closes_queued_ = false; // close_later queued SQEs not yet submitted
    // Fault injection (galay/detail/faults.hpp); empty unless a plan is installed.
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
    bool msg_ring_ = false;    // wake peers with IORING_OP_MSG_RING
    bool msgs_queued_ = false; // MSG_RING SQEs queued since the last submission
    std::size_t in_flight_ = 0;
    FixedBufferTable fixed_; // registered buffers (fs::FixedBuffer)
    bool multishot_accept_ = false;
    MultishotAccepts accepts_{ring_, sched_, in_flight_}; // (after the members it refers to)
};

} // namespace

UringProbe run_uring_probe() {
    UringProbe out;
    if (const char* fake = std::getenv("GALAY_FAKE_URING_PROBE"); fake != nullptr && *fake) {
        int e = errno_from_name(fake);
        out.error = errno_code(e);
        out.reason = std::string("io_uring_setup: ") + std::strerror(e) +
                     " (simulated by GALAY_FAKE_URING_PROBE)";
        return out;
    }
    io_uring ring;
    int ret = setup_ring(ring, 8, nullptr);
    if (ret < 0) {
        out.error = errno_code(-ret);
        out.reason = std::string("io_uring_setup: ") + std::strerror(-ret) + sysctl_note() +
                     (ret == -ENOMEM ? memlock_note() : "");
        return out;
    }
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    if (probe == nullptr) {
        out.error = errno_code(ENOSYS);
        out.reason = "the kernel cannot report which io_uring opcodes it supports (too old)";
        ring_unmapping();
        io_uring_queue_exit(&ring);
        return out;
    }
    for (const auto& op : kRequiredOps) {
        if (!io_uring_opcode_supported(probe, op.op)) {
            out.error = errno_code(ENOSYS);
            out.reason = std::string("the kernel lacks the io_uring opcode IORING_OP_") + op.name;
            break;
        }
    }
    io_uring_free_probe(probe);
    ring_unmapping();
    io_uring_queue_exit(&ring);
    out.usable = !out.error;
    return out;
}

const DriverEntry uring_driver_entry{
    .backend = Backend::io_uring,
    .probe = run_uring_probe,
    .make = [](Scheduler& s, const SchedulerOptions& options) -> std::unique_ptr<Driver> {
        return std::make_unique<UringDriver>(s, options);
    },
};

} // namespace galay::detail
