#!/usr/bin/env python3
"""The key-value study: examples/mini_redis (galay, io_uring and epoll) against Debian's
redis-server, both loaded by Debian's redis-benchmark (never a client of ours).

    python3 bench/studies/kv.py [--bin build/release/bin] [--rounds 5] [-n 200000] [-c 50]
                                [-r 100000] [--pipelines 1,16] [--tests set,get] [--out FILE.json]

Each round runs every server in turn (galay io_uring, redis, galay epoll; the order turns by one
from round to round), each started fresh, alone on CPU 0 (one worker: redis-server has one thread
for commands), with redis-benchmark on CPU 1: SET then GET at each pipeline depth, `-c`
connections, `-n` requests (five times as many when pipelined: a pipelined run is faster),
random keys among `-r`. Figures per run: requests/s (redis-benchmark's) and the server's CPU time
per request (utime+stime from /proc/PID/stat around the run, divided by the requests). Ratios
galay / redis are taken within each round and quoted median [min-max] over the rounds, with the
verdict the spread allows. The targets: server CPU per request at most 0.70x redis's at -P 16 and
0.90x at -P 1, on both backends, with 0 errors.

Exit status: 0; 1 when a run failed (a server did not start, redis-benchmark failed or reported an
error reply); 2 for bad flags or a missing program (one line saying which).
"""
import argparse
import csv
import io
import json
import os
import shutil
import sys
import tempfile

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (the processes this script starts end with it)
import harness  # noqa: E402  (ports, pinned servers, spreads and verdicts)

SERVER_CPU, CLIENT_CPU = 0, 1
SERVERS = ("galay-io_uring", "redis", "galay-epoll")
TARGETS = {1: 0.90, 16: 0.70}  # server CPU per request, galay / redis, at most


def server_argv(name, bindir, port, tmp):
    """The command line of server `name` on `port`."""
    if name == "redis":
        return [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind",
                "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp, "--daemonize", "no",
                "--protected-mode", "no"]
    return [os.path.join(bindir, "mini_redis"), "--port", str(port), "--workers", "1",
            "--backend", name.split("-", 1)[1]]


def start_server(name, bindir, tmp):
    """The one place this study starts a server: pinned to SERVER_CPU, accepting; (process,
    port). taskset execs the server, so the process's /proc/PID is the server's own."""
    port = harness.free_port()
    return harness.start_pinned(server_argv(name, bindir, port, tmp), SERVER_CPU, bindir, port), port


def benchmark(port, test, pipeline, a):
    """One redis-benchmark run; (requests/s, requests, problems)."""
    n = a.requests * min(pipeline, 5)
    argv = ["taskset", "-c", str(CLIENT_CPU), "redis-benchmark", "-p", str(port), "-c",
            str(a.connections), "-n", str(n), "-r", str(a.keyspace), "-P", str(pipeline), "-t",
            test, "--csv"]
    cp = children.run(argv, capture_output=True, text=True, timeout=600)
    problems = []
    if cp.returncode != 0:
        problems.append(f"redis-benchmark exit {cp.returncode}: {cp.stderr.strip()[-200:]}")
    # redis-benchmark prints an error reply it receives ("Error from server: ...").
    if "error" in (cp.stdout + cp.stderr).lower():
        problems.append("error replies: " + (cp.stdout + cp.stderr).strip()[-200:])
    rps = None
    for row in csv.DictReader(io.StringIO(cp.stdout)):
        if row.get("test", "").upper() == test.upper():
            rps = float(row["rps"])
    if not rps:
        problems.append(f"no requests/s for {test} in redis-benchmark's output")
    return rps, n, problems


