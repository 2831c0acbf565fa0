// Pooled receives: one multishot recv per connection picking buffers from a provided-buffer ring
// (Linux >= 5.19; otherwise a plain recv into a pool buffer). Completions the task has not asked
// for yet are queued per connection, with a bounded share of the pool each; buffers are handed to
// the ring only as the load needs them, and given back at its tail.
#include "driver/uring/uring_driver.hpp"

#include "driver/common/faults.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace galay::detail {

void UringDriver::give_back(std::uint16_t id) noexcept {
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

void UringDriver::release_withheld() noexcept {
    std::vector<std::uint16_t> ids;
    ids.swap(withheld_);
    for (std::uint16_t id : ids) {
        if (buf_ring_ == nullptr)
            pool_->put(id);
        else
            ring_put(id);
    }
}

void UringDriver::setup_buffer_ring(const SchedulerOptions& options) {
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

/// The kernel takes buffers from the ring's head and we return them at its tail, so every
/// buffer ever handed to it stays in rotation. Handing over only as many as the load needs
/// (twice what the last wait consumed) keeps that rotation small enough to stay in the cache
/// and the TLB: 10,000 busy connections cycle through a few hundred buffers, not the whole
/// pool. The pool only grows; a recv that found the ring empty (ENOBUFS) counts as demand
/// and is re-armed once buffers are back.
void UringDriver::provision_buffers() noexcept {
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

bool UringDriver::submit_pooled(IoOp& op) {
    FdState& m = state(op.fd);
    Received& r = received(op.fd);
    if (r.has_queued()) { // already arrived: no suspension, no system call
        deliver(op, r.pop());
        return true;
    }
    r.waiter = &op;
    op.pending = true;
    if (!m.armed && !m.starved) {
        own(op.fd, m); // the armed recv holds the socket: a close anywhere must cancel it
        register_file(op.fd, true);
        m.stream = true;
        arm_multishot(op.fd, m);
    }
    return false;
}

void UringDriver::arm_multishot(int fd, FdState& m) {
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

void UringDriver::on_multishot(std::uint64_t ud, std::int32_t res, std::uint32_t flags) {
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
        SchedulerAccess::counters(sched_).enobufs.add();
        ++demand_;
        m.starved = true;
        starved_.push_back(fd);
        return;
    }
    if (!more && res == -ECANCELED && !shutting_down_) {
        // Ended by a cancel that is not the connection's close (that one makes the completion
        // stale): pause() asked for it, or the kernel tore the request down. Nothing to
        // deliver; armed again now if the task waits, else when it next asks.
        if (received(fd).waiter != nullptr) arm_multishot(fd, m);
        return;
    }
    if (faults::on() && more && res > 0 && !m.paused) [[unlikely]] {
        if (faults::hit(faults::Kind::end_multishot, OpCode::recv_pooled)) {
            io_uring_sqe* e = sqe(); // as the kernel may end it: its final CQE follows
            io_uring_prep_cancel64(e, multishot_tag(fd, m.generation), 0);
            io_uring_sqe_set_data64(e, kIgnoreTag);
        }
    }
    Completion c{res, bid};
    Received& r = received(fd);
    if (IoOp* w = std::exchange(r.waiter, nullptr)) {
        deliver(*w, c);
        SchedulerAccess::complete(sched_, *w);
        return;
    }
    if (r.pooled >= queue_cap()) { // its share of the pool is used up
        if (more && !m.paused) pause(fd, m);
        if (c.res > 0) keep_share(c);
    }
    r.push(c);
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
std::size_t UringDriver::queue_cap() const noexcept {
    const std::size_t count = pool_->count();
    const std::size_t left = ring_free_ + (count - provisioned_);
    if (left < count / 8) return 1;
    return std::clamp<std::size_t>(count / 8, 1, 8);
}

/// Move the bytes of `c` out of its pool buffer into a heap chunk and give the buffer back.
/// Keeps the buffer when the chunk ids are exhausted (65536 - pool size of them).
void UringDriver::keep_share(Completion& c) {
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

void UringDriver::pause(int fd, FdState& m) {
    m.paused = true;
    io_uring_sqe* e = sqe();
    io_uring_prep_cancel64(e, multishot_tag(fd, m.generation), 0);
    io_uring_sqe_set_data64(e, kIgnoreTag);
}

void UringDriver::rearm_starved() {
    std::vector<int> fds;
    fds.swap(starved_);
    for (int fd : fds) {
        FdState& m = state(fd);
        if (!m.starved) continue;
        m.starved = false;
        // One whose share is queued waits for its task to drain it (submit_pooled re-arms).
        const Received& r = received(fd);
        if (!m.armed && (r.waiter != nullptr || r.pooled < queue_cap())) arm_multishot(fd, m);
    }
}

} // namespace galay::detail
