"""bench/harness/latstats.py against samples small enough to compute by hand (the same ones as
tests/tools/latency_stats_test.cpp for the C++ statistics bench_latency prints). Run by ctest."""
import os
import sys
import unittest

# bench/harness (the shared modules) and bench/studies, as every study puts them on the path.
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import latstats  # noqa: E402


class Quantiles(unittest.TestCase):
    def test_linear_interpolation_between_order_statistics(self):
        v = [1, 2, 3, 4]
        self.assertEqual(latstats.quantile(v, 0.0), 1)
        self.assertEqual(latstats.quantile(v, 0.5), 2.5)
        self.assertAlmostEqual(latstats.quantile(v, 0.99), 3.97)  # h = 3 x 0.99 = 2.97
        self.assertEqual(latstats.quantile(v, 1.0), 4)
        self.assertEqual(latstats.quantile([4, 1, 3, 2], 0.25), 1.75)
        self.assertEqual(latstats.quantile([], 0.5), 0.0)


class Outliers(unittest.TestCase):
    def test_severe_high(self):
        # q1 = 3.25, q3 = 7.75, IQR = 4.5: severe above 21.25.
        o = latstats.classify_outliers([1, 2, 3, 4, 5, 6, 7, 8, 9, 100])
        self.assertEqual(o, {"low_severe": 0, "low_mild": 0, "high_mild": 0, "high_severe": 1})

    def test_mild_high(self):
        # q1 = 12.25, q3 = 16.75: mild above 23.5, severe above 30.25.
        o = latstats.classify_outliers([10, 11, 12, 13, 14, 15, 16, 17, 18, 25])
        self.assertEqual(o["high_mild"], 1)
        self.assertEqual(sum(o.values()), 1)

    def test_severe_low(self):
        o = latstats.classify_outliers([-20, 10, 11, 12, 13, 14, 15, 16, 17, 18])
        self.assertEqual(o["low_severe"], 1)
        self.assertEqual(sum(o.values()), 1)

    def test_none_in_an_even_spread(self):
        self.assertEqual(sum(latstats.classify_outliers([1, 2, 3, 4, 5, 6, 7, 8]).values()), 0)


class Bootstrap(unittest.TestCase):
    def test_constant_sample(self):
        self.assertEqual(latstats.bootstrap_mean_ci([5, 5, 5]), (5, 5))

    def test_two_values(self):
        # Resample means of {0, 10}: 0 (1/4), 5 (1/2), 10 (1/4).
        self.assertEqual(latstats.bootstrap_mean_ci([0, 10]), (0, 10))

    def test_symmetric_sample(self):
        lo, hi = latstats.bootstrap_mean_ci([1, 2, 3, 4, 5, 6, 7, 8, 9])
        self.assertTrue(1 <= lo < 5 < hi <= 9)


class Summary(unittest.TestCase):
    def bench(self):
        # Samples of 2 iterations each: per-iteration times 1..9 and 100 (ns).
        t = [1, 2, 3, 4, 5, 6, 7, 8, 9, 100]
        return {"name": "x", "sample_iterations": [2] * 10, "sample_ns": [2 * x for x in t],
                "iteration_ns": list(range(1, 101))}

    def test_table_row(self):
        s = latstats.summarize(self.bench(), resamples=2000)
        self.assertEqual(s["samples"], 10)
        self.assertEqual(s["mean_ns"], 14.5)
        self.assertEqual(s["median_ns"], 5.5)
        self.assertEqual(s["outliers_severe"], 1)
        self.assertEqual(s["outliers_mild"], 0)
        # Single iterations 1..100: p99 = 99.01, p50 = 50.5.
        self.assertAlmostEqual(s["p99_ns"], 99.01)
        self.assertAlmostEqual(s["iteration_percentiles_ns"]["50"], 50.5)
        lo, hi = s["ci_ns"]
        self.assertTrue(lo < 14.5 < hi)
        self.assertAlmostEqual(s["spread_pct"], 100 * max(14.5 - lo, hi - 14.5) / 14.5)

    def test_merge_pools_samples(self):
        m = latstats.merge_runs([{"benchmarks": [self.bench()]}, {"benchmarks": [self.bench()]}])
        self.assertEqual(len(m["x"]["sample_ns"]), 20)
        self.assertEqual(len(m["x"]["iteration_ns"]), 200)


class Formats(unittest.TestCase):
    def test_format_time_like_the_study(self):
        self.assertEqual(latstats.format_time(1140900), "1.1409 ms")
        self.assertEqual(latstats.format_time(222960), "222.96 µs")
        self.assertEqual(latstats.format_time(2305.1), "2.3051 µs")


if __name__ == "__main__":
    unittest.main()
