#!/usr/bin/env python3
"""The io_uring latency study, finished on Linux with its control groups.

    python3 bench/studies/latency.py [--bin build/release/bin] [--rounds 3] [-n 30] [--sample-ms 5]
                             [--spin 50]

Runs the study's five benchmarks for galay (bench_latency on io_uring and on epoll, both ends
galay) and for every control group that can be built here (bench/control/: blocking POSIX
sockets, Tokio current-thread, Go GOMAXPROCS=1), alternately in one invocation: round 1 runs
every implementation once, round 2 runs them in the reverse order, and so on. Each run starts the
implementation's own echo server pinned to CPU 0 and its client pinned to CPU 1, on a fresh
port, and collects the raw samples (--json). bench/harness/latstats.py then computes every figure
for every implementation alike, and this prints:

  (a) the study's results table per implementation (samples of all rounds pooled),
  (b) ratios of mean time per iteration to Tokio and to blocking sockets, median [min-max] over
      the rounds (one ratio per round), with a verdict: faster / slower only when the whole
      spread is on one side of 1.00, otherwise level within noise,
  (c) the study's four success criteria, judged for io_uring vs epoll and for galay vs Tokio,
      with the numbers behind each verdict, and galay's own targets against the references.

--spin US adds galay-io_uring-spin and galay-epoll-spin: the same, with
SchedulerOptions::idle_spin = US microseconds on both ends (bench_latency --idle-spin), and a
table of their time / the same backend's without the spin, with the round trip's targets judged
for them too.

raw_uring and raw_epoll (bench/baselines/) are the hand-written servers with galay's client on
the same backend (with --spin, raw_uring-spin and raw_epoll-spin: both ends spin, the server
with its own --idle-spin): against galay-io_uring and galay-epoll only the server differs, so
their ratio is what galay's server adds to a round trip, and to a new connection
(new_connection_per_request's target: galay io_uring <= 1.00x galay epoll and raw_uring).
With --spin, raw_uring-spin+epoll-client and raw_epoll-spin+io_uring-client run the same
spinning hand-written server with galay's client on the other backend: against raw_*-spin only
the client differs, so their ratio is what galay's io_uring client costs against its epoll one.

A missing toolchain (cargo, go) is one line in the report; a run that fails (server does not
start, client exit != 0) is reported and makes the exit status 1. --out writes everything (raw
samples included) as JSON; --plot writes the latency-percentile plot (whiskers: min-max over the
rounds) when matplotlib is there.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (ports, servers, spreads and verdicts)
import latstats  # noqa: E402
import plot_pages  # noqa: E402  (the plots, with their spread)

REFERENCES = ("tokio", "blocking")
# The study's success criteria: (label, benchmark, figure, threshold on the A/B time ratio,
# what "better by X%" means). Lower time is better for all of them.
CRITERIA = [
    ("1. single ping-pong latency better by > 10%", "network_latency_100B", "mean", 1 / 1.10,
     "mean time per connect+round trip+close"),
    ("2. persistent-connection throughput better by > 20%", "connection_strategy/reuse", "mean",
     1 / 1.20, "round trips/s on a persistent connection"),
    ("3. p95 latency better by > 15%", "connection_strategy/reuse", "p95", 0.85,
     "p95 of single round trips on a persistent connection"),
    ("4. message throughput better by > 25%", "throughput_100_messages", "mean", 1 / 1.25,
     "messages/s, 100 round trips per iteration"),
]
COMPARISONS = [("galay-io_uring", "galay-epoll"), ("galay-io_uring", "tokio"),
               ("galay-epoll", "tokio")]
# Galay's targets: galay io_uring's time / the reference's, at most this.
TARGETS = [
    ("connection_strategy/reuse", "tokio", 1.00), ("connection_strategy/reuse", "blocking", 1.10),
    ("throughput_100_messages", "tokio", 1.00), ("throughput_100_messages", "blocking", 1.10),
    ("connection_strategy/new_connection", "tokio", 1.00),
    ("connection_strategy/new_connection", "blocking", 1.05),
]


# With --spin: galay with SchedulerOptions::idle_spin against the same backend without it, and
# the single round trip's targets (time / the reference's, at most this).
SPIN_TARGETS = [
    ("network_latency_100B", "blocking", 1.05), ("network_latency_100B", "galay-epoll", 1.00),
    ("network_latency_100B", "galay-epoll-spin", 1.00),
    ("throughput_100_messages", "blocking", 1.05), ("throughput_100_messages", "galay-epoll", 1.00),
    ("throughput_100_messages", "galay-epoll-spin", 1.00),
]


def implementations(bindir, build_dir, build=True, only=None, spin_us=0):
    """[(name, server argv with {port}, client argv with {port}, env)] and one line per missing
    implementation."""
    impls, missing = [], []
    bl = os.path.join(bindir, "bench_latency")
    for be in ("io_uring", "epoll"):
        if not os.access(bl, os.X_OK):
            missing.append(f"galay-{be}: {bl} not built")
            continue
        impls.append((f"galay-{be}", [bl, "server", "-p", "{port}", "--backend", be],
                      [bl, "-h", "127.0.0.1", "-p", "{port}", "--backend", be], None))
        if spin_us > 0:
            spin = ["--idle-spin", str(spin_us)]
            impls.append((f"galay-{be}-spin", [bl, "server", "-p", "{port}", "--backend", be] + spin,
                          [bl, "-h", "127.0.0.1", "-p", "{port}", "--backend", be] + spin, None))
    for be, raw in (("io_uring", "raw_uring"), ("epoll", "raw_epoll")):
        rp = os.path.join(bindir, raw)
        if not os.access(rp, os.X_OK) or not os.access(bl, os.X_OK):
            missing.append(f"{raw}: {rp} not built")
            continue
        client = [bl, "-h", "127.0.0.1", "-p", "{port}", "--backend", be]
        impls.append((raw, [rp, "{port}"], client, None))
        if spin_us > 0:
            spin = ["--idle-spin", str(spin_us)]
            impls.append((f"{raw}-spin", [rp, "{port}"] + spin, client + spin, None))
            other = "epoll" if be == "io_uring" else "io_uring"  # the same server, the other client
            impls.append((f"{raw}-spin+{other}-client", [rp, "{port}"] + spin,
                          [bl, "-h", "127.0.0.1", "-p", "{port}", "--backend", other] + spin,
                          None))
    lb = os.path.join(bindir, "latency_blocking")
    if os.access(lb, os.X_OK):
        impls.append(("blocking", [lb, "server", "-p", "{port}"],
                      [lb, "-h", "127.0.0.1", "-p", "{port}"], None))
    else:
        missing.append(f"blocking: {lb} not built")
    tok = build_tokio(build_dir, build)
    if tok.startswith("/"):
        impls.append(("tokio", [tok, "server", "-p", "{port}"],
                      [tok, "-h", "127.0.0.1", "-p", "{port}"], None))
    else:
        missing.append(f"tokio: {tok}")
    go = build_go(build_dir, build)
    if go.startswith("/"):
        env = {**os.environ, "GOMAXPROCS": "1"}
        impls.append(("go", [go, "server", "-p", "{port}"],
                      [go, "-h", "127.0.0.1", "-p", "{port}"], env))
    else:
        missing.append(f"go: {go}")
    if only:
        impls = [i for i in impls if i[0] in only]
    return impls, missing


def _build(cmd, cwd, out, what, env=None):
    try:
        cp = children.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=900, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{what} failed: {e}; skipped"
    if cp.returncode != 0 or not os.access(out, os.X_OK):
        last = (cp.stdout.strip().splitlines() or ["?"])[-1]
        return f"{what} failed ({last}); skipped"
    return os.path.abspath(out)


def build_tokio(build_dir, build):
    out = os.path.join(build_dir, "control", "tokio", "release", "tokio_latency")
    if not shutil.which("cargo"):
        return "cargo not found; skipped"
    if not build:
        return os.path.abspath(out) if os.access(out, os.X_OK) else "not built; skipped"
    return _build(["cargo", "build", "--release", "--quiet", "--target-dir",
                   os.path.abspath(os.path.join(build_dir, "control", "tokio"))],
                  os.path.join(BENCH, "control", "tokio_latency"), out, "cargo build")


def build_go(build_dir, build):
    out = os.path.join(build_dir, "control", "go", "go_latency")
    if not shutil.which("go"):
        return "go not found; skipped"
    if not build:
        return os.path.abspath(out) if os.access(out, os.X_OK) else "not built; skipped"
    path, why = harness.go_build(os.path.join(BENCH, "control", "go_latency"),
                                 os.path.abspath(out))
    return path if path else f"go {why}; skipped"


def run_one(impl, args):
    """Runs one implementation once: its server on CPU args.server_cpu, its client on
    args.client_cpu. Returns (record or None, problem or None)."""
    name, server_argv, client_argv, env = impl
    port = harness.free_port()
    sub = lambda argv: [a.replace("{port}", str(port)) for a in argv]  # noqa: E731
    server = children.popen(["taskset", "-c", str(args.server_cpu)] + sub(server_argv),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        if not harness.wait_accepting(server, port, 15.0):
            err = server.stderr.read() if server.poll() is not None else "did not accept"
            return None, f"{name}: server did not start: {err.strip()[-300:]}"
        argv = (["taskset", "-c", str(args.client_cpu)] + sub(client_argv)
                + ["-n", str(args.samples), "--sample-ms", str(args.sample_ms),
                   "--warmup-ms", str(args.warmup_ms), "--json"])
        budget = 5 * (args.warmup_ms + 3 * args.samples * args.sample_ms) / 1000 + 120
        try:
            cp = children.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=budget, env=env)
        except subprocess.TimeoutExpired:
            return None, f"{name}: client timed out after {budget:.0f} s"
        if cp.returncode != 0:
            return None, f"{name}: client exit {cp.returncode}: {cp.stderr.strip()[-300:]}"
        lines = [l for l in cp.stdout.splitlines() if l.startswith("{")]
        if not lines:
            return None, f"{name}: client printed no JSON"
        rec = json.loads(lines[-1])
        rec["implementation"] = name  # (the name this harness knows it by)
        if server.poll() is not None:
            return None, f"{name}: server exited during the run ({server.returncode})"
        return rec, None
    finally:
        harness.stop(server)


def run_study(args, impls, log=print):
    """rounds x implementations, alternating; returns {name: [record per round]}, problems."""
    runs = {i[0]: [] for i in impls}
    problems = []
    for r in range(args.rounds):
        order = impls if r % 2 == 0 else impls[::-1]
        for impl in order:
            t0 = time.monotonic()
            rec, problem = run_one(impl, args)
            if problem:
                problems.append(f"round {r + 1}: {problem}")
                log(f"  round {r + 1} {impl[0]}: FAILED: {problem}")
                continue
            rec["round"] = r + 1
            runs[impl[0]].append(rec)
            reuse = next((b for b in rec["benchmarks"] if b["name"] == "connection_strategy/reuse"),
                         None)
            extra = (f", reuse {latstats.format_time(mean_of(reuse))}" if reuse else "")
            log(f"  round {r + 1} {impl[0]}: {time.monotonic() - t0:.1f} s{extra}")
    return runs, problems


def mean_of(bench):
    t = latstats.per_iteration(bench)
    return sum(t) / len(t) if t else None


def p95_of(bench):
    return latstats.quantile(bench.get("iteration_ns") or [], 0.95)


def figure(rec, bench_name, what):
    for b in rec["benchmarks"]:
        if b["name"] == bench_name:
            return mean_of(b) if what == "mean" else p95_of(b)
    return None


def paired_ratios(runs, a, b, bench_name, what="mean"):
    """One ratio A/B per round in which both ran."""
    by_round = {r["round"]: r for r in runs.get(b, [])}
    out = []
    for ra in runs.get(a, []):
        rb = by_round.get(ra["round"])
        if rb is None:
            continue
        fa, fb = figure(ra, bench_name, what), figure(rb, bench_name, what)
        if fa and fb:
            out.append(fa / fb)
    return harness.spread(out)


def analyze(runs, resamples=10000):
    tables = {}
    for name, recs in runs.items():
        if recs:
            merged = latstats.merge_runs(recs)
            tables[name] = [latstats.summarize(merged[b], resamples)
                            for b in latstats.STUDY_BENCHMARKS if b in merged]
    ratios = {}
    for ref in REFERENCES:
        for name in runs:
            if name == ref or not runs.get(ref):
                continue
            for b in latstats.STUDY_BENCHMARKS:
                s = paired_ratios(runs, name, ref, b)
                if s:
                    ratios.setdefault(ref, {}).setdefault(name, {})[b] = s
    criteria = []
    for a, b in COMPARISONS:
        if not runs.get(a) or not runs.get(b):
            continue
        rows = []
        for label, bench, what, threshold, meaning in CRITERIA:
            s = paired_ratios(runs, a, b, bench, what)
            rows.append({"criterion": label, "benchmark": bench, "figure": what,
                         "meaning": meaning, "threshold": threshold, "ratio": s,
                         "verdict": harness.criterion_verdict(s, threshold)})
        met = sum(r["verdict"] == "met" for r in rows)
        undecided = sum(r["verdict"].startswith("undecided") for r in rows)
        overall = ("succeeded" if met >= 2 else
                   "failed" if met + undecided < 2 else "undecided")
        criteria.append({"a": a, "b": b, "rows": rows, "met": met, "overall": overall})
    targets = [judged("galay-io_uring", bench, ref, limit, runs) for bench, ref, limit in TARGETS]
    spin = {}
    for be in ("io_uring", "epoll"):
        for b in latstats.STUDY_BENCHMARKS:
            s = paired_ratios(runs, f"galay-{be}-spin", f"galay-{be}", b)
            if s:
                spin.setdefault(f"galay-{be}-spin", {})[b] = s
    spin_targets = [judged("galay-io_uring-spin", bench, ref, limit, runs)
                    for bench, ref, limit in SPIN_TARGETS]
    servers, clients = pair_ratios(runs, SERVER_PAIRS), pair_ratios(runs, CLIENT_PAIRS)
    connection_targets = [judged(name, bench, ref, limit, runs)
                          for name, bench, ref, limit in CONNECTION_TARGETS]
    return {"tables": tables, "ratios": ratios, "criteria": criteria,
            "targets": [t for t in targets if t], "spin": spin,
            "spin_targets": [t for t in spin_targets if t], "servers": servers,
            "clients": clients,
            "connection_targets": [t for t in connection_targets if t]}


def pair_ratios(runs, pairs):
    """{"A / B": {benchmark: spread of A's time / B's}} for every (A, B) of `pairs` that ran."""
    out = {}
    for a, b in pairs:
        for bench in latstats.STUDY_BENCHMARKS:
            s = paired_ratios(runs, a, b, bench)
            if s:
                out.setdefault(f"{a} / {b}", {})[bench] = s
    return out


def judged(name, bench, ref, limit, runs):
    """`name`'s time / `ref`'s on `bench` against `limit`, or None when either did not run."""
    s = paired_ratios(runs, name, ref, bench)
    if s is None:
        return None
    verdict = ("met" if s["max"] <= limit else "missed" if s["min"] > limit
               else "met by the median" if s["median"] <= limit else "missed by the median")
    return {"name": name, "benchmark": bench, "reference": ref, "limit": limit, "ratio": s,
            "verdict": verdict}


def study_table_lines(name, rows, rounds):
    lines = [f"**{name}** ({rounds} run(s) pooled)", "",
             "| benchmark | time | 95% CI | median | p99 | outliers |", "|---|---|---|---|---|---|"]
    for s in rows:
        ft = latstats.format_time
        label = latstats.STUDY_LABELS.get(s["name"], s["name"])
        lines.append(
            f"| {label} | {ft(s['mean_ns'])} ±{s['spread_pct']:.2f}% | "
            f"[{ft(s['ci_ns'][0])} {ft(s['ci_ns'][1])}] | {ft(s['median_ns'])} | "
            f"{ft(s['p99_ns'])} | {s['outliers_total']} of {s['samples']} "
            f"({s['outliers_mild']} mild, {s['outliers_severe']} severe) |")
    return lines + [""]


def report_lines(analysis, runs, missing, problems, short=False):
    lines = []
    for m in missing:
        lines.append(f"- {m}")
    if missing:
        lines.append("")
    rounds = max((len(v) for v in runs.values()), default=0)
    if not short:
        for name, rows in analysis["tables"].items():
            lines += study_table_lines(name, rows, len(runs[name]))
    else:  # one table: mean ± per implementation
        names = list(analysis["tables"])
        lines += ["| benchmark | " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        for i, b in enumerate(latstats.STUDY_BENCHMARKS):
            cells = []
            for n in names:
                rows = [r for r in analysis["tables"][n] if r["name"] == b]
                cells.append(f"{latstats.format_time(rows[0]['mean_ns'])} "
                             f"±{rows[0]['spread_pct']:.1f}%" if rows else "-")
            lines.append(f"| {latstats.STUDY_LABELS.get(b, b)} | " + " | ".join(cells) + " |")
        lines.append("")
    def ratio_table(title, per_impl):
        names = list(per_impl)
        lines.extend([title, "", "| benchmark | " + " | ".join(names) + " |",
                      "|---|" + "---|" * len(names)])
        for b in latstats.STUDY_BENCHMARKS:
            cells = []
            for n in names:
                s = per_impl[n].get(b)
                cells.append(f"{harness.fmt_spread(s)} {harness.verdict(s)}" if s else "-")
            lines.append(f"| {latstats.STUDY_LABELS.get(b, b)} | " + " | ".join(cells) + " |")
        lines.append("")

    def target_table(title, targets, named=False):
        lines.extend([title, "", "| benchmark | " + ("A | " if named else "") + "reference | "
                      "ratio | target | verdict |", "|---|---|---|---|---|" + ("---|" if named
                                                                             else "")])
        for t in targets:
            lines.append(f"| {t['benchmark']} | " + (f"{t['name']} | " if named else "")
                         + f"{t['reference']} | {harness.fmt_spread(t['ratio'])}"
                         f" | <= {t['limit']:.2f} | {t['verdict']} |")
        lines.append("")

    for ref, per_impl in analysis["ratios"].items():
        ratio_table(f"Time per iteration / {ref}'s, median [min-max] over {rounds} round(s) "
                    "(lower is faster):", per_impl)
    for c in analysis["criteria"]:
        lines += [f"Success criteria, {c['a']} (A) vs {c['b']} (B): {c['met']} of 4 met, "
                  f"validation **{c['overall']}** (the study asks for any 2)", "",
                  "| criterion | figure | A/B time ratio | needs | verdict |",
                  "|---|---|---|---|---|"]
        for r in c["rows"]:
            gain = ""
            if r["ratio"]:
                med = r["ratio"]["median"]
                gain = (f" (A's time {100 * (med - 1):+.1f}%)" if "latency" in r["criterion"]
                        else f" (A's rate {100 * (1 / med - 1):+.1f}%)")
            lines.append(f"| {r['criterion']} | {r['benchmark']} {r['figure']} | "
                         f"{harness.fmt_spread(r['ratio'])}{gain} | < {r['threshold']:.3f} | "
                         f"{r['verdict']} |")
        lines.append("")
    if analysis["targets"] and not short:
        target_table("Targets, galay io_uring's time / the reference's:", analysis["targets"])
    if analysis.get("spin"):
        ratio_table("Time per iteration with the idle spin / the same backend's without it, "
                    f"median [min-max] over {rounds} round(s):", analysis["spin"])
    if analysis.get("spin_targets"):
        target_table("Round-trip targets, galay-io_uring-spin's time / the reference's:",
                     analysis["spin_targets"])
    if analysis.get("servers"):
        ratio_table("Time per iteration, one server / another with the same client (raw_*: the "
                    "hand-written loop), median [min-max] over the rounds:", analysis["servers"])
    if analysis.get("clients"):
        ratio_table("Time per iteration, galay's io_uring client / its epoll client with the same "
                    "spinning server, median [min-max] over the rounds:", analysis["clients"])
    if analysis.get("connection_targets"):
        target_table("New-connection targets, A's time / the reference's:",
                     analysis["connection_targets"], named=True)
    for p in problems:
        lines.append(f"- FAILED: {p}")
    return lines


def percentile_plot(runs, bench="connection_strategy/reuse"):
    """The plot data (bench/harness/plot_pages.py's schema) of p50..p99.9 of single iterations of
    `bench` per implementation: the median over the rounds of each round's percentile, with the
    min-max over the rounds as whiskers. None when no run has that benchmark."""
    ps = latstats.PERCENTILES
    series = []
    for name, recs in runs.items():
        per_round = []
        for rec in recs:
            b = next((b for b in rec["benchmarks"] if b["name"] == bench), None)
            each = sorted((b or {}).get("iteration_ns") or [])
            if each:
                per_round.append([latstats.quantile(each, p / 100) / 1e3 for p in ps])
        if not per_round:
            continue
        cols = [harness.spread([r[i] for r in per_round]) for i in range(len(ps))]
        series.append({"label": name, "median": [c["median"] for c in cols],
                       "min": [c["min"] for c in cols], "max": [c["max"] for c in cols]})
    if not series:
        return None
    return {"name": "latency_percentiles",
            "title": f"{bench}: latency percentiles of single iterations",
            "x_label": "percentile", "y_label": "µs per round trip (log scale)",
            "x": [f"p{p:g}" for p in ps], "log_y": True, "series": series}


def add_arguments(ap):
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds (every implementation once per round)")
    ap.add_argument("-n", "--samples", type=int, default=30)
    ap.add_argument("--sample-ms", type=float, default=5.0)
    ap.add_argument("--warmup-ms", type=float, default=200.0)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--only", help="comma-separated implementations (galay-io_uring, galay-epoll, "
                                   "raw_uring, raw_epoll, blocking, tokio, go; with --spin also "
                                   "galay-io_uring-spin, galay-epoll-spin, raw_uring-spin, "
                                   "raw_epoll-spin, raw_uring-spin+epoll-client, "
                                   "raw_epoll-spin+io_uring-client)")
    ap.add_argument("--spin", type=int, default=0, metavar="US",
                    help="also run galay on both backends with SchedulerOptions::idle_spin = US "
                         "microseconds (0: not)")
    ap.add_argument("--no-build", action="store_true",
                    help="do not run cargo/go build (use what was built before)")

# A server against another with the same client: galay io_uring against galay epoll and each
# galay server against the hand-written loop on its backend (their ratio is the server's part).
SERVER_PAIRS = [("galay-io_uring", "galay-epoll"), ("galay-io_uring", "raw_uring"),
                ("galay-epoll", "raw_epoll"), ("galay-io_uring-spin", "galay-epoll-spin"),
                ("galay-io_uring-spin", "raw_uring-spin"), ("galay-epoll-spin", "raw_epoll-spin")]
# One client against another with the same server (a hand-written loop, spinning): galay's
# io_uring client / its epoll client, whichever backend the server runs.
CLIENT_PAIRS = [("raw_epoll-spin+io_uring-client", "raw_epoll-spin"),
                ("raw_uring-spin", "raw_uring-spin+epoll-client")]
# A new connection per request: galay io_uring's time / the other server's, at most this.
CONNECTION_TARGETS = [
    ("galay-io_uring", "connection_strategy/new_connection", "galay-epoll", 1.00),
    ("galay-io_uring", "connection_strategy/new_connection", "raw_uring", 1.00),
    ("galay-io_uring-spin", "connection_strategy/new_connection", "galay-epoll-spin", 1.00),
    ("galay-io_uring-spin", "connection_strategy/new_connection", "raw_uring-spin", 1.00),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    add_arguments(ap)
    ap.add_argument("--out", help="JSON with every run's raw samples and the analysis")
    ap.add_argument("--plot", help="PNG of the latency percentiles (needs matplotlib)")
    ap.add_argument("--short", action="store_true", help="the short report (as in make bench)")
    args = ap.parse_args()
    if not shutil.which("taskset"):
        sys.exit("latency.py: taskset (util-linux) is required for CPU pinning")
    build_dir = os.path.dirname(os.path.abspath(args.bin))
    if args.spin < 0:
        sys.exit("latency.py: --spin must be >= 0 microseconds")
    impls, missing = implementations(args.bin, build_dir, not args.no_build,
                                     set(args.only.split(",")) if args.only else None,
                                     args.spin)
    for m in missing:
        print(m)
    if not impls:
        sys.exit("latency.py: nothing to run (build first: make build)")
    print(f"{len(impls)} implementations x {args.rounds} rounds; server on CPU {args.server_cpu}, "
          f"client on CPU {args.client_cpu}; {args.samples} samples of ~{args.sample_ms} ms after "
          f"{args.warmup_ms} ms warm-up per benchmark", flush=True)
    runs, problems = run_study(args, impls, log=lambda s: print(s, flush=True))
    analysis = analyze(runs)
    print()
    print("\n".join(report_lines(analysis, runs, missing, problems, short=args.short)))
    if args.plot:
        plot = percentile_plot(runs)
        if plot is None:
            print("plot: no run of connection_strategy/reuse to draw")
        elif plot_pages.draw(plot, args.plot):
            print(f"plot: {args.plot}")
        else:
            print("plot: matplotlib is not installed (python3-matplotlib): no plot")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"config": vars(args), "kernel": os.uname().release, "missing": missing,
                       "problems": problems, "analysis": analysis, "runs": runs}, f)
        print(f"wrote {args.out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
