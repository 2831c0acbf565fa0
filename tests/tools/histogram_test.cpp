// The latency histogram every program of the suite reports with (bench/measure/histogram.hpp):
// bench_client and the raw_client it is compared against, http_turns, tls_load, bench_sync,
// raw_sync ... The percentiles they print (percentile_ns), the mean, the spread, and merging,
// against samples small enough to compute by hand.
#include "measure/histogram.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

using galay::tools::LatencyHistogram;

// Below 256 ns every value has a bucket of its own: the percentile is the sample at rank
// floor(q * n) of the sorted samples (0-based), exactly.
TEST(LatencyHistogram, SmallValuesGiveTheSampleAtTheRank) {
    LatencyHistogram h;
    for (std::uint64_t v = 100; v >= 1; --v) // order does not matter
        h.record(v);
    EXPECT_EQ(h.count(), 100u);
    EXPECT_EQ(h.percentile_ns(0.0), 1u);
    EXPECT_EQ(h.percentile_ns(0.50), 51u); // rank 50 of 0..99
    EXPECT_EQ(h.percentile_ns(0.90), 91u);
    EXPECT_EQ(h.percentile_ns(0.99), 100u);
    EXPECT_EQ(h.percentile_ns(0.999), 100u); // rank 99.9 -> 99, the last
    EXPECT_EQ(h.percentile_ns(1.0), 100u);   // never past the last sample
    EXPECT_EQ(h.min_ns(), 1u);
    EXPECT_EQ(h.max_ns(), 100u);
    EXPECT_DOUBLE_EQ(h.mean_ns(), 50.5);
}

// Above 256 ns a percentile is the upper edge of its sample's bucket: never below the sample,
// at most 1/128 above it, and never above the largest sample.
TEST(LatencyHistogram, LargeValuesAreKeptWithin1In128) {
    LatencyHistogram h;
    h.record(1'000'000);
    h.record(3'000'000);
    const std::uint64_t p0 = h.percentile_ns(0.0);
    EXPECT_GE(p0, 1'000'000u);
    EXPECT_LE(p0, 1'000'000u + 1'000'000u / 128);
    EXPECT_EQ(h.percentile_ns(0.99), 3'000'000u); // the bucket's edge, capped at the max
    EXPECT_DOUBLE_EQ(h.mean_ns(), 2'000'000.0);   // the mean is exact, not read off the buckets
}

// The spread http_turns and tls_load print: the sample standard deviation (n - 1), each sample
// read as its bucket's midpoint (the value itself below 256 ns).
TEST(LatencyHistogram, StandardDeviationOfTheSamples) {
    LatencyHistogram h;
    EXPECT_EQ(h.stddev_ns(), 0.0);
    h.record(100);
    EXPECT_EQ(h.stddev_ns(), 0.0); // one sample: no spread
    h.record(200);
    EXPECT_DOUBLE_EQ(h.stddev_ns(), std::sqrt(5000.0)); // (50^2 + 50^2) / 1
}

// Per-thread histograms merged give what one histogram of every sample gives; an empty one
// reads 0 everywhere, and reset forgets every sample (http_turns per turn, tls_load after warm-up).
TEST(LatencyHistogram, MergeResetAndEmpty) {
    LatencyHistogram a, b, all;
    for (std::uint64_t v = 1; v <= 5000; ++v) {
        const std::uint64_t ns = v * 997;
        (v % 3 ? a : b).record(ns);
        all.record(ns);
    }
    a.merge(b);
    EXPECT_EQ(a.count(), all.count());
    EXPECT_EQ(a.min_ns(), all.min_ns());
    EXPECT_EQ(a.max_ns(), all.max_ns());
    EXPECT_DOUBLE_EQ(a.mean_ns(), all.mean_ns());
    for (double q : {0.5, 0.9, 0.99, 0.999})
        EXPECT_EQ(a.percentile_ns(q), all.percentile_ns(q)) << q;

    a.reset();
    const LatencyHistogram empty;
    for (const LatencyHistogram* h : {static_cast<const LatencyHistogram*>(&a), &empty}) {
        EXPECT_EQ(h->count(), 0u);
        EXPECT_EQ(h->percentile_ns(0.99), 0u);
        EXPECT_EQ(h->min_ns(), 0u);
        EXPECT_EQ(h->max_ns(), 0u);
        EXPECT_EQ(h->mean_ns(), 0.0);
    }
    a.record(7);
    EXPECT_EQ(a.percentile_ns(0.5), 7u); // nothing of before the reset is left
    EXPECT_EQ(a.min_ns(), 7u);
}
