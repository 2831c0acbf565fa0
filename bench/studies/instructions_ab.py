#!/usr/bin/env python3
"""User-space instructions per request of two echo servers, counted by valgrind's cachegrind: what
a change adds to the code a request runs, where CPU time per request is too noisy to show it.

    python3 bench/studies/instructions_ab.py \\
        --a "build/release/bin/bench_server {port} --backend epoll" \\
        --b "build/release-notd/bin/bench_server {port} --backend epoll" -c 100,1000 --rounds 3

For each connection count and round, each server (A then B, B then A in the next round) runs
twice under `valgrind --tool=cachegrind --cache-sim=no` on --server-cpu, a fresh process each time,
loaded by `bench_client` on --client-cpu for --short and then --long seconds (256-byte echoes).
The server is stopped with SIGINT and cachegrind's total of instructions executed ("I refs") read.
Instructions per request = (long run's - short run's) / (long run's requests - short run's): the
start and the stop of the server, the same in both runs, cancel out. The round's ratio is A / B;
printed per connection count as median [min-max] over the rounds.

What it counts: the server's own instructions in user space (its code, libc, the vDSO's clock
reads), none of the kernel's. Under valgrind the server answers several times fewer requests a
second, so its loop turns batch more requests than at full speed: a cost per loop turn weighs
less per request than it would natively; a cost per operation weighs the same. Valgrind 3.19 does not know epoll_pwait2
(the epoll driver falls back to epoll_wait) and cannot run galay's io_uring driver (the server
never answers): measure the epoll backend. Exit status 1 when a run fails, 2 on bad flags or no
valgrind. Standard library only.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402
import harness  # noqa: E402


def one_run(cmd, args, conns, seconds, errlog):
    """(instructions, requests) of one server run, or raises RuntimeError."""
    port = harness.free_port()
    argv = ["taskset", "-c", str(args.server_cpu), "valgrind", "--tool=cachegrind",
            "--cache-sim=no", "--cachegrind-out-file=/dev/null"] + harness.resolve(cmd, args.bin,
                                                                                   port)
    # (stderr to a file: valgrind warns on every unknown system call, and a full pipe would stop
    # the server)
    # (valgrind's own temporary files beside it: killed mid-start, it leaves them behind)
    with open(errlog, "w") as err:
        srv = children.popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                             stdin=subprocess.DEVNULL,
                             env=dict(os.environ, TMPDIR=os.path.dirname(errlog)))
    if not harness.wait_accepting(srv, port, timeout=60):
        children.stop(srv, signal.SIGKILL)
        raise RuntimeError(f"{' '.join(argv)} did not accept on port {port}")
    client = [os.path.join(args.bin, "bench_client"), "-p", str(port), "-c", str(conns),
              "-s", "256", "-d", str(seconds), "--timeout", "60", "--json"]
    cli = children.run(["taskset", "-c", str(args.client_cpu)] + client, capture_output=True,
                       text=True)
    children.stop(srv, signal.SIGINT, timeout=120)
    if cli.returncode != 0 or "{" not in cli.stdout:
        raise RuntimeError(f"bench_client failed: {cli.stderr.strip()[-300:]}")
    res = json.loads(cli.stdout[cli.stdout.index("{"):])
    with open(errlog) as f:
        text = f.read()
    m = re.search(r"I\s+refs:\s+([\d,]+)", text)
    if not m:
        raise RuntimeError(f"{cmd}: cachegrind printed no total: {text.strip()[-300:]}")
    return int(m.group(1).replace(",", "")), res["requests"]


def per_request(cmd, args, conns, errlog):
    i1, q1 = one_run(cmd, args, conns, args.short, errlog)
    i2, q2 = one_run(cmd, args, conns, args.long, errlog)
    if q2 <= q1:
        raise RuntimeError(f"{cmd}: the long run answered no more requests than the short one")
    return (i2 - i1) / (q2 - q1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--a", required=True, help='server A, e.g. "bench_server {port}"')
    ap.add_argument("--b", required=True, help="server B")
    ap.add_argument("--bin", default="build/release/bin",
                    help="directory of bench_client and of bare server names")
    ap.add_argument("-c", "--connections", default="100,1000", help="comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--short", type=float, default=1.5, help="seconds of the short run")
    ap.add_argument("--long", type=float, default=4.5, help="seconds of the long run")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    try:
        conns_list = [int(c) for c in args.connections.split(",")]
    except ValueError:
        ap.error(f"-c: not a list of numbers: {args.connections}")
    if args.rounds < 1 or not 0 < args.short < args.long:
        ap.error("--rounds must be at least 1 and 0 < --short < --long")
    if shutil.which("valgrind") is None:
        ap.error("valgrind not found")
    out = {"a": args.a, "b": args.b, "rounds": args.rounds, "load_before": harness.loadavg(),
           "results": []}
    tmp = tempfile.mkdtemp(prefix="instructions_ab-")
    try:
        return measure(args, conns_list, out, os.path.join(tmp, "server.err"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(args, conns_list, out, errlog):
    failed = False
    for conns in conns_list:
        per = {"a": [], "b": []}
        ratios = []
        for r in range(args.rounds):
            order = ("a", "b") if r % 2 == 0 else ("b", "a")
            try:
                for side in order:
                    per[side].append(per_request(getattr(args, side), args, conns, errlog))
                    print(f"c={conns} round {r + 1} {side.upper()}: {per[side][-1]:.1f} "
                          "instructions per request", flush=True)
            except RuntimeError as e:
                print(f"c={conns} round {r + 1}: {e}", file=sys.stderr)
                failed = True
                per["a"], per["b"] = per["a"][:len(ratios)], per["b"][:len(ratios)]
                continue
            ratios.append(per["a"][-1] / per["b"][-1])
        s = harness.spread(ratios)
        if s is not None:
            print(f"c={conns}: A {statistics.median(per['a']):.1f}, B "
                  f"{statistics.median(per['b']):.1f} instructions per request; A/B "
                  f"{harness.fmt_spread(s)} over {len(ratios)} rounds", flush=True)
        out["results"].append({"connections": conns, "a": per["a"], "b": per["b"],
                               "ratio": s})
    out["load_after"] = harness.loadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
