#!/usr/bin/env python3
"""HTTP CPU-per-request A/B of two server commands, interleaved: both servers run at once, each
loaded by its own `wrk -t1`, and the two wrks take turns.

    python3 bench/http_ab.py --a "/tmp/old/http_server {port} --backend epoll" \\
        --b "build/release/bin/http_server {port} --backend epoll" -c 1000 --rounds 8

A round: both servers start on a fresh port each, pinned to --server-cpu; a 1 s wrk warms each
up; then one wrk per server is started on --client-cpu and only one runs at a time (the other is
stopped with SIGSTOP), switching every --slice seconds until each has had -d seconds. Each
server's CPU time (every thread of every process of its tree, from /proc schedstat) over the
turns, divided by the requests its wrk completed, is its CPU per request; the round's ratio is
B / A. Both servers see the same moments of a shared machine, so slow drifts cancel out; what is
left is the round-to-round spread, printed with the median (a verdict only when the whole spread
is on one side of 1.00). This is how the README's A/Bs of two builds of http_server were made.

`{port}` in a command is replaced by its port; `--path` is the URL path requested (a server
serving a file needs its own flags for the root). A server that does not start, a wrk that fails
or reports socket errors or non-2xx answers: the round is reported and not used, exit status 1.
Bad flags or no wrk: exit 2. Standard library only.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import echo  # noqa: E402
import http as bench_http  # noqa: E402


def wrk(args, conns, seconds, url):
    return ["taskset", "-c", args.client_cpu, "wrk", "-t1", f"-c{conns}", f"-d{seconds}",
            "--timeout", "10s", url]


def wrk_problem(out):
    """Why a wrk run's figures cannot be used, or None."""
    if re.search(r"(\d+) requests in", out) is None:
        return "wrk printed no request count"
    for pattern in (r"Socket errors:.*", r"Non-2xx or 3xx responses: \d+"):
        m = re.search(pattern, out)
        if m:
            return "wrk: " + m.group(0).strip()
    return None


def one_round(args, conns):
    """{"a": us, "b": us} CPU per request, or (None, why)."""
    procs = {}
    try:
        for side, cmd in (("a", args.a), ("b", args.b)):
            port = echo.free_port()
            argv = shlex.split(cmd.replace("{port}", str(port)))
            p = subprocess.Popen(["taskset", "-c", args.server_cpu] + argv,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 stdin=subprocess.DEVNULL, preexec_fn=bench_http.raise_nofile)
            procs[side] = (p, f"http://127.0.0.1:{port}{args.path}")
            if not echo.wait_accepting(p, port, 10.0):
                return None, f"server {side} did not accept on port {port} (exit {p.poll()})"
        for side, (p, url) in procs.items():
            r = subprocess.run(wrk(args, conns, 1, url), capture_output=True, text=True)
            why = wrk_problem(r.stdout)
            if r.returncode != 0 or why:
                return None, f"warm-up of {side}: {why or r.stderr.strip()[-200:]}"
        cpu0 = {s: bench_http.tree_cpu_s(p.pid) for s, (p, _) in procs.items()}
        total = int(args.duration * 2) + 60  # wrk's own -d: longer than the turns
        loads = {}
        for side, (_, url) in procs.items():
            loads[side] = subprocess.Popen(wrk(args, conns, total, url), stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)
            if side == "b":
                os.kill(loads[side].pid, signal.SIGSTOP)
        turns = 2 * max(1, round(args.duration / args.slice))
        running = "a"
        for t in range(turns):
            time.sleep(args.slice)
            if t == turns - 1:
                break
            other = "b" if running == "a" else "a"
            os.kill(loads[running].pid, signal.SIGSTOP)
            os.kill(loads[other].pid, signal.SIGCONT)
            running = other
        outs = {}
        for side, w in loads.items():
            bench_http.interrupt_main_thread(w.pid)  # wrk prints its summary on SIGINT
            if side != running:
                os.kill(w.pid, signal.SIGCONT)
        for side, w in loads.items():
            outs[side] = w.communicate(timeout=30)[0]
        cpu1 = {s: bench_http.tree_cpu_s(p.pid) for s, (p, _) in procs.items()}
        res = {}
        for side in ("a", "b"):
            why = wrk_problem(outs[side])
            if why:
                return None, f"server {side}: {why}"
            n = int(re.search(r"(\d+) requests in", outs[side]).group(1))
            if n == 0:
                return None, f"server {side}: no request completed"
            res[side] = (cpu1[side] - cpu0[side]) / n * 1e6
        return res, None
    finally:
        for p, _ in procs.values():
            echo.stop(p, signal.SIGTERM, 10)


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
    ap.add_argument("--path", default="/", help="URL path (default /)")
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
    if "{port}" not in args.a or "{port}" not in args.b:
        ap.error("--a and --b must contain {port}")
    if not args.path.startswith("/"):
        ap.error("--path must start with /")
    if shutil.which("wrk") is None:
        print("http_ab: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    for cmd in (args.a, args.b):
        exe = shlex.split(cmd)[0]
        if shutil.which(exe) is None:
            print(f"http_ab: {exe}: not found or not executable", file=sys.stderr)
            return 2
    failed = False
    report = {"a": args.a, "b": args.b, "path": args.path, "results": []}
    for c in conns:
        ratios, rounds = [], []
        for r in range(args.rounds):
            res, why = one_round(args, c)
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
