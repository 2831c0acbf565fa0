#include "galay/io/buf_reader.hpp"
#include "galay/io/buf_writer.hpp"

#include <cstring>

namespace galay::detail {

std::span<char> ReadBuffer::prepare() {
    if (!data_) data_ = std::make_unique_for_overwrite<char[]>(capacity_);
    if (begin_ == end_) {
        begin_ = end_ = 0;
    } else if (begin_ > 0 && capacity_ - end_ < capacity_ / 4 + 1) {
        // The tail is small: move the live bytes (usually a partial line or request) to the
        // front so the next receive can take a full buffer's worth.
        std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
    }
    return {data_.get() + end_, capacity_ - end_};
}

std::size_t ReadBuffer::find(std::string_view delim, std::size_t from) const noexcept {
    std::string_view hay = live();
    if (from >= hay.size()) return std::string_view::npos;
    if (delim.size() == 1) {
        const void* p = std::memchr(hay.data() + from, delim[0], hay.size() - from);
        return p == nullptr ? std::string_view::npos
                            : static_cast<std::size_t>(static_cast<const char*>(p) - hay.data());
    }
    return hay.find(delim, from);
}

std::span<char> WriteBuffer::spare() {
    if (!data_) data_ = std::make_unique_for_overwrite<char[]>(capacity_);
    if (begin_ > 0 && capacity_ - end_ < capacity_ / 4 + 1) {
        std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
    }
    return {data_.get() + end_, capacity_ - end_};
}

bool WriteBuffer::append(std::span<const char> data) {
    if (data.size() > capacity_ - size()) return false;
    if (data.empty()) return true;
    std::span<char> room = spare();
    if (room.size() < data.size()) { // only the sent prefix stands in the way: move the rest
        std::memmove(data_.get(), data_.get() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
        room = {data_.get() + end_, capacity_ - end_};
    }
    std::memcpy(room.data(), data.data(), data.size());
    end_ += data.size();
    return true;
}

} // namespace galay::detail
