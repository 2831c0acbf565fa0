// Criterion-style statistics of latency samples, as bench_latency prints them (the figures the
// io_uring latency study printed: `1.1409 ms ±0.58%`, outliers per benchmark). The same arithmetic
// is in bench/harness/latstats.py, which bench/studies/latency.py uses for every implementation
// alike; both are tested against the same hand-computed samples.
//
// A sample times `iterations` back-to-back iterations; its per-iteration time is the sample's
// time divided by its iterations. Over those per-iteration times: mean with a 95% bootstrap
// confidence interval (10,000 resamples), median, and outliers by Tukey's fences (mild beyond
// 1.5 IQR from the quartiles, severe beyond 3 IQR). Quantiles interpolate linearly between
// order statistics (R's type 7, numpy's default).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace galay::tools {

/// Quantile q (0..1) of `sorted` (ascending), linear interpolation (type 7). 0 when empty.
inline double quantile_sorted(std::span<const double> sorted, double q) {
    if (sorted.empty()) return 0;
    const double h = (static_cast<double>(sorted.size()) - 1) * q;
    const auto lo = static_cast<std::size_t>(h);
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

inline double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return quantile_sorted(v, q);
}

inline double mean_of(std::span<const double> v) {
    if (v.empty()) return 0;
    double s = 0;
    for (double x : v)
        s += x;
    return s / static_cast<double>(v.size());
}

struct Outliers {
    int low_severe = 0, low_mild = 0, high_mild = 0, high_severe = 0;
    int total() const { return low_severe + low_mild + high_mild + high_severe; }
    int mild() const { return low_mild + high_mild; }
    int severe() const { return low_severe + high_severe; }
};

/// Tukey's fences around the quartiles: mild beyond 1.5 IQR, severe beyond 3 IQR.
inline Outliers classify_outliers(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const double q1 = quantile_sorted(v, 0.25), q3 = quantile_sorted(v, 0.75);
    const double iqr = q3 - q1;
    Outliers o;
    for (double x : v) {
        if (x < q1 - 3 * iqr)
            ++o.low_severe;
        else if (x < q1 - 1.5 * iqr)
            ++o.low_mild;
        else if (x > q3 + 3 * iqr)
            ++o.high_severe;
        else if (x > q3 + 1.5 * iqr)
            ++o.high_mild;
    }
    return o;
}

struct Interval {
    double low = 0, high = 0;
};

/// 95% (by default) bootstrap confidence interval of the mean: the 2.5th and 97.5th percentiles
/// of the means of `resamples` resamples drawn with replacement. Deterministic for a seed.
inline Interval bootstrap_mean_ci(std::span<const double> v, int resamples = 10000,
                                  double confidence = 0.95, std::uint64_t seed = 1) {
    if (v.empty()) return {};
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> pick(0, v.size() - 1);
    std::vector<double> means(static_cast<std::size_t>(resamples));
    for (double& m : means) {
        double s = 0;
        for (std::size_t i = 0; i < v.size(); ++i)
            s += v[pick(rng)];
        m = s / static_cast<double>(v.size());
    }
    std::sort(means.begin(), means.end());
    const double tail = (1 - confidence) / 2;
    return {quantile_sorted(means, tail), quantile_sorted(means, 1 - tail)};
}

struct Summary {
    double mean = 0, median = 0;
    Interval ci;
    double spread_pct = 0; ///< the CI's larger half-width, in percent of the mean (the "±")
    Outliers outliers;
    int samples = 0;
};

/// Statistics of per-iteration times (one per sample).
inline Summary summarize(std::span<const double> per_iteration) {
    Summary s;
    s.samples = static_cast<int>(per_iteration.size());
    if (per_iteration.empty()) return s;
    std::vector<double> v(per_iteration.begin(), per_iteration.end());
    s.mean = mean_of(v);
    s.median = quantile(v, 0.5);
    s.ci = bootstrap_mean_ci(v);
    s.spread_pct = s.mean > 0 ? 100 * std::max(s.mean - s.ci.low, s.ci.high - s.mean) / s.mean : 0;
    s.outliers = classify_outliers(v);
    return s;
}

} // namespace galay::tools
