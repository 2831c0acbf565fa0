#include "galay/detail/byte_window.hpp"

#include <cstring>
#include <utility>

namespace galay::detail {

namespace {

/// Blocks of ByteWindow::kInitial bytes that empty windows gave back, taken last in first out:
/// the block taken is the one most recently written, still in this core's cache. Bounded: when
/// the stack is full, a window keeps its block.
class SpareBlocks {
public:
    SpareBlocks() noexcept = default;
    SpareBlocks(const SpareBlocks&) = delete;
    SpareBlocks& operator=(const SpareBlocks&) = delete;
    ~SpareBlocks() {
        while (count_ > 0)
            delete[] blocks_[--count_];
    }
    bool put(char* block) noexcept {
        if (count_ == kMax) return false;
        blocks_[count_++] = block;
        return true;
    }
    char* take() noexcept { return count_ > 0 ? blocks_[--count_] : nullptr; }

private:
    static constexpr std::size_t kMax = 32;
    char* blocks_[kMax];
    std::size_t count_ = 0;
};
thread_local SpareBlocks t_spare_blocks;

} // namespace

void ByteWindow::give_back_block() noexcept {
    if (!t_spare_blocks.put(data_.get())) return; // (the stack is full: keep it)
    (void)data_.release();
    block_ = 0;
    begin_ = end_ = 0;
    grow_ = false;
}

void ByteWindow::compact() noexcept {
    std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
}

void ByteWindow::grow(std::size_t want) {
    if (block_ == 0 && want <= kInitial && capacity_ >= kInitial) {
        if (char* spare = t_spare_blocks.take()) {
            data_.reset(spare);
            block_ = kInitial;
            begin_ = end_ = 0;
            return;
        }
    }
    std::size_t block = std::max(block_ * 2, kInitial);
    while (block - size() < want && block < capacity_)
        block *= 2;
    block = std::min(block, capacity_);
    auto bigger = std::make_unique_for_overwrite<char[]>(block);
    if (size() > 0) std::memcpy(bigger.get(), data_.get() + begin_, size());
    end_ -= begin_;
    begin_ = 0;
    data_ = std::move(bigger);
    block_ = block;
}

std::span<char> ByteWindow::room(std::size_t n) {
    if (begin_ == end_) begin_ = end_ = 0;
    const std::size_t want = std::max(n, block_ / 4 + 1);
    if (block_ - end_ < want || grow_) {
        const bool filled = std::exchange(grow_, false);
        if (block_ < capacity_ && (filled || block_ - size() < want))
            grow(want); // (also the first block: block_ is 0 until then)
        else if (begin_ > 0)
            compact();
    }
    return {data_.get() + end_, block_ - end_};
}

bool ByteWindow::append(std::span<const char> data) {
    if (data.size() > capacity_ - size()) return false;
    if (data.empty()) return true;
    std::span<char> tail = room(data.size());
    std::memcpy(tail.data(), data.data(), data.size());
    end_ += data.size();
    return true;
}

std::size_t ByteWindow::find(std::string_view delim, std::size_t from) const noexcept {
    std::string_view hay = live();
    if (from >= hay.size()) return std::string_view::npos;
    if (delim.size() == 1) {
        const void* p = std::memchr(hay.data() + from, delim[0], hay.size() - from);
        return p == nullptr ? std::string_view::npos
                            : static_cast<std::size_t>(static_cast<const char*>(p) - hay.data());
    }
    return hay.find(delim, from);
}

} // namespace galay::detail
