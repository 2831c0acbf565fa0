// The statistics bench_latency prints (bench/measure/latency_stats.hpp), against samples
// small enough to compute by hand. bench/harness/latstats.py is tested against the same samples
// (tests/bench/test_latstats.py), so both give the same figures.
#include "measure/latency_stats.hpp"

#include <gtest/gtest.h>

using namespace galay::tools;

TEST(LatencyStats, QuantilesInterpolateBetweenOrderStatistics) {
    const std::vector<double> v{1, 2, 3, 4};
    EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1);
    EXPECT_DOUBLE_EQ(quantile(v, 0.5), 2.5);
    EXPECT_DOUBLE_EQ(quantile(v, 0.99), 3.97); // h = 3 x 0.99 = 2.97
    EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4);
    EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.25), 1.75); // unsorted input is sorted first
}

TEST(LatencyStats, ASevereHighOutlier) {
    // q1 = 3.25, q3 = 7.75, IQR = 4.5: severe above 7.75 + 13.5 = 21.25.
    const std::vector<double> v{1, 2, 3, 4, 5, 6, 7, 8, 9, 100};
    Outliers o = classify_outliers(v);
    EXPECT_EQ(o.high_severe, 1);
    EXPECT_EQ(o.total(), 1);
    Summary s = summarize(v);
    EXPECT_DOUBLE_EQ(s.mean, 14.5);
    EXPECT_DOUBLE_EQ(s.median, 5.5);
    EXPECT_EQ(s.samples, 10);
}

TEST(LatencyStats, AMildHighOutlier) {
    // q1 = 12.25, q3 = 16.75, IQR = 4.5: mild above 23.5, severe above 30.25.
    Outliers o = classify_outliers({10, 11, 12, 13, 14, 15, 16, 17, 18, 25});
    EXPECT_EQ(o.high_mild, 1);
    EXPECT_EQ(o.total(), 1);
}

TEST(LatencyStats, ASevereLowOutlier) {
    // q1 = 11.25, q3 = 15.75, IQR = 4.5: severe below 11.25 - 13.5 = -2.25.
    Outliers o = classify_outliers({-20, 10, 11, 12, 13, 14, 15, 16, 17, 18});
    EXPECT_EQ(o.low_severe, 1);
    EXPECT_EQ(o.total(), 1);
}

TEST(LatencyStats, NoOutliersInAnEvenSpread) {
    EXPECT_EQ(classify_outliers({1, 2, 3, 4, 5, 6, 7, 8}).total(), 0);
}

TEST(LatencyStats, BootstrapIntervalOfTheMean) {
    const std::vector<double> same{5, 5, 5};
    Interval c = bootstrap_mean_ci(same);
    EXPECT_DOUBLE_EQ(c.low, 5);
    EXPECT_DOUBLE_EQ(c.high, 5);
    EXPECT_DOUBLE_EQ(summarize(same).spread_pct, 0);
    // Means of resamples of {0, 10}: 0 (1/4), 5 (1/2), 10 (1/4): the 2.5th and 97.5th
    // percentiles are 0 and 10.
    const std::vector<double> two{0, 10};
    c = bootstrap_mean_ci(two);
    EXPECT_DOUBLE_EQ(c.low, 0);
    EXPECT_DOUBLE_EQ(c.high, 10);
    // Any interval lies between the extremes and contains the mean of a symmetric sample.
    const std::vector<double> v{1, 2, 3, 4, 5, 6, 7, 8, 9};
    c = bootstrap_mean_ci(v);
    EXPECT_GE(c.low, 1);
    EXPECT_LE(c.high, 9);
    EXPECT_LT(c.low, 5);
    EXPECT_GT(c.high, 5);
}
