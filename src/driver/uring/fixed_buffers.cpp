#include "driver/uring/fixed_buffers.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace galay::detail {

FixedBufferTable::~FixedBufferTable() {
    for (BufferRegistration* r : slots_) {
        if (r == nullptr) continue;
        r->driver = nullptr;
        r->slot = -1;
    }
}

int FixedBufferTable::add(io_uring& ring, Driver& driver, BufferRegistration& r) noexcept {
    if (r.addr == nullptr || r.len == 0) return -EINVAL;
    if (state_ == State::unavailable) return -table_error_;
    if (state_ == State::untried) {
        const int ret = io_uring_register_buffers_sparse(&ring, kSlots);
        if (ret < 0) { // kernels before 5.19 have no sparse table; also ENOMEM
            state_ = State::unavailable;
            table_error_ = -ret;
            return ret;
        }
        try {
            slots_.assign(kSlots, nullptr);
            free_.reserve(kSlots);
        } catch (...) {
            io_uring_unregister_buffers(&ring);
            return -ENOMEM;
        }
        for (unsigned i = kSlots; i-- > 0;)
            free_.push_back(i);
        state_ = State::ready;
    }
    if (free_.empty()) return -ENOBUFS;
    const unsigned slot = free_.back();
    iovec iov{r.addr, r.len};
    __u64 tag = 0; // no completion when the kernel releases the pages
    const int ret = io_uring_register_buffers_update_tag(&ring, slot, &iov, &tag, 1);
    if (ret < 0) return ret; // ENOMEM (RLIMIT_MEMLOCK), EFAULT (memory it cannot pin), ...
    if (ret != 1) return -EIO;
    free_.pop_back();
    slots_[slot] = &r;
    r.driver = &driver;
    r.slot = static_cast<int>(slot);
    return 0;
}

void FixedBufferTable::remove(io_uring& ring, BufferRegistration& r) noexcept {
    if (r.slot < 0 || static_cast<unsigned>(r.slot) >= slots_.size() || slots_[r.slot] != &r) {
        std::fprintf(stderr, "galay: fs::FixedBuffer: slot %d is not registered with this ring\n",
                     r.slot);
        std::abort();
    }
    iovec empty{nullptr, 0};
    __u64 tag = 0;
    const int ret =
        io_uring_register_buffers_update_tag(&ring, static_cast<unsigned>(r.slot), &empty, &tag, 1);
    if (ret != 1) {
        // Freeing the memory now would leave the kernel a registration of freed memory.
        std::fprintf(stderr,
                     "galay: fs::FixedBuffer: cannot unregister buffer slot %d from the io_uring "
                     "ring (%s); stopping rather than freeing memory the kernel may still use\n",
                     r.slot, std::strerror(ret < 0 ? -ret : EIO));
        std::abort();
    }
    slots_[r.slot] = nullptr;
    free_.push_back(static_cast<unsigned>(r.slot));
    r.driver = nullptr;
    r.slot = -1;
}

bool FixedBufferTable::covers(const IoOp& op) const noexcept {
    if ((op.code != OpCode::read_at && op.code != OpCode::write_at) || op.aux >= slots_.size())
        return false;
    const BufferRegistration* r = slots_[op.aux];
    if (r == nullptr) return false;
    const auto begin = reinterpret_cast<std::uintptr_t>(op.buf);
    const auto base = reinterpret_cast<std::uintptr_t>(r->addr);
    return begin >= base && begin - base <= r->len && op.len <= r->len - (begin - base);
}

bool FixedBufferTable::prep(io_uring_sqe* e, IoOp& op) const noexcept {
    if (!covers(op)) {
        op.fixed_buffer = false;
        return false;
    }
    const int index = static_cast<int>(op.aux);
    if (op.code == OpCode::read_at)
        io_uring_prep_read_fixed(e, op.fd, op.cursor(), op.remaining(), op.offset + op.done, index);
    else
        io_uring_prep_write_fixed(e, op.fd, op.cursor(), op.remaining(), op.offset + op.done,
                                  index);
    io_uring_sqe_set_data(e, &op);
    return true;
}

} // namespace galay::detail
