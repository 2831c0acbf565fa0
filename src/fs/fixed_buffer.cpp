#include "galay/fs/fixed_buffer.hpp"

#include "driver/driver.hpp"
#include "galay/runtime.hpp"
#include "runtime/scheduler_access.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace galay::fs {

FixedBuffer::FixedBuffer(std::size_t size, std::size_t alignment)
    : mem_(size, alignment) {
    register_now();
}

FixedBuffer::FixedBuffer(AlignedBuffer memory)
    : mem_(std::move(memory)) {
    register_now();
}

FixedBuffer::FixedBuffer(FixedBuffer&& o) noexcept
    : mem_(std::move(o.mem_))
    , reg_(std::move(o.reg_))
    , thread_(o.thread_)
    , error_(std::exchange(o.error_, {})) {}

FixedBuffer& FixedBuffer::operator=(FixedBuffer&& o) noexcept {
    if (this != &o) {
        unregister_now(); // before mem_ lets go of the old memory
        mem_ = std::move(o.mem_);
        reg_ = std::move(o.reg_);
        thread_ = o.thread_;
        error_ = std::exchange(o.error_, {});
    }
    return *this;
}

FixedBuffer::~FixedBuffer() {
    unregister_now(); // mem_ is freed after this body
}

void FixedBuffer::register_now() {
    Scheduler* s = Scheduler::current();
    if (s == nullptr) {
        error_ = errno_code(EOPNOTSUPP);
        return;
    }
    auto reg = std::make_unique<detail::BufferRegistration>();
    reg->addr = mem_.data();
    reg->len = mem_.size();
    const int r = detail::SchedulerAccess::driver(*s).register_buffer(*reg);
    if (r < 0) {
        error_ = errno_code(-r);
        return;
    }
    reg_ = std::move(reg);
    thread_ = std::this_thread::get_id();
}

void FixedBuffer::unregister_now() noexcept {
    if (!reg_) return;
    if (reg_->driver != nullptr) {
        if (std::this_thread::get_id() != thread_) {
            std::fputs("galay: fs::FixedBuffer destroyed (or assigned to) on a thread other than "
                       "the one whose io_uring ring it is registered with; only that thread can "
                       "unregister it, and freeing registered memory would let the kernel write "
                       "into whatever reuses it. Destroy it on its scheduler's thread.\n",
                       stderr);
            std::abort();
        }
        reg_->driver->unregister_buffer(*reg_);
    }
    reg_.reset();
}

bool FixedBuffer::registered() const noexcept {
    return reg_ != nullptr && reg_->driver != nullptr;
}

int FixedBuffer::slot() const noexcept {
    return registered() ? reg_->slot : -1;
}

FixedSlice FixedBuffer::slice(std::size_t offset, std::size_t len) {
    if (offset > size() || len > size() - offset)
        throw std::out_of_range("galay::fs::FixedBuffer::slice: [" + std::to_string(offset) +
                                ", +" + std::to_string(len) + ") is outside the buffer of " +
                                std::to_string(size()) + " bytes");
    return FixedSlice(data() + offset, len, reg_.get());
}

} // namespace galay::fs
