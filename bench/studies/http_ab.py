#!/usr/bin/env python3
"""HTTP CPU-per-request A/B of two server commands, interleaved: both servers run at once, each
loaded by its own `wrk -t1`, and the two wrks take turns.

    python3 bench/studies/http_ab.py --a "/tmp/old/http_server {port} --backend epoll" \\
        --b "build/release/bin/http_server {port} --backend epoll" -c 1000 --rounds 8

A round is one run of bench/studies/http_servers.py's interleaved mode (`run_interleaved`) with A
and B as its two servers: both start on a fresh port each, pinned to --server-cpu, and answer one
checked request; each is warmed up alone; then one wrk per server runs on --client-cpu, only one at
a time (the other stopped with SIGSTOP), switching every --slice seconds until each has had -d
seconds. Each server's CPU time (every thread of every process of its tree) over the turns,
divided by the requests its wrk completed, is its CPU per request; the round's ratio is B / A.
Both servers see the same moments of a shared machine, so slow drifts cancel out; what is left is
the round-to-round spread, printed with the median (a verdict only when the whole spread is on
one side of 1.00). This is how an A/B of two builds of http_server is made.

In a command, `{port}` is replaced by its port and `{root}` by a directory holding
bench/studies/http_servers.py's static file. --scenario fixed requests GET / (its fixed body);
--scenario file requests that file (give both servers `--root {root}`). A server that does not
start or answers wrongly, a wrk that fails or counts errors (socket errors, non-2xx answers): the
round is reported and not used, exit status 1. Bad flags or no wrk: exit 2. Standard library only.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import http_servers  # noqa: E402


def one_round(servers, args, conns, lua, logdir, seq):
    """{"a": us, "b": us} CPU per request, or (None, why)."""
    recs = http_servers.run_interleaved(servers, ["a", "b"], args.scenario, conns, args, lua,
                                      logdir, seq)
    res = {}
    for side in ("a", "b"):
        rec = recs[side]
        if rec["problems"]:
            return None, f"server {side}: {'; '.join(rec['problems'])}"
        if rec["errors"]:
            return None, f"server {side}: wrk counted errors {rec['error_detail']}"
        if not rec["cpu_us_per_req"]:
            return None, f"server {side}: no request completed"
        res[side] = rec["cpu_us_per_req"]
    return res, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--a", required=True, help='server A, e.g. "/tmp/old/http_server {port}"')
    ap.add_argument("--b", required=True, help="server B")
    ap.add_argument("-c", "--connections", default="1000", help="comma-separated")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("-d", "--duration", type=float, default=4.0,
                    help="seconds of turns per server per round")
    ap.add_argument("--slice", type=float, default=0.5, help="seconds of one turn")
    ap.add_argument("--warmup", type=float, default=1.0,
                    help="seconds of wrk for each server alone first (whole seconds; 0: none)")
    ap.add_argument("--scenario", choices=("fixed", "file"), default="fixed",
                    help="fixed: GET / (default); file: the static file under {root}")
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--out", help="JSON output (default: none)")
    args = ap.parse_args()
    try:
        conns = [int(c) for c in args.connections.split(",")]
    except ValueError:
        ap.error(f"-c: not a list of numbers: {args.connections}")
    if not conns or min(conns) < 1 or args.rounds < 1 or args.duration <= 0 or args.slice <= 0:
        ap.error("-c, --rounds, -d and --slice must be positive")
    if args.warmup < 0:
        ap.error("--warmup must not be negative")
    if "{port}" not in args.a or "{port}" not in args.b:
        ap.error("--a and --b must contain {port}")
    if shutil.which("wrk") is None:
        print("http_ab: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    for cmd in (args.a, args.b):
        exe = shlex.split(cmd)[0]
        if shutil.which(exe) is None:
            print(f"http_ab: {exe}: not found or not executable", file=sys.stderr)
            return 2
    failed = False
    report = {"a": args.a, "b": args.b, "scenario": args.scenario, "results": []}
    with tempfile.TemporaryDirectory(prefix="galay-http-ab-") as work:
        servers = http_servers.Servers(os.path.join(work, "nobin"), work, want=[])
        servers.available = {
            side: (lambda port, cmd=cmd: (shlex.split(cmd.replace("{port}", str(port))
                                                      .replace("{root}", servers.root)), None))
            for side, cmd in (("a", args.a), ("b", args.b))}
        lua = os.path.join(work, "report.lua")
        with open(lua, "w") as f:
            f.write(http_servers.WRK_LUA)
        logdir = os.path.join(work, "logs")
        os.makedirs(logdir)
        seq = 0
        for c in conns:
            ratios, rounds = [], []
            for r in range(args.rounds):
                res, why = one_round(servers, args, c, lua, logdir, seq)
                seq += 2
                if res is None:
                    print(f"c={c} round {r + 1}/{args.rounds}: FAILED: {why}", flush=True)
                    failed = True
                    rounds.append({"error": why})
                    continue
                ratios.append(res["b"] / res["a"])
                rounds.append(res)
                print(f"c={c} round {r + 1}/{args.rounds}: A {res['a']:.3f} us/req, "
                      f"B {res['b']:.3f} us/req, B/A {ratios[-1]:.3f}", flush=True)
            entry = {"connections": c, "rounds": rounds}
            if ratios:
                ratios.sort()
                med = statistics.median(ratios)
                verdict = ("less CPU" if ratios[-1] < 1 else "more CPU" if ratios[0] > 1
                           else "level within noise")
                print(f"c={c}: CPU per request B/A {med:.3f}x [{ratios[0]:.3f}-{ratios[-1]:.3f}] "
                      f"over {len(ratios)} rounds: {verdict}")
                entry.update(median=med, min=ratios[0], max=ratios[-1])
            report["results"].append(entry)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
