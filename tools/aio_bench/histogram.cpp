#include "histogram.hpp"

#include <algorithm>
#include <cmath>

namespace aiob {

void LatencyHistogram::merge(const LatencyHistogram& o) {
    for (unsigned i = 0; i < kBuckets; ++i)
        counts_[i] += o.counts_[i];
    count_ += o.count_;
    sum_ += o.sum_;
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
}

double LatencyHistogram::percentile(double p) const {
    if (count_ == 0) return 0.0;
    // Rank of the sample we want (1-based), as fio computes it.
    double want = p / 100.0 * static_cast<double>(count_);
    uint64_t rank = static_cast<uint64_t>(std::ceil(want));
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < kBuckets; ++b) {
        seen += counts_[b];
        if (seen >= rank) {
            double mid = static_cast<double>(bucket_low(b)) +
                         (static_cast<double>(bucket_width(b)) - 1.0) / 2.0;
            return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
        }
    }
    return static_cast<double>(max_);
}

double LatencyHistogram::stddev() const {
    if (count_ < 2) return 0.0;
    double m = mean();
    long double acc = 0;
    for (unsigned b = 0; b < kBuckets; ++b) {
        if (!counts_[b]) continue;
        double mid =
            static_cast<double>(bucket_low(b)) + (static_cast<double>(bucket_width(b)) - 1.0) / 2.0;
        long double d = mid - m;
        acc += d * d * counts_[b];
    }
    return std::sqrt(static_cast<double>(acc / (count_ - 1)));
}

} // namespace aiob
