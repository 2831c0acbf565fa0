#!/usr/bin/env python3
"""bench/studies/latency.py --spin without measuring: the spin implementations it adds (both ends
get --idle-spin), their ratios to the same backend without the spin, and the round trip's targets
judged for them, from sample runs; and the hand-written servers (raw_uring, raw_epoll) with galay's
client, their server-against-server ratios and the new-connection targets. Run by ctest."""
import os
import sys
import tempfile

# bench/harness (the shared modules) and bench/studies, as every study puts them on the path.
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import latency  # noqa: E402
import latstats  # noqa: E402

# Which implementations --spin adds, and with what flags.
with tempfile.TemporaryDirectory() as d:
    bl = os.path.join(d, "bench_latency")
    with open(bl, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(bl, 0o755)
    impls, _ = latency.implementations(d, d, build=False, only={
        "galay-io_uring", "galay-io_uring-spin", "galay-epoll", "galay-epoll-spin"}, spin_us=25)
    names = [i[0] for i in impls]
    assert names == ["galay-io_uring", "galay-io_uring-spin", "galay-epoll", "galay-epoll-spin"], names
    for name, server, client, _ in impls:
        spin = name.endswith("-spin")
        for argv in (server, client):
            assert (argv[-2:] == ["--idle-spin", "25"]) == spin, (name, argv)
    impls, _ = latency.implementations(d, d, build=False, only=None, spin_us=0)
    assert not any(i[0].endswith("-spin") for i in impls), impls
    # The hand-written servers, once built: galay's client on the same backend; with --spin both
    # spin, the server with its own --idle-spin.
    assert "raw_uring" not in [i[0] for i in impls], impls
    for raw in ("raw_uring", "raw_epoll"):
        with open(os.path.join(d, raw), "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(os.path.join(d, raw), 0o755)
    impls, _ = latency.implementations(d, d, build=False, only={"raw_uring", "raw_uring-spin",
                                                                 "raw_epoll"}, spin_us=25)
    got = {i[0]: i for i in impls}
    assert sorted(got) == ["raw_epoll", "raw_uring", "raw_uring-spin"], got
    assert got["raw_uring"][1] == [os.path.join(d, "raw_uring"), "{port}"], got
    assert got["raw_uring"][2][-2:] == ["--backend", "io_uring"], got
    assert got["raw_epoll"][2][-2:] == ["--backend", "epoll"], got
    assert got["raw_uring-spin"][1] == got["raw_uring"][1] + ["--idle-spin", "25"], got
    assert got["raw_uring-spin"][2][-2:] == ["--idle-spin", "25"], got


def run(rnd, ns_per_iteration):
    """One round's record: every study benchmark at `ns_per_iteration[name]` (default 1000)."""
    return {"round": rnd, "benchmarks": [
        {"name": b, "sample_ns": [ns_per_iteration.get(b, 1000.0) * 10] * 3,
         "sample_iterations": [10] * 3, "iteration_ns": [ns_per_iteration.get(b, 1000.0)] * 30}
        for b in latstats.STUDY_BENCHMARKS]}


def rounds(*per_round):
    return [run(r + 1, x) for r, x in enumerate(per_round)]


nl, tp = "network_latency_100B", "throughput_100_messages"
runs = {
    "galay-io_uring": rounds({nl: 1000, tp: 1000}, {nl: 1000, tp: 1000}, {nl: 1000, tp: 1000}),
    "galay-io_uring-spin": rounds({nl: 400, tp: 200}, {nl: 500, tp: 200}, {nl: 600, tp: 200}),
    "galay-epoll": rounds({nl: 1000}, {nl: 1000}, {nl: 1000}),
    "galay-epoll-spin": rounds({nl: 500, tp: 200}, {nl: 500, tp: 200}, {nl: 500, tp: 200}),
    "blocking": rounds({}, {}, {}),
}
a = latency.analyze(runs, resamples=200)
s = a["spin"]["galay-io_uring-spin"][nl]
assert (s["min"], s["median"], s["max"]) == (0.4, 0.5, 0.6), s
assert a["spin"]["galay-epoll-spin"][tp]["median"] == 0.2, a["spin"]
targets = {(t["benchmark"], t["reference"]): t for t in a["spin_targets"]}
assert targets[(nl, "blocking")]["verdict"] == "met", targets
t = targets[(nl, "galay-epoll-spin")]  # 0.8, 1.0, 1.2 against <= 1.00
assert t["verdict"] == "met by the median" and t["ratio"]["max"] == 1.2, t
assert targets[(tp, "galay-epoll-spin")]["verdict"] == "met", targets
lines = "\n".join(latency.report_lines(a, runs, [], []))
assert "with the idle spin / the same backend's without it" in lines, lines
assert "Round-trip targets, galay-io_uring-spin's time" in lines, lines
# Without spin runs: no spin section.
plain = {k: v for k, v in runs.items() if not k.endswith("-spin")}
b = latency.analyze(plain, resamples=200)
assert b["spin"] == {} and b["spin_targets"] == [], b
assert "idle spin" not in "\n".join(latency.report_lines(b, plain, [], []))

# Server against server: galay io_uring / galay epoll and / raw_uring, and the new-connection
# targets judged on them.
nc = "connection_strategy/new_connection"
conn = {
    "galay-io_uring": rounds({nc: 900}, {nc: 1000}, {nc: 1100}),
    "galay-epoll": rounds({nc: 1000}, {nc: 1000}, {nc: 1000}),
    "raw_uring": rounds({nc: 1250}, {nc: 1250}, {nc: 1250}),
}
c = latency.analyze(conn, resamples=200)
s = c["servers"]["galay-io_uring / galay-epoll"][nc]
assert (s["min"], s["median"], s["max"]) == (0.9, 1.0, 1.1), s
assert c["servers"]["galay-io_uring / raw_uring"][nc]["max"] == 0.88, c["servers"]
assert "galay-epoll / raw_epoll" not in c["servers"], c["servers"]
ct = {(t["name"], t["reference"]): t["verdict"] for t in c["connection_targets"]}
assert ct == {("galay-io_uring", "galay-epoll"): "met by the median",
              ("galay-io_uring", "raw_uring"): "met"}, ct
lines = "\n".join(latency.report_lines(c, conn, [], []))
assert "New-connection targets" in lines and "one server / another" in lines, lines
print("latency --spin: ok")