def run_server(name, a, tmp):
    """Start `name`, run every test at every depth against it, stop it: {"ok", "problems",
    "<test>_p<depth>_rps", "<test>_p<depth>_cpu_us"}."""
    rec = {"ok": True, "problems": []}
    try:
        proc, port = start_server(name, a.bin, tmp)
    except RuntimeError as e:
        return {"ok": False, "problems": [str(e)]}
    try:
        for pipeline in a.pipelines:
            for test in a.tests:
                before = harness.proc_cpu_s(proc.pid)
                rps, n, problems = benchmark(port, test, pipeline, a)
                after = harness.proc_cpu_s(proc.pid)
                rec["problems"] += problems
                key = f"{test}_p{pipeline}"
                rec[key + "_rps"] = rps
                if before is not None and after is not None:
                    rec[key + "_cpu_us"] = (after - before) / n * 1e6
    finally:
        harness.stop(proc)
    rec["ok"] = not rec["problems"]
    return rec


def measure(a):
    """The rounds, and the ratios galay / redis: (rounds, ratios, failed)."""
    with tempfile.TemporaryDirectory(prefix="kv-") as tmp:
        def describe(name, rnd, rec):
            figs = "  ".join(f"{t}-P{p} {rec.get(f'{t}_p{p}_rps') or 0:,.0f}/s "
                             f"{rec.get(f'{t}_p{p}_cpu_us') or 0:.2f} us"
                             for p in a.pipelines for t in a.tests)
            return f"round {rnd + 1} {name:15s} {figs}"
        rounds, failed = harness.run_rounds(list(a.servers), a.rounds,
                                            lambda name, rnd: run_server(name, a, tmp),
                                            describe, rotate=True)
    ratios = {}
    for name in a.servers:
        if name == "redis" or "redis" not in a.servers:
            continue
        for p in a.pipelines:
            for t in a.tests:
                key = f"{t}_p{p}"
                ratios[f"{name}/{key}"] = {
                    "rps": harness.round_ratio(rounds, name, "redis", key + "_rps"),
                    "cpu": harness.round_ratio(rounds, name, "redis", key + "_cpu_us"),
                    "target": TARGETS.get(p),
                }
    return rounds, ratios, failed


def table(a, rounds, ratios):
    """The study's tables (markdown): absolute medians, then the ratios against redis."""
    lines = ["| server | " + " | ".join(f"{t.upper()} -P {p}" for p in a.pipelines
                                        for t in a.tests) + " |",
             "|---|" + "---:|" * (len(a.pipelines) * len(a.tests))]
    for name in a.servers:
        cells = []
        for p in a.pipelines:
            for t in a.tests:
                runs = [rd[name] for rd in rounds]
                rps = harness.median_of(runs, f"{t}_p{p}_rps")
                cpu = harness.median_of(runs, f"{t}_p{p}_cpu_us")
                cells.append("n/a" if rps is None or cpu is None
                             else f"{rps / 1000:,.0f}k/s, {cpu:.2f} us")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| galay / redis | requests/s | server CPU per request | target (CPU) |",
              "|---|---:|---:|---|"]
    for key, r in ratios.items():
        target = r["target"]
        met = ""
        if target is not None and r["cpu"] is not None:
            met = (f"<= {target:.2f}: " + ("met" if r["cpu"]["max"] <= target else
                                            "not met" if r["cpu"]["min"] > target else
                                            "not shown (met in some rounds)"))
        lines.append(f"| {key.replace('_p', ' -P ').replace('/', ' ')} | "
                     f"{harness.fmt_spread(r['rps'])} {harness.verdict(r['rps'], False)} | "
                     f"{harness.fmt_spread(r['cpu'])} {harness.verdict(r['cpu'], True, ('less CPU', 'more CPU'))} | "
                     f"{met} |")
    return lines


