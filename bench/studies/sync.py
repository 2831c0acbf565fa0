#!/usr/bin/env python3
"""bench/studies/sync.py: galay's cross-thread Channel, Broadcast, spawn_blocking and Interval
against their baselines and Tokio, in alternating runs.

    python3 bench/studies/sync.py [--bin build/release/bin] [--pairs 3] [--rounds 100000]
                          [--messages 2000000] [--capacity 1024] [--blocking-rounds 20000]
                          [--blocking-cpu N] [--cpus 0,1] [--backend auto] [--json results.json]
                          [--cases pingpong,throughput,blocking] (or broadcast,interval)
                          [--broadcast-receivers 1,4,16] [--broadcast-messages 1000000]
                          [--interval-ticks 2000] [--interval-period-us 1000]

Each round runs the three programs one after another, in alternating order (ABC, CBA, ...):
  galay       bench_sync --json --no-baselines   (Channel<u64> between two pinned workers;
                                                  spawn_blocking round trip from a pinned worker)
  baselines   raw_sync --json                    (eventfd ping-pong; moodycamel BlockingConcurrentQueue;
                                                  condvar: a plain thread's hand-off to a pool thread)
  timerfd     raw_timerfd --json                 (a periodic timerfd read in a loop: Interval's floor)
  tokio       tokio_sync --json                  (tokio::sync::mpsc, broadcast and task::spawn_blocking:
                                                  2-worker multi-thread runtime, and pinned
                                                  current-thread runtimes)
Tokio is built here with cargo (bench/control/tokio_sync, Cargo.lock committed); when cargo is
missing one line says so and the rest runs.

Every figure is a ratio within one round (ours / theirs), quoted as median [min-max] over the
rounds, with a verdict: "faster"/"slower" only when the whole spread is on one side of 1.00,
otherwise "level". Targets: ping-pong p50 <= 1.10x eventfd and <= Tokio's; throughput
>= Tokio's with 1 and 4 producers; broadcast >= Tokio's with 1, 4 and 16 receivers, 0 lost; 0 heap
allocations per message.
"""
import argparse
import json
import os
import statistics
import sys

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (spreads and verdicts)

ROOT = os.path.dirname(BENCH)
TOKIO_DIR = os.path.join(BENCH, "control", "tokio_sync")


def build_tokio():
    """Build the Tokio control program; returns its path, or None with the reason printed."""
    path, why = harness.cargo_build(TOKIO_DIR, "tokio_sync")
    if path is None:
        print(f"tokio: {why}: the Tokio control group is skipped")
    return path


def run_json(cmd):
    r = children.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"sync.py: {' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr.strip()}")
    return json.loads(r.stdout)


def get(d, *path):
    for p in path:
        if d is None:
            return None
        if isinstance(p, int):
            d = d[p] if isinstance(d, list) and p < len(d) else None
        else:
            d = d.get(p) if isinstance(d, dict) else None
    return d


