// The bytes behind io::BufReader and io::BufWriter: one block holding [begin, end) (received and
// not consumed, or buffered and not sent). New bytes go into the free tail; the live bytes move
// to the front only when the tail gets small and room is asked for, so a view into them stays
// valid until the next room().
//
// The block starts small (kInitial, allocated on first use) and doubles, up to `capacity` (the
// limit), when the live bytes fill it or a receive took all of its room: a thousand idle
// connections each hold a couple of KiB, not their limit. That density is what lets a server's
// per-request work stay in cache and TLB: in the HTTP server at 1,000 connections, 16 KiB
// reader and writer blocks cost ~5% more CPU per request than 2 KiB ones.
//
// A window that is empty can give its block back (`give_back`, which BufWriter does each time it
// has sent everything): the block goes to a small stack of spare blocks of its thread, and the
// next window of that thread to need a block takes the one given back last. A server's writers
// then share the one or two blocks that are in the core's cache, instead of each writing its
// answer into a block of its own that is cold by the time the connection's next request comes,
// and idle connections hold no write buffer at all.
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
    static constexpr std::size_t kInitial = 2048;

    explicit ByteWindow(std::size_t capacity) noexcept
        : capacity_(std::max<std::size_t>(capacity, 1)) {}
    ByteWindow(ByteWindow&& o) noexcept
        : data_(std::move(o.data_))
        , capacity_(o.capacity_)
        , block_(std::exchange(o.block_, 0))
        , begin_(std::exchange(o.begin_, 0))
        , end_(std::exchange(o.end_, 0))
        , grow_(std::exchange(o.grow_, false)) {}
    ByteWindow& operator=(ByteWindow&&) = delete;

    std::string_view live() const noexcept { return {data_.get() + begin_, end_ - begin_}; }
    std::span<const char> live_bytes() const noexcept { return {data_.get() + begin_, size()}; }
    std::size_t size() const noexcept { return end_ - begin_; }
    /// The limit: the most bytes the window holds at once.
    std::size_t capacity() const noexcept { return capacity_; }
    /// Bytes allocated now (0 before first use; at most capacity()).
    std::size_t allocated() const noexcept { return block_; }
    bool full() const noexcept { return size() == capacity_; }
    /// When empty, give the block (if it has the initial size) to this thread's spare blocks;
    /// the next room() takes one from there. Views and spans into the window become invalid.
    void give_back() noexcept {
        if (begin_ == end_ && block_ == kInitial) give_back_block();
    }
    /// Drop the first `n` live bytes (at most all). Moves nothing: views stay valid.
    void consume(std::size_t n) noexcept { begin_ += std::min(n, size()); }

    /// The free tail for the next bytes, after moving the live bytes to the front (or into a
    /// larger block) when the tail is small: a partial line or request, usually. Empty when
    /// full. Invalidates views.
    std::span<char> room() { return room(0); }
    /// Same, with at least `n` bytes of tail when the capacity allows it (capacity() - size()
    /// otherwise).
    std::span<char> room(std::size_t n);
    /// The first `n` bytes of room() are now live. Filling all of it asks for a larger block
    /// next time (a receive that took all the room it had likely left more behind).
    void commit(std::size_t n) noexcept {
        end_ += n;
        if (n > 0 && end_ == block_ && block_ < capacity_) grow_ = true;
    }

    /// Copy `data` in if it fits beside the live bytes; false (nothing copied) if not.
    bool append(std::span<const char> data);
    /// Position (from begin) of `delim` in the live bytes, searching from `from`; npos if absent.
    std::size_t find(std::string_view delim, std::size_t from) const noexcept;

private:
    void give_back_block() noexcept;
    void compact() noexcept;     // the live bytes to the front
    void grow(std::size_t want); // a larger block with a tail of at least `want`

    std::unique_ptr<char[]> data_;
    std::size_t capacity_;
    std::size_t block_ = 0; // allocated
    std::size_t begin_ = 0, end_ = 0;
    bool grow_ = false; // the last commit filled the block
};

} // namespace galay::detail
