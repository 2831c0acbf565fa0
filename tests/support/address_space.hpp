// Address space that no byte may be read from or written to: a buffer "larger than one transfer"
// for tests that expect the library to refuse it before any I/O. Reserved with PROT_NONE and
// MAP_NORESERVE, so gigabytes cost neither memory nor commit charge, and any access faults (the
// kernel answers EFAULT), so a missing check cannot pass unnoticed.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <span>
#include <stdexcept>

namespace galay::test {

class ReservedAddressSpace {
public:
    explicit ReservedAddressSpace(std::size_t bytes)
        : size_(bytes) {
        void* p =
            ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::runtime_error("mmap of reserved address space failed");
        base_ = static_cast<char*>(p);
    }
    ~ReservedAddressSpace() { ::munmap(base_, size_); }
    ReservedAddressSpace(const ReservedAddressSpace&) = delete;
    ReservedAddressSpace& operator=(const ReservedAddressSpace&) = delete;

    std::span<char> span() const noexcept { return {base_, size_}; }

private:
    char* base_ = nullptr;
    std::size_t size_;
};

} // namespace galay::test
