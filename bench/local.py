#!/usr/bin/env python3
"""Unix-socket echo: galay's `bench_server --unix` against the hand-written epoll server
(bench/baselines/raw_unix_echo.cpp), 256-byte ping-pong, 100 and 1,000 connections, on each
backend. Server pinned to CPU 1, the load client (raw_unix_echo client, every byte verified) to
CPU 0; galay and the baseline alternate, and the figure is the median over rounds of the same-round
ratio of server CPU per request, with its min-max spread.

    python3 bench/local.py --bindir build/release/bin [--rounds 3] [--secs 3] [--json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def wait_for_socket(proc, path, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if os.path.exists(path):
            return True
        time.sleep(0.02)
    return False


def one_run(server_argv, client, path, conns, size, secs):
    """Start the server, load it, return {"qps", "cpu_per_req_us"} or None on failure."""
    if os.path.exists(path):
        os.unlink(path)
    proc = subprocess.Popen(["taskset", "-c", "1"] + server_argv, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        if not wait_for_socket(proc, path):
            sys.stderr.write(f"local.py: {server_argv[0]} did not start: {proc.stderr.read()}\n")
            return None
        cpu0 = harness.proc_cpu_s(proc.pid)
        out = subprocess.run(["taskset", "-c", "0", client, "client", path, "-c", str(conns),
                              "-s", str(size), "-d", str(secs)],
                             capture_output=True, text=True, timeout=secs + 60)
        cpu1 = harness.proc_cpu_s(proc.pid)
        if out.returncode != 0:
            sys.stderr.write(f"local.py: client failed: {out.stderr}\n")
            return None
        r = json.loads(out.stdout)
        if r["requests"] == 0:
            return None
        # The client's connect phase is outside its timed window and costs the server little.
        return {"qps": r["qps"], "cpu_per_req_us": (cpu1 - cpu0) / r["requests"] * 1e6}
    finally:
        harness.stop(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bindir", default="build/release/bin")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=float, default=3)
    ap.add_argument("--conns", default="100,1000")
    ap.add_argument("--backends", default="io_uring,epoll")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    galay = os.path.join(a.bindir, "bench_server")
    raw = os.path.join(a.bindir, "raw_unix_echo")
    for b in (galay, raw):
        if not os.access(b, os.X_OK):
            sys.exit(f"local.py: {b} not found: build bench_server and raw_unix_echo first")
    harness.raise_nofile()
    results = []
    with tempfile.TemporaryDirectory(prefix="galay-local-") as tmp:
        path = os.path.join(tmp, "echo.sock")
        for backend in a.backends.split(","):
            for conns in [int(c) for c in a.conns.split(",")]:
                ratios, g_runs, r_runs = [], [], []
                load = harness.loadavg()
                for _ in range(a.rounds):
                    g = one_run([galay, "--unix", path, "--backend", backend, "--recv", "copy",
                                 "--buffer", "4096"], raw, path, conns, 256, a.secs)
                    r = one_run([raw, "server", path], raw, path, conns, 256, a.secs)
                    if g and r:
                        ratios.append(g["cpu_per_req_us"] / r["cpu_per_req_us"])
                        g_runs.append(g)
                        r_runs.append(r)
                s = harness.spread(ratios)
                row = {"backend": backend, "conns": conns, "size": 256,
                       "galay_cpu_per_req_us": harness.median_of(
                           [dict(x, ok=True) for x in g_runs], "cpu_per_req_us"),
                       "raw_cpu_per_req_us": harness.median_of(
                           [dict(x, ok=True) for x in r_runs], "cpu_per_req_us"),
                       "galay_qps": harness.median_of([dict(x, ok=True) for x in g_runs], "qps"),
                       "raw_qps": harness.median_of([dict(x, ok=True) for x in r_runs], "qps"),
                       "cpu_ratio": s, "verdict": harness.verdict(s),
                       "goal_1_05": harness.criterion_verdict(s, 1.05) if s else "no data",
                       "load": load}
                results.append(row)
    if a.json:
        print(json.dumps({"study": "unix_echo", "rounds": a.rounds, "secs": a.secs,
                          "results": results}))
        return
    print(f"Unix echo, 256 B ping-pong, {a.rounds} alternating rounds of {a.secs:g} s "
          "(server CPU 1, client CPU 0)")
    print(f"{'backend':9} {'conns':>6} {'galay us/req':>13} {'raw us/req':>11} "
          f"{'galay qps':>10} {'raw qps':>10}  ratio galay/raw [min-max]  load")
    for r in results:
        def f(v, fmt):
            return "n/a" if v is None else format(v, fmt)
        print(f"{r['backend']:9} {r['conns']:>6} {f(r['galay_cpu_per_req_us'], '.2f'):>13} "
              f"{f(r['raw_cpu_per_req_us'], '.2f'):>11} {f(r['galay_qps'], '.0f'):>10} "
              f"{f(r['raw_qps'], '.0f'):>10}  {harness.fmt_spread(r['cpu_ratio'])} "
              f"{r['verdict']}; <=1.05x: {r['goal_1_05']}  {r['load']:.1f}")


if __name__ == "__main__":
    main()
