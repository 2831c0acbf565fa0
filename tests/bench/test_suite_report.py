#!/usr/bin/env python3
"""bench/suite.py's report without measuring: the plot data its sections build (TCP echo QPS and
CPU per request, HTTP requests per server core, the latency percentiles) follows
bench/harness/plot_pages.py's schema, with each point the median and min-max of the rounds, and
every section of report.md names its page in docs/benchmarks/. Run by ctest."""
import argparse
import json
import os
import sys
import tempfile

# bench/harness (the shared modules) and bench/studies, as every study puts them on the path.
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies"), BENCH]  # and suite.py
import latency  # noqa: E402
import plot_pages  # noqa: E402
import suite  # noqa: E402


def run(ok, qps, cpu):
    return {"ok": ok, "qps": qps, "cpu_us_per_req": cpu}


# TCP: two connection counts on one backend; a failed run is not a point of the spread.
rows = [{"backend": "io_uring", "connections": c, "baseline": "raw_uring",
         "runs": {"A": [run(True, 100 * k, 6.0 + k) for k in (1, 2, 3)] + [run(False, 1, 99)],
                  "B": [run(True, 90 * k, 5.0 + k) for k in (1, 2, 3)]}}
        for c in (1000, 100)]
qps, cpu = suite.tcp_plots(rows)
for p in (qps, cpu):
    plot_pages.check(p)
assert qps["x"] == [100, 1000] and qps["log_x"] is True, qps
galay = qps["series"][0]
assert galay["label"] == "galay io_uring (bench_server)", galay
assert (galay["median"], galay["min"], galay["max"]) == ([200] * 2, [100] * 2, [300] * 2), galay
assert cpu["series"][1]["label"] == "raw_uring" and cpu["series"][1]["median"] == [7.0, 7.0], cpu
assert suite.tcp_plots([]) == []

# HTTP: rounds of {server: record}; a server missing from a round leaves no value there.
def rec(rpc, ok=True):
    return {"ok": ok, "rps_per_core": rpc}


result = {"scenarios": [
    {"scenario": "fixed", "connections": 100, "mode": "turns", "servers": ["galay-epoll", "nginx"],
     "runs": [{"galay-epoll": rec(10.0), "nginx": rec(8.0)},
              {"galay-epoll": rec(12.0), "nginx": rec(9.0, ok=False)},
              {"galay-epoll": rec(11.0)}]},
    {"scenario": "file", "connections": 100, "mode": "turns", "servers": ["galay-epoll"],
     "runs": [{"galay-epoll": rec(1.0)}]},
    {"scenario": "fixed", "connections": 100, "mode": "sequential", "servers": ["go"],
     "runs": [{"go": rec(5.0)}, {"go": rec(7.0)}]}]}
turns, wrk = suite.http_plots(result)
for p in (turns, wrk):
    plot_pages.check(p)
assert turns["name"] == "http_rps_per_core_turns" and turns["x"] == ["100 connections"], turns
g, n = turns["series"]
assert (g["median"], g["min"], g["max"]) == ([11.0], [10.0], [12.0]), g
assert (n["median"], n["min"], n["max"]) == ([8.0], [8.0], [8.0]), n
assert wrk["series"][0]["median"] == [6.0], wrk
assert suite.http_plots({"scenarios": []}) == []

# Latency: each round's percentile, then the median and min-max over the rounds.
def lat_run(scale):
    return {"benchmarks": [{"name": "connection_strategy/reuse",
                            "iteration_ns": [scale * 1000.0 * (i + 1) for i in range(1001)]}]}


lp = latency.percentile_plot({"galay-io_uring": [lat_run(1), lat_run(3), lat_run(2)],
                              "tokio": []})
plot_pages.check(lp)
assert lp["x"] == ["p50", "p90", "p99", "p99.9"] and lp["log_y"] is True, lp
s = lp["series"]
assert len(s) == 1 and s[0]["label"] == "galay-io_uring", s
assert (s[0]["min"][0], s[0]["median"][0], s[0]["max"][0]) == (501.0, 1002.0, 1503.0), s
assert latency.percentile_plot({"tokio": []}) is None

# The report: each section's plots as pictures and its page; the plot data in --out/data.
with tempfile.TemporaryDirectory() as out:
    args = argparse.Namespace(out=out, full=False, pairs=3, warmup=0.3, duration=1.0)
    ctx = suite.Context(args, ["io_uring"], "test machine")
    sections = {}
    for name, plots in (("tcp", [qps, cpu]), ("aio", [])):
        sec = {"lines": [f"## {name}"], "data": {}, "plots": plots}
        sec["images"] = suite.render_plots(ctx, name, sec)
        sections[name] = sec
    text = suite.write_report(args, {"date": "d", "machine": "m", "unavailable": {},
                                     "sections": sections})
    assert "figures and method: docs/benchmarks/echo.md" in text, text
    assert "figures and method: docs/benchmarks/files.md" in text, text
    with open(os.path.join(out, "data", "tcp.json")) as f:
        data = json.load(f)
    assert data["study"] == "echo" and [p["name"] for p in data["plots"]] == \
        ["tcp_qps", "tcp_cpu_per_request"], data
    assert not os.path.exists(os.path.join(out, "data", "aio.json"))
    if plot_pages.have_matplotlib():
        assert "![TCP echo, 256 B: server CPU per request](tcp_cpu_per_request.png)" in text, text
        assert os.path.getsize(os.path.join(out, "tcp_cpu_per_request.png")) > 1000
    else:
        print("SKIP (pictures only): matplotlib is not installed for this python; "
              "the plot data and the report lines were checked")
print("suite report: ok")
