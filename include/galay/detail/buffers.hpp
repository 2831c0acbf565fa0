// The byte-range concepts shared by every operation that takes a caller's buffer (sockets, files).
#pragma once

#include <ranges>
#include <type_traits>

namespace galay {

/// A contiguous range of bytes we may write into (std::array<char,N>, std::vector<std::byte>,
/// std::span<unsigned char>, std::string, fs::AlignedBuffer, ...).
template <class B>
concept MutableBuffer =
    std::ranges::contiguous_range<B> && std::ranges::sized_range<B> &&
        sizeof(std::ranges::range_value_t<B>) == 1 &&
    !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<B>>>;

/// A contiguous range of bytes we may read from.
template <class B>
concept ConstBuffer = std::ranges::contiguous_range<B> && std::ranges::sized_range<B> &&
                      sizeof(std::ranges::range_value_t<B>) == 1;

namespace detail {
/// The first byte of a buffer, as the untyped pointer an operation carries.
template <class B>
const void* buffer_data(const B& b) noexcept {
    return std::ranges::data(b);
}
} // namespace detail

} // namespace galay
