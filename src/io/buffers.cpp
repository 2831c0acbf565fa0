#include "galay/detail/byte_window.hpp"

#include <cstring>

namespace galay::detail {

void ByteWindow::compact() noexcept {
    std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
}

std::span<char> ByteWindow::room() {
    if (!data_) data_ = std::make_unique_for_overwrite<char[]>(capacity_);
    if (begin_ == end_)
        begin_ = end_ = 0;
    else if (begin_ > 0 && capacity_ - end_ < capacity_ / 4 + 1)
        compact();
    return {data_.get() + end_, capacity_ - end_};
}

bool ByteWindow::append(std::span<const char> data) {
    if (data.size() > capacity_ - size()) return false;
    if (data.empty()) return true;
    std::span<char> tail = room();
    if (tail.size() < data.size()) { // only the consumed prefix stands in the way
        compact();
        tail = {data_.get() + end_, capacity_ - end_};
    }
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
