// Registered ("fixed") buffers of an io_uring ring, for fs::FixedBuffer (private to the io_uring
// driver).
//
// The ring gets a sparse buffer table of `kSlots` entries on the first registration
// (io_uring_register_buffers_sparse, Linux >= 5.19); a buffer then takes one free slot
// (io_uring_register_buffers_update_tag: the kernel pins its pages once, instead of for every
// request) and gives it back when it is unregistered, by updating the slot to an empty entry. The
// kernel keeps the old pages pinned until the requests that use them have finished; from then on
// nothing of the ring refers to that memory, so it may be freed. A transfer whose op is marked
// `fixed` becomes IORING_OP_READ_FIXED / WRITE_FIXED with the slot in `buf_index`, after checking
// that its byte range lies inside the buffer this ring has in that slot (anything else is
// submitted as a plain READ / WRITE: a slot number never reaches the kernel for memory the slot
// does not hold).
//
// When the driver is destroyed first (io_uring_queue_exit drops every registration with the
// ring), the table tells each buffer still registered that it no longer is.
#pragma once

#include "driver/driver.hpp"

#include <liburing.h>

#include <vector>

namespace galay::detail {

class FixedBufferTable {
public:
    /// Slots of a ring's table (the kernel allows 16384). A program that needs more registered
    /// memory registers bigger buffers and uses slices of them.
    static constexpr unsigned kSlots = 1024;

    FixedBufferTable() = default;
    FixedBufferTable(const FixedBufferTable&) = delete;
    FixedBufferTable& operator=(const FixedBufferTable&) = delete;
    /// Detaches the buffers still registered (call after the ring is gone).
    ~FixedBufferTable();

    /// Register `r` with `ring` (owned by `driver`). 0, or -errno.
    int add(io_uring& ring, Driver& driver, BufferRegistration& r) noexcept;
    /// Unregister `r`. Aborts with a message if the kernel refuses: the caller is about to free
    /// the memory, which must not stay registered.
    void remove(io_uring& ring, BufferRegistration& r) noexcept;
    /// `op` (a fixed read_at/write_at) moves bytes inside the buffer registered in slot `op.aux`.
    bool covers(const IoOp& op) const noexcept;
    /// Fill `e` as READ_FIXED / WRITE_FIXED for `op`. Returns false (and clears op.fixed_buffer)
    /// when the op's range is not inside its slot's buffer; the caller then prepares a plain
    /// transfer.
    bool prep(io_uring_sqe* e, IoOp& op) const noexcept;

private:
    enum class State : std::uint8_t { untried, ready, unavailable };
    State state_ = State::untried;
    int table_error_ = 0; // why the table could not be created (positive errno)
    std::vector<BufferRegistration*> slots_;
    std::vector<unsigned> free_;
};

} // namespace galay::detail