def plots(a, ratios):
    """The ratios as plots (bench/harness/plot_pages.py's schema): server CPU per request and
    requests/s, galay / redis, at each test and depth, whiskers min-max over the rounds."""
    xs = [(t, p, f"{t.upper()} -P {p}") for p in a.pipelines for t in a.tests]
    out = []
    for fig, title, label in (
            ("cpu", "server CPU per request", "kv_cpu_ratios"),
            ("rps", "requests/s", "kv_rps_ratios")):
        series = []
        for name in a.servers:
            if name == "redis":
                continue
            rs = [ratios.get(f"{name}/{t}_p{p}", {}).get(fig) for t, p, _ in xs]
            series.append({"label": f"mini_redis {name.split('-', 1)[1]} / redis-server",
                           **{k: [None if r is None else round(r[k], 3) for r in rs]
                              for k in ("median", "min", "max")}})
        out.append({"name": label, "title": f"Key-value ({title}): mini_redis / redis-server, "
                    f"redis-benchmark -c {a.connections} -r {a.keyspace}",
                    "x_label": "test", "y_label": "ratio (mini_redis / redis-server)",
                    "x": [x for _, _, x in xs], "log_x": False, "series": series,
                    "reference": 1.0})
    return out


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/release/bin", help="where mini_redis is")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", "--requests", type=int, default=200000,
                    help="requests per run at -P 1 (five times as many when pipelined)")
    ap.add_argument("-c", "--connections", type=int, default=50)
    ap.add_argument("-r", "--keyspace", type=int, default=100000)
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--tests", default="set,get")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--out", help="write the rounds and ratios as JSON here")
    ap.add_argument("--data", help="write the plots here (docs/benchmarks/data/kv.json)")
    a = ap.parse_args(argv)
    try:
        a.pipelines = [int(p) for p in a.pipelines.split(",") if p]
    except ValueError:
        ap.error(f"--pipelines: numbers separated by commas, not '{a.pipelines}'")
    a.tests = [t.lower() for t in a.tests.split(",") if t]
    a.servers = [s for s in a.servers.split(",") if s]
    if any(t not in ("set", "get") for t in a.tests) or not a.tests:
        ap.error("--tests: set, get or set,get")
    if any(s not in SERVERS for s in a.servers) or not a.servers:
        ap.error(f"--servers: among {','.join(SERVERS)}")
    if min([a.rounds, a.requests, a.connections, a.keyspace] + a.pipelines) < 1:
        ap.error("--rounds, -n, -c, -r and --pipelines must be at least 1")
    return a


def missing(a):
    """What is not installed or built, in one line; None when everything is there."""
    for tool in ("redis-server", "redis-benchmark", "taskset"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install redis-server redis-tools util-linux)"
    if any(s.startswith("galay") for s in a.servers) and \
            not os.access(os.path.join(a.bin, "mini_redis"), os.X_OK):
        return f"{a.bin}/mini_redis not found (build it first: make build)"
    return None


def suite_section(bindir, out_dir, quick=True, pairs=3):
    """bench/suite.py's kv section: (report lines, data, plots)."""
    a = parse(["--bin", bindir, "--rounds", str(max(3, pairs))] +
              (["-n", "30000"] if quick else []))
    problem = missing(a)
    if problem:
        return ([f"## Key-value (bench/studies/kv.py): skipped: {problem}", ""],
                {"skipped": problem}, [])
    rounds, ratios, failed = measure(a)
    data = {"rounds": rounds, "ratios": ratios, "requests": a.requests,
            "connections": a.connections, "keyspace": a.keyspace, "failed": failed}
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "kv.json"), "w") as f:
            json.dump(data, f, indent=1)
    lines = [f"## Key-value (bench/studies/kv.py, short form: mini_redis vs redis-server, "
             f"redis-benchmark -c {a.connections} -r {a.keyspace}, {a.rounds} rounds)", ""]
    return lines + table(a, rounds, ratios) + [""], data, plots(a, ratios)


def main():
    a = parse()
    problem = missing(a)
    if problem:
        print(f"kv: error: {problem}", file=sys.stderr)
        return 2
    print(f"kv: load {harness.loadavg():.2f}", file=sys.stderr)
    rounds, ratios, failed = measure(a)
    print("\n".join(table(a, rounds, ratios)))
    print(f"kv: load {harness.loadavg():.2f}", file=sys.stderr)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rounds": rounds, "ratios": ratios, "requests": a.requests,
                       "connections": a.connections, "keyspace": a.keyspace}, f, indent=1)
    if a.data:
        with open(a.data, "w") as f:
            json.dump({"study": "kv", "source": "python3 bench/studies/kv.py " +
                       " ".join(sys.argv[1:]) + f"; load {harness.loadavg():.1f}",
                       "plots": plots(a, ratios)}, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
