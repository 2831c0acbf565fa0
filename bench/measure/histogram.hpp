// The latency histogram of every program of the suite, galay's and the hand-written baselines'
// alike (bench_client and raw_client, bench_file_io, bench_latency, bench_sync and raw_sync,
// aio_bench, http_turns, tls_load, raw_timerfd), so that a percentile compared between two of
// them is computed by the same code: log-linear buckets over nanoseconds (HdrHistogram-style).
//
// Values below 256 ns have one bucket each. Above, every power-of-two octave [2^k, 2^(k+1)) is
// split into 128 equal buckets, so a bucket is at most 1/128 of its lower bound wide (every value
// is kept within 0.8%). 7424 buckets cover the whole uint64 range; recording is a clz, two shifts
// and an increment, with no allocation. Percentiles are read off the buckets, never averaged;
// histograms from several threads are merged by adding the buckets.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace galay::tools {

class LatencyHistogram {
public:
    static constexpr unsigned kSubBits = 7;                          // 128 buckets per octave
    static constexpr unsigned kSub = 1u << kSubBits;                 // 128
    static constexpr unsigned kBuckets = (64 - kSubBits + 1) * kSub; // 7424

    static constexpr unsigned bucket_of(std::uint64_t v) {
        if (v < 2 * kSub) return static_cast<unsigned>(v);
        const unsigned msb = 63u - static_cast<unsigned>(std::countl_zero(v));
        const unsigned shift = msb - kSubBits;
        return shift * kSub + static_cast<unsigned>(v >> shift);
    }
    /// Smallest value that falls into bucket b, and the bucket's width.
    static constexpr std::uint64_t bucket_low(unsigned b) {
        if (b < 2 * kSub) return b;
        const unsigned shift = b / kSub - 1;
        const std::uint64_t mant = b - shift * kSub;
        return mant << shift;
    }
    static constexpr std::uint64_t bucket_width(unsigned b) {
        return b < 2 * kSub ? 1 : std::uint64_t{1} << (b / kSub - 1);
    }

    void record(std::uint64_t ns) noexcept { record_n(ns, 1); }
    /// Records the same value n times (a batch of completions observed at one instant).
    void record_n(std::uint64_t ns, std::uint64_t n) noexcept {
        counts_[bucket_of(ns)] += n;
        count_ += n;
        sum_ += ns * n;
        min_ = std::min(min_, ns);
        max_ = std::max(max_, ns);
    }
    void merge(const LatencyHistogram& o) noexcept {
        for (unsigned i = 0; i < kBuckets; ++i)
            counts_[i] += o.counts_[i];
        count_ += o.count_;
        sum_ += o.sum_;
        min_ = std::min(min_, o.min_);
        max_ = std::max(max_, o.max_);
    }
    void reset() noexcept { *this = LatencyHistogram{}; }

    std::uint64_t count() const noexcept { return count_; }
    double mean_ns() const noexcept {
        return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0;
    }
    std::uint64_t min_ns() const noexcept { return count_ ? min_ : 0; }
    std::uint64_t max_ns() const noexcept { return count_ ? max_ : 0; }

    /// The value at quantile q (0..1): the upper edge of the bucket holding that rank, capped at
    /// the largest value seen. 0 for an empty histogram.
    std::uint64_t percentile_ns(double q) const noexcept {
        if (count_ == 0) return 0;
        auto rank = static_cast<std::uint64_t>(q * double(count_));
        if (rank >= count_) rank = count_ - 1;
        std::uint64_t seen = 0;
        for (unsigned b = 0; b < kBuckets; ++b) {
            seen += counts_[b];
            if (seen > rank) return std::min(bucket_low(b) + bucket_width(b) - 1, max_);
        }
        return max_;
    }

    /// The value at or below which p percent of the samples lie, as fio reports it: the first
    /// bucket whose cumulative count reaches p% of all samples, read as that bucket's midpoint
    /// and clamped to [min, max]. 0 for an empty histogram.
    double fio_percentile(double p) const noexcept {
        if (count_ == 0) return 0.0;
        // Rank of the sample we want (1-based), as fio computes it.
        const double want = p / 100.0 * static_cast<double>(count_);
        auto rank = static_cast<std::uint64_t>(std::ceil(want));
        if (rank == 0) rank = 1;
        std::uint64_t seen = 0;
        for (unsigned b = 0; b < kBuckets; ++b) {
            seen += counts_[b];
            if (seen >= rank)
                return std::clamp(midpoint(b), static_cast<double>(min_),
                                  static_cast<double>(max_));
        }
        return static_cast<double>(max_);
    }

    /// Sample standard deviation, each sample read as its bucket's midpoint.
    double stddev_ns() const noexcept {
        if (count_ < 2) return 0.0;
        const double m = mean_ns();
        long double acc = 0;
        for (unsigned b = 0; b < kBuckets; ++b) {
            if (!counts_[b]) continue;
            const long double d = midpoint(b) - m;
            acc += d * d * counts_[b];
        }
        return std::sqrt(static_cast<double>(acc / (count_ - 1)));
    }

private:
    static double midpoint(unsigned b) noexcept {
        return static_cast<double>(bucket_low(b)) +
               (static_cast<double>(bucket_width(b)) - 1.0) / 2.0;
    }

    std::array<std::uint64_t, kBuckets> counts_{};
    std::uint64_t count_ = 0;
    std::uint64_t sum_ = 0; // ns; overflows only after ~584 years of summed latency
    std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t max_ = 0;
};

static_assert(LatencyHistogram::bucket_of(std::numeric_limits<std::uint64_t>::max()) <
              LatencyHistogram::kBuckets);
static_assert(LatencyHistogram::bucket_of(255) == 255 && LatencyHistogram::bucket_of(256) == 256);
static_assert(LatencyHistogram::bucket_low(LatencyHistogram::bucket_of(1000)) <= 1000);

} // namespace galay::tools
