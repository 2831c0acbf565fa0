// Latency histogram: log-linear buckets over nanoseconds.
//
// Values below 256 ns have one bucket each. Above, every power-of-two octave [2^k, 2^(k+1)) is
// split into 128 equal buckets, so a bucket is at most 1/128 of its lower bound wide and the
// reported value (the bucket midpoint) is within 0.4% of any sample in it. 7424 buckets cover the
// whole uint64 range; recording is a clz, two shifts and an increment. Histograms from several
// threads are merged by adding the buckets.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <limits>

namespace aiob {

class LatencyHistogram {
public:
    static constexpr unsigned kSubBits = 7;                          // 128 buckets per octave
    static constexpr unsigned kSub = 1u << kSubBits;                 // 128
    static constexpr unsigned kBuckets = (64 - kSubBits + 1) * kSub; // 7424

    static constexpr unsigned bucket_of(uint64_t v) {
        if (v < 2 * kSub) return static_cast<unsigned>(v);
        unsigned msb = 63u - static_cast<unsigned>(std::countl_zero(v));
        unsigned shift = msb - kSubBits;
        return shift * kSub + static_cast<unsigned>(v >> shift);
    }
    // Smallest value that falls into bucket b, and the bucket's width.
    static constexpr uint64_t bucket_low(unsigned b) {
        if (b < 2 * kSub) return b;
        unsigned shift = b / kSub - 1;
        uint64_t mant = b - shift * kSub;
        return mant << shift;
    }
    static constexpr uint64_t bucket_width(unsigned b) {
        return b < 2 * kSub ? 1 : uint64_t{1} << (b / kSub - 1);
    }

    void record(uint64_t ns) {
        ++counts_[bucket_of(ns)];
        ++count_;
        sum_ += ns;
        if (ns < min_) min_ = ns;
        if (ns > max_) max_ = ns;
    }
    // Records the same value n times (a batch of completions observed at one instant).
    void record_n(uint64_t ns, uint64_t n) {
        counts_[bucket_of(ns)] += n;
        count_ += n;
        sum_ += ns * n;
        if (ns < min_) min_ = ns;
        if (ns > max_) max_ = ns;
    }

    void merge(const LatencyHistogram& o);
    void reset() { *this = LatencyHistogram{}; }

    uint64_t count() const { return count_; }
    double mean() const {
        return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0;
    }
    uint64_t min() const { return count_ ? min_ : 0; }
    uint64_t max() const { return max_; }
    // The value at or below which p percent of the samples lie (fio's convention: the first bucket
    // whose cumulative count reaches p% of all samples), reported as that bucket's midpoint and
    // clamped to [min, max]. 0 for an empty histogram.
    double percentile(double p) const;
    double stddev() const;

private:
    std::array<uint64_t, kBuckets> counts_{};
    uint64_t count_ = 0;
    uint64_t sum_ = 0; // ns; overflows only after ~584 years of summed latency
    uint64_t min_ = std::numeric_limits<uint64_t>::max();
    uint64_t max_ = 0;
};

static_assert(LatencyHistogram::bucket_of(std::numeric_limits<uint64_t>::max()) <
              LatencyHistogram::kBuckets);
static_assert(LatencyHistogram::bucket_of(255) == 255 && LatencyHistogram::bucket_of(256) == 256);
static_assert(LatencyHistogram::bucket_low(LatencyHistogram::bucket_of(1000)) <= 1000);

} // namespace aiob
