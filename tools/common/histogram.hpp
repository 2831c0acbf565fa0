// A log-linear latency histogram (HdrHistogram-style): values in nanoseconds, 128 sub-buckets per
// power of two, so every recorded value is kept within 0.8% and percentiles are read off the
// histogram, never averaged. Fixed size (64 x 128 counters), no allocation when recording.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace galay::tools {

class LatencyHistogram {
public:
    static constexpr int kSubBits = 7;
    static constexpr std::uint64_t kSub = 1u << kSubBits;

    void record(std::uint64_t ns) noexcept {
        ++counts_[index(ns)];
        ++count_;
        sum_ += ns;
        max_ = std::max(max_, ns);
        min_ = std::min(min_, ns);
    }

    void merge(const LatencyHistogram& o) noexcept {
        for (std::size_t i = 0; i < counts_.size(); ++i)
            counts_[i] += o.counts_[i];
        count_ += o.count_;
        sum_ += o.sum_;
        max_ = std::max(max_, o.max_);
        min_ = std::min(min_, o.min_);
    }

    std::uint64_t count() const noexcept { return count_; }
    double mean_ns() const noexcept { return count_ ? double(sum_) / double(count_) : 0.0; }
    std::uint64_t max_ns() const noexcept { return count_ ? max_ : 0; }
    std::uint64_t min_ns() const noexcept { return count_ ? min_ : 0; }

    /// The value at quantile q (0..1): the upper edge of the bucket holding that rank, capped at
    /// the largest value seen.
    std::uint64_t percentile_ns(double q) const noexcept {
        if (count_ == 0) return 0;
        auto rank = static_cast<std::uint64_t>(q * double(count_));
        if (rank >= count_) rank = count_ - 1;
        std::uint64_t seen = 0;
        for (std::size_t i = 0; i < counts_.size(); ++i) {
            seen += counts_[i];
            if (seen > rank) return std::min(upper_edge(i), max_);
        }
        return max_;
    }

private:
    static std::size_t index(std::uint64_t v) noexcept {
        if (v < kSub) return static_cast<std::size_t>(v);
        const int msb = 63 - std::countl_zero(v);
        const int shift = msb - kSubBits;
        const std::uint64_t sub = (v >> shift) - kSub; // top bits below the leading one
        return static_cast<std::size_t>((shift + 1) * kSub + sub);
    }
    static std::uint64_t upper_edge(std::size_t i) noexcept {
        if (i < kSub) return i;
        const std::uint64_t shift = i / kSub - 1;
        const std::uint64_t sub = i % kSub;
        return ((kSub + sub + 1) << shift) - 1;
    }

    std::array<std::uint64_t, 64 * kSub> counts_{};
    std::uint64_t count_ = 0;
    std::uint64_t sum_ = 0;
    std::uint64_t max_ = 0;
    std::uint64_t min_ = UINT64_MAX;
};

} // namespace galay::tools
