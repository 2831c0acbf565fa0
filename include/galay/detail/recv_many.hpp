// galay/detail/recv_many.hpp: the awaitable behind `recv_many` of both channels.
#pragma once

#include "galay/error.hpp"
#include "galay/time/timeout.hpp"

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <utility>
#include <vector>

namespace galay::detail {

/// Waits for one value like `Ch::recv()`, then appends what else `Ch::take_buffered` hands over
/// without waiting. `Ch` names this template a friend and provides `RecvAwaiter` and
/// `std::size_t take_buffered(std::vector<T>&, std::size_t max)`.
template <class Ch, class T>
class [[nodiscard]] RecvManyAwaiter {
public:
    /// Up to `max` values from `ch`, appended to `out`.
    RecvManyAwaiter(Ch& ch, std::vector<T>& out, std::size_t max) noexcept
        : ch_(&ch)
        , first_(ch)
        , out_(&out)
        , max_(max) {}
    /// Give up after `d` when nothing came: `std::errc::timed_out`.
    [[nodiscard]] RecvManyAwaiter&& timeout(Timeout d) && {
        (void)std::move(first_).timeout(d);
        return std::move(*this);
    }
    /// Same, with an absolute steady-clock deadline.
    [[nodiscard]] RecvManyAwaiter&& deadline(std::chrono::steady_clock::time_point t) && {
        (void)std::move(first_).deadline(t);
        return std::move(*this);
    }
    /// Awaiter protocol: only `max == 0` is ready at once.
    bool await_ready() const noexcept { return max_ == 0; }
    /// Awaiter protocol: the first value is an ordinary receive.
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        return first_.await_suspend(h);
    }
    /// Awaiter protocol: how many values were appended (at least 1), or the first receive's
    /// error (`errc::closed`, `timed_out`, `operation_canceled`).
    Result<std::size_t> await_resume() {
        if (max_ == 0) return std::size_t{0};
        Result<T> first = first_.await_resume();
        if (!first) return std::unexpected(first.error());
        out_->push_back(std::move(*first));
        return 1 + ch_->take_buffered(*out_, max_ - 1);
    }

private:
    Ch* ch_;
    typename Ch::RecvAwaiter first_;
    std::vector<T>* out_;
    std::size_t max_;
};

} // namespace galay::detail
