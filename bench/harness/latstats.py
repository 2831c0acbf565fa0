"""The statistics of the latency study, computed the same way for every implementation.

bench_latency and each control group (bench/control/) write raw samples in one JSON schema
("galay-latency/1"):

    {"schema": "galay-latency/1", "implementation": "tokio-current_thread", ...,
     "benchmarks": [{"name": "connection_strategy/reuse", "message_bytes": 256,
                     "round_trips_per_iteration": 1, "new_connection": false,
                     "sample_iterations": [n, ...], "sample_ns": [t, ...],
                     "iteration_ns": [t1, t2, ...]}, ...]}

and this module turns them into figures, so that no stack is judged by different arithmetic:
per-iteration time of a sample = sample_ns / sample_iterations; over those, the mean with a 95%
bootstrap confidence interval (10,000 resamples), the median and Tukey's outliers (mild beyond
1.5 IQR from the quartiles, severe beyond 3 IQR); percentiles of single iterations from
iteration_ns. Quantiles interpolate between order statistics (type 7, as numpy's default and as
bench/measure/latency_stats.hpp, which is tested against the same hand-computed samples).

Ratios between implementations (spread, verdict) are bench/harness/harness.py's, as for every study.
Standard library only.
"""
import math
import random
import statistics

STUDY_BENCHMARKS = [
    "network_latency_100B",
    "network_latency_1000B",
    "connection_strategy/new_connection",
    "connection_strategy/reuse",
    "throughput_100_messages",
]

# The names the study's summary table used for the connection_strategy pair.
STUDY_LABELS = {
    "connection_strategy/new_connection": "new_connection_per_request",
    "connection_strategy/reuse": "reuse_persistent_connection",
}

PERCENTILES = (50, 90, 99, 99.9)


def quantile(values, q):
    """Quantile q (0..1) with linear interpolation between order statistics (type 7)."""
    if not values:
        return 0.0
    v = sorted(values)
    h = (len(v) - 1) * q
    lo = int(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def classify_outliers(values):
    """Tukey's fences: {'low_severe', 'low_mild', 'high_mild', 'high_severe'} counts."""
    q1, q3 = quantile(values, 0.25), quantile(values, 0.75)
    iqr = q3 - q1
    out = {"low_severe": 0, "low_mild": 0, "high_mild": 0, "high_severe": 0}
    for x in values:
        if x < q1 - 3 * iqr:
            out["low_severe"] += 1
        elif x < q1 - 1.5 * iqr:
            out["low_mild"] += 1
        elif x > q3 + 3 * iqr:
            out["high_severe"] += 1
        elif x > q3 + 1.5 * iqr:
            out["high_mild"] += 1
    return out


def bootstrap_mean_ci(values, resamples=10000, confidence=0.95, seed=1):
    """Percentile bootstrap interval of the mean (deterministic for a seed)."""
    if not values:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    return (quantile(means, tail), quantile(means, 1 - tail))


def per_iteration(bench):
    """Per-iteration time (ns) of each sample of one benchmark record."""
    return [t / n for t, n in zip(bench["sample_ns"], bench["sample_iterations"])]


def summarize(bench, resamples=10000):
    """Every figure of one benchmark record: the study's table row and the percentiles."""
    t = per_iteration(bench)
    mean = statistics.fmean(t) if t else 0.0
    lo, hi = bootstrap_mean_ci(t, resamples)
    out = classify_outliers(t)
    each = sorted(bench.get("iteration_ns") or [])
    return {
        "name": bench["name"],
        "samples": len(t),
        "mean_ns": mean,
        "ci_ns": [lo, hi],
        "spread_pct": 100 * max(mean - lo, hi - mean) / mean if mean > 0 else 0.0,
        "median_ns": quantile(t, 0.5),
        "outliers": out,
        "outliers_total": sum(out.values()),
        "outliers_mild": out["low_mild"] + out["high_mild"],
        "outliers_severe": out["low_severe"] + out["high_severe"],
        "iteration_percentiles_ns": {str(p): quantile(each, p / 100) for p in PERCENTILES},
        "p95_ns": quantile(each, 0.95),
        "p99_ns": quantile(each, 0.99),
        "round_trips_per_iteration": bench.get("round_trips_per_iteration", 1),
        "message_bytes": bench.get("message_bytes"),
    }


def merge_runs(runs):
    """One benchmark record per name out of several runs of one implementation (samples pooled)."""
    merged = {}
    for run in runs:
        for b in run["benchmarks"]:
            m = merged.setdefault(b["name"], {**b, "sample_ns": [], "sample_iterations": [],
                                              "iteration_ns": []})
            m["sample_ns"] += b["sample_ns"]
            m["sample_iterations"] += b["sample_iterations"]
            m["iteration_ns"] += b.get("iteration_ns") or []
    return merged


def format_time(ns):
    """'1.1409 ms': five significant digits in the largest unit below the value (as criterion)."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            v = ns / scale
            break
    else:
        unit, v = "ns", ns
    decimals = max(0, 4 - math.floor(math.log10(v))) if v > 0 else 0
    return f"{v:.{decimals}f} {unit}"