def throughput_of(impl, producers):
    for row in (impl or {}).get("throughput", []):
        if row.get("producers") == producers:
            return row.get("messages_per_second")
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "release", "bin"))
    ap.add_argument("--pairs", type=int, default=3, help="rounds of alternating runs (>= 3)")
    ap.add_argument("--rounds", type=int, default=100000)
    ap.add_argument("--warmup-rounds", type=int, default=10000)
    ap.add_argument("--messages", type=int, default=2000000)
    ap.add_argument("--capacity", type=int, default=1024)
    ap.add_argument("--producers", default="1,4")
    ap.add_argument("--blocking-rounds", type=int, default=20000)
    ap.add_argument("--blocking-cpu", type=int, default=None,
                    help="CPU the blocking-pool threads pin themselves to (default: the second of --cpus; -1: not pinned)")
    ap.add_argument("--cpus", default="0,1")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--cases", default="pingpong,throughput,blocking",
                    help="bench_sync's cases to run (comma-separated; also broadcast, interval)")
    ap.add_argument("--broadcast-receivers", default="1,4,16")
    ap.add_argument("--broadcast-messages", type=int, default=1000000)
    ap.add_argument("--interval-ticks", type=int, default=2000)
    ap.add_argument("--interval-period-us", type=int, default=1000)
    ap.add_argument("--json", help="write every run and ratio to this file")
    a = ap.parse_args()
    if a.pairs < 1:
        ap.error("--pairs must be >= 1")
    producers = [int(p) for p in a.producers.split(",")]
    receivers = [int(r) for r in a.broadcast_receivers.split(",")]
    cases = a.cases.split(",")
    channel_cases = [c for c in cases if c in ("pingpong", "throughput", "blocking")]
    tokio_cases = [c for c in cases if c != "interval"]

    common = ["--json", "--rounds", str(a.rounds), "--warmup-rounds", str(a.warmup_rounds),
              "--messages", str(a.messages), "--capacity", str(a.capacity),
              "--producers", a.producers, "--blocking-rounds", str(a.blocking_rounds),
              "--cpus", a.cpus]
    if a.blocking_cpu is not None:
        common += ["--blocking-cpu", str(a.blocking_cpu)]
    bcast = ["--broadcast-receivers", a.broadcast_receivers,
             "--broadcast-messages", str(a.broadcast_messages)]
    programs = {
        "galay": [os.path.join(a.bin, "bench_sync"), "--no-baselines", "--backend", a.backend,
                  "--cases", a.cases, "--interval-ticks", str(a.interval_ticks),
                  "--interval-period-us", str(a.interval_period_us)] + common + bcast,
    }
    if channel_cases:
        programs["baselines"] = [os.path.join(a.bin, "raw_sync")] + common
    if "interval" in cases:
        programs["timerfd"] = [os.path.join(a.bin, "raw_timerfd"), "--json",
                               "--ticks", str(a.interval_ticks),
                               "--warmup-ticks", str(a.interval_ticks // 20),
                               "--period-us", str(a.interval_period_us),
                               "--cpu", a.cpus.split(",")[0]]
    for name, cmd in programs.items():
        if not os.access(cmd[0], os.X_OK):
            sys.exit(f"sync.py: {cmd[0]} not found (build it: cmake --build --preset release)")
    tokio = build_tokio() if tokio_cases else None
    if tokio:
        programs["tokio"] = [tokio] + common + bcast + ["--cases", ",".join(tokio_cases)]

    names = list(programs)
    rounds = []
    for i in range(a.pairs):
        order = names if i % 2 == 0 else names[::-1]
        runs = {}
        for name in order:
            print(f"round {i + 1}/{a.pairs}: {name}", file=sys.stderr)
            runs[name] = run_json(programs[name])
        merged = {"galay": runs["galay"]["galay"], "galay_local": runs["galay"].get("galay_local"),
                  "galay_runtime": runs["galay"].get("galay_runtime")}
        merged.update({k: v for k, v in runs.get("baselines", {}).items()
                       if k in ("eventfd", "moodycamel", "condvar")})
        if "timerfd" in runs:
            merged["timerfd"] = runs["timerfd"]["timerfd"]
        if "tokio" in runs:
            merged.update({k: v for k, v in runs["tokio"].items() if k in ("tokio", "tokio_pinned")})
        rounds.append(merged)

    # (label, lower/higher is better, target, function(round) -> ratio or None)
    metrics = []
    for pct in ("p50_ns", "p99_ns", "p999_ns"):
        for other, target in (("eventfd", 1.10 if pct == "p50_ns" else None),
                              ("tokio", 1.0 if pct == "p50_ns" else None),
                              ("tokio_pinned", None), ("moodycamel", None)):
            def f(r, pct=pct, other=other):
                x, y = get(r, "galay", "pingpong", pct), get(r, other, "pingpong", pct)
                return x / y if x and y else None
            metrics.append((f"ping-pong {pct[:-3]} galay/{other}", False, target, f))
    def local_vs_tokio(r):
        x, y = get(r, "galay_local", "pingpong", "p50_ns"), get(r, "tokio", "pingpong", "p50_ns")
        return x / y if x and y else None
    metrics.append(("ping-pong p50 galay_local/tokio", False, None, local_vs_tokio))
    for p in producers:
        for other, target in (("tokio", 1.0), ("tokio_pinned", None), ("moodycamel", None)):
            def f(r, p=p, other=other):
                x, y = throughput_of(r.get("galay"), p), throughput_of(r.get(other), p)
                return x / y if x and y else None
            metrics.append((f"throughput {p}p galay/{other}", True, target, f))
    def broadcast_of(impl, n):
        for row in (impl or {}).get("broadcast", []):
            if row.get("receivers") == n:
                return row.get("messages_per_second")
        return None
    for n in receivers:
        for other, target in (("tokio", 1.0), ("tokio_pinned", None)):
            def f(r, n=n, other=other):
                x, y = broadcast_of(r.get("galay"), n), broadcast_of(r.get(other), n)
                return x / y if x and y else None
            metrics.append((f"broadcast {n} receivers galay/{other}", True, target, f))
        for mine in ("galay_runtime", "galay_local"):
            def g(r, n=n, mine=mine):
                x, y = broadcast_of(r.get(mine), n), broadcast_of(r.get("tokio"), n)
                return x / y if x and y else None
            metrics.append((f"broadcast {n} receivers {mine}/tokio", True, None, g))
    for pct in ("p50_ns", "p99_ns"):
        def f(r, pct=pct):
            x, y = get(r, "galay", "interval", pct), get(r, "timerfd", "interval", pct)
            return x / y if x and y else None
        metrics.append((f"interval lateness {pct[:-3]} galay/timerfd", False, None, f))
    for key, label, higher in (("p50_ns", "p50", False), ("p99_ns", "p99", False),
                               ("round_trips_per_second", "round trips/s", True)):
        for other in ("condvar", "tokio", "tokio_pinned"):
            def f(r, key=key, other=other):
                x, y = get(r, "galay", "spawn_blocking", key), get(r, other, "spawn_blocking", key)
                return x / y if x and y else None
            metrics.append((f"spawn_blocking {label} galay/{other}", higher, None, f))

    print(f"\nbench/studies/sync.py: {a.pairs} alternating rounds, CPUs {a.cpus}, "
          f"backend {a.backend}, capacity {a.capacity}; ratio = ours / theirs, median [min-max]")
    print(f"{'metric':<48} {'ratio':>24}  {'verdict':<8} target")
    table = []
    for label, higher, target, f in metrics:
        ratios = [x for x in (f(r) for r in rounds) if x is not None]
        if not ratios:
            continue
        s = harness.spread(ratios)
        med = s["median"]
        v = harness.verdict(s, lower_is_better=not higher, level="level")
        tgt = ""
        if target is not None:
            ok = med >= target if higher else med <= target
            tgt = f"{'>=' if higher else '<='} {target:.2f}: {'met' if ok else 'MISSED'} (median)"
        print(f"{label:<48} {med:8.3f} [{s['min']:.3f}-{s['max']:.3f}]  {v:<8} {tgt}")
        table.append({"metric": label, "median": med, "min": s["min"], "max": s["max"],
                      "verdict": v, "target": target, "higher_is_better": higher})
    allocs = [get(r, "galay", "allocations_per_message", "pingpong") for r in rounds]
    allocs += [row.get("allocations_per_message") for r in rounds for row in r["galay"].get("throughput", [])]
    allocs = [x for x in allocs if x is not None]
    if allocs:
        print(f"{'heap allocations per message (galay)':<48} {max(allocs):8.2g} (max over runs)  "
              f"target 0: {'met' if max(allocs) == 0 else 'MISSED'}")
    bc_allocs = [row.get("allocations_per_message") for r in rounds for row in r["galay"].get("broadcast", [])]
    bc_allocs = [x for x in bc_allocs if x is not None]
    if bc_allocs:
        print(f"{'heap allocations per broadcast message (galay)':<48} {max(bc_allocs):8.2g} (max over runs)  "
              f"target 0: {'met' if max(bc_allocs) == 0 else 'MISSED'}")
    lost = [row.get("lost", 0) for r in rounds for name in ("galay", "tokio", "tokio_pinned")
            for row in (r.get(name) or {}).get("broadcast", [])]
    if lost:
        print(f"{'broadcast messages lost (every stack)':<48} {max(lost):8d} (max over runs)")
    sb_allocs = [get(r, "galay", "spawn_blocking", "allocations_per_round_trip") for r in rounds]
    sb_allocs = [x for x in sb_allocs if x is not None]
    if sb_allocs:
        print(f"{'heap allocations per spawn_blocking (galay)':<48} {max(sb_allocs):8.2g} (max over runs)")
    print("\nabsolute figures, median over rounds:")
    for name in ("galay", "galay_local", "eventfd", "moodycamel", "tokio", "tokio_pinned"):
        p50 = [get(r, name, "pingpong", "p50_ns") for r in rounds]
        p50 = [x for x in p50 if x is not None]
        if not p50:
            continue
        line = f"  {name:<13} ping-pong p50 {statistics.median(p50):>8.0f} ns"
        for p in producers:
            t = [throughput_of(r.get(name), p) for r in rounds]
            t = [x for x in t if x]
            if t:
                line += f"   {p}p {statistics.median(t) / 1e6:7.2f} M msg/s"
        print(line)
    for name in ("galay", "galay_runtime", "galay_local", "tokio", "tokio_pinned"):
        line = ""
        for n in receivers:
            t = [broadcast_of(r.get(name), n) for r in rounds]
            t = [x for x in t if x]
            if t:
                line += f"   {n}r {statistics.median(t) / 1e6:7.2f} M msg/s"
        if line:
            print(f"  {name:<13} broadcast" + line)
    for name in ("galay", "timerfd"):
        p50 = [get(r, name, "interval", "p50_ns") for r in rounds]
        p99 = [get(r, name, "interval", "p99_ns") for r in rounds]
        if p50 and None not in p50:
            print(f"  {name:<13} interval lateness p50 {statistics.median(p50):>8.0f} ns   "
                  f"p99 {statistics.median(p99):>8.0f} ns")
    for name in ("galay", "condvar", "tokio", "tokio_pinned"):
        p50 = [get(r, name, "spawn_blocking", "p50_ns") for r in rounds]
        p99 = [get(r, name, "spawn_blocking", "p99_ns") for r in rounds]
        rate = [get(r, name, "spawn_blocking", "round_trips_per_second") for r in rounds]
        if None in p50 or not p50:
            continue
        print(f"  {name:<13} spawn_blocking p50 {statistics.median(p50):>8.0f} ns   "
              f"p99 {statistics.median(p99):>8.0f} ns   {statistics.median(rate) / 1e3:7.1f} k round trips/s")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rounds": rounds, "ratios": table, "tokio": tokio is not None}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
