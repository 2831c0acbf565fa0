#include "galay/detail/byte_window.hpp"

#include <cstring>
#include <utility>

namespace galay::detail {

void ByteWindow::compact() noexcept {
    std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
}

void ByteWindow::grow(std::size_t want) {
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
