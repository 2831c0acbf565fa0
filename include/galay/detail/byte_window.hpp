// The bytes behind io::BufReader and io::BufWriter: one fixed-capacity block, allocated on first
// use, holding [begin, end) (received and not consumed, or buffered and not sent). New bytes go
// into the free tail; the live bytes move to the front only when the tail gets small and room is
// asked for, so a view into them stays valid until the next room().
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

namespace galay::detail {

class ByteWindow {
public:
    explicit ByteWindow(std::size_t capacity) noexcept
        : capacity_(std::max<std::size_t>(capacity, 1)) {}
    ByteWindow(ByteWindow&& o) noexcept
        : data_(std::move(o.data_))
        , capacity_(o.capacity_)
        , begin_(std::exchange(o.begin_, 0))
        , end_(std::exchange(o.end_, 0)) {}
    ByteWindow& operator=(ByteWindow&&) = delete;

    std::string_view live() const noexcept { return {data_.get() + begin_, end_ - begin_}; }
    std::span<const char> live_bytes() const noexcept { return {data_.get() + begin_, size()}; }
    std::size_t size() const noexcept { return end_ - begin_; }
    std::size_t capacity() const noexcept { return capacity_; }
    bool full() const noexcept { return size() == capacity_; }
    /// Drop the first `n` live bytes (at most all). Moves nothing: views stay valid.
    void consume(std::size_t n) noexcept { begin_ += std::min(n, size()); }

    /// The free tail for the next bytes, after moving the live bytes to the front when the tail
    /// is small (a partial line or request, usually). Empty when full. Invalidates views.
    std::span<char> room();
    /// The first `n` bytes of room() are now live.
    void commit(std::size_t n) noexcept { end_ += n; }

    /// Copy `data` in if it fits beside the live bytes; false (nothing copied) if not.
    bool append(std::span<const char> data);
    /// Position (from begin) of `delim` in the live bytes, searching from `from`; npos if absent.
    std::size_t find(std::string_view delim, std::size_t from) const noexcept;

private:
    void compact() noexcept; // the live bytes to the front

    std::unique_ptr<char[]> data_;
    std::size_t capacity_;
    std::size_t begin_ = 0, end_ = 0;
};

} // namespace galay::detail
