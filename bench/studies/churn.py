#!/usr/bin/env python3
"""Connection churn A/B: clients that connect, do one round trip and close, as fast as they can.

    python3 bench/studies/churn.py --a "bench_latency server -p {port} --backend io_uring" \\
        --b "raw_uring {port}" [--pairs 3] [-c 50] [-d 2] [-s 256]
    python3 bench/studies/churn.py --a "bench_latency server -p {port}" --b "raw_epoll {port}" \\
        -n 1000000
    python3 bench/studies/churn.py -c 1000 \\
        --a "bench_server {port} --backend io_uring --threads 2 --listen sharded" \\
        --b "raw_uring {port} --threads 2"          # SO_REUSEPORT listeners on 2 workers

Runs A, B, A, B, ... (B, A on even pairs: ABBA), each server on a fresh port pinned to CPU 0 and
`bench_latency churn` pinned to CPU 1, with --server-pid so that the client reports the server's
CPU per connection and its open fds before and after the run (/proc/PID/fd; raw_uring keeps its
connections in io_uring's direct-descriptor table, which /proc does not show). Prints per run
connections/s, p99 connect+echo+close time, server CPU per connection, errors and leaked fds, then
the A/B ratios as median [min-max] over the pairs with a verdict (faster / slower only when the
whole spread is on one side of 1.00). Any error, leaked fd or failed run: exit status 1.

Each run also records the kernel's count of TIME_WAIT sockets before and after it
(/proc/net/sockstat, `tw`): the clients close first, so their sockets wait there, and once the
table is full (net.ipv4.tcp_max_tw_buckets) connect's port search slows the client. That moves
connections/s, not the server's CPU per connection (the search runs in the client's connect()),
and each pair's two runs meet the same table; the summary gives the range seen.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402


def label(cmd):
    return harness.label_of(cmd.replace("-p {port}", ""))


def time_wait_sockets():
    """The kernel's count of TCP sockets in TIME_WAIT (None where /proc/net/sockstat is absent)."""
    try:
        with open("/proc/net/sockstat") as f:
            for line in f:
                if line.startswith("TCP:"):
                    words = line.split()
                    return int(words[words.index("tw") + 1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def run_one(args, server_cmd, client=None):
    port = harness.free_port()
    rec = {"server": label(server_cmd), "ok": False, "problems": [],
           "time_wait_before": time_wait_sockets()}
    srv = children.popen(["taskset", "-c", str(args.server_cpu)]
                         + harness.resolve(server_cmd, args.bin, port),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if not harness.wait_accepting(srv, port, 10.0):
            rec["problems"].append(f"server did not accept on port {port}")
            return rec
        argv = (["taskset", "-c", str(args.client_cpu),
                 client or os.path.join(args.bin, "bench_latency"), "churn", "-h", "127.0.0.1", "-p", str(port), "-c", str(args.clients),
                 "-s", str(args.size), "--server-pid", str(srv.pid), "--json"]
                + (["-n", str(args.connections)] if args.connections
                   else ["-d", str(args.duration), "--warmup", str(args.warmup)]))
        try:
            cp = children.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=args.duration + args.warmup + 600)
        except subprocess.TimeoutExpired:
            rec["problems"].append("client timed out")
            return rec
        lines = [l for l in cp.stdout.splitlines() if l.startswith("{")]
        if lines:
            rec.update(json.loads(lines[-1]))
        if cp.returncode != 0:
            rec["problems"].append(f"client exit {cp.returncode}: {cp.stderr.strip()[-300:]}")
        if srv.poll() is not None:
            rec["problems"].append(f"server exited during the run ({srv.returncode})")
        rec["ok"] = not rec["problems"] and bool(lines)
        rec["time_wait_after"] = time_wait_sockets()
        return rec
    finally:
        harness.stop(srv)
        rec["server_stderr"] = srv.stderr.read().strip()[-500:]


def ab(args, a_cmd, b_cmd, log=print):
    runs = {"A": [], "B": []}
    clients = {"A": getattr(args, "a_client", None), "B": getattr(args, "b_client", None)}
    for pair in range(1, args.pairs + 1):
        order = [("A", a_cmd), ("B", b_cmd)]
        if pair % 2 == 0:
            order.reverse()
        for side, cmd in order:
            rec = run_one(args, cmd, clients[side])
            rec["pair"] = pair
            runs[side].append(rec)
            if rec["ok"]:
                log(f"  pair {pair} {side} {rec['server']}: {rec['conns_per_sec']:,.0f} conn/s, "
                    f"p99 {rec['latency_us']['p99']:.0f} us, server CPU/conn "
                    f"{rec.get('server_cpu_us_per_conn') or 0:.2f} us, client CPU/conn "
                    f"{rec.get('client_cpu_us_per_conn') or 0:.2f} us, errors {rec['errors']}, "
                    f"fds {rec.get('server_fds_before')}->{rec.get('server_fds_after')}, "
                    f"TIME_WAIT {rec['time_wait_before']}->{rec.get('time_wait_after')}")
            else:
                log(f"  pair {pair} {side} {rec['server']}: FAILED: {'; '.join(rec['problems'])}")
    pairs = [(a, b) for a, b in zip(runs["A"], runs["B"]) if a["ok"] and b["ok"]]
    rate = harness.spread([a["conns_per_sec"] / b["conns_per_sec"] for a, b in pairs
                            if b["conns_per_sec"]])
    cpu = harness.spread([a["server_cpu_us_per_conn"] / b["server_cpu_us_per_conn"]
                           for a, b in pairs if a.get("server_cpu_us_per_conn")
                           and b.get("server_cpu_us_per_conn")])
    client_cpu = harness.spread([a["client_cpu_us_per_conn"] / b["client_cpu_us_per_conn"]
                                 for a, b in pairs if a.get("client_cpu_us_per_conn")
                                 and b.get("client_cpu_us_per_conn")])
    p99 = harness.spread([a["latency_us"]["p99"] / b["latency_us"]["p99"] for a, b in pairs
                           if b["latency_us"]["p99"]])
    med = lambda side, f: harness.spread([f(r) for r in runs[side] if r["ok"]])  # noqa: E731
    tw = [t for side in runs.values() for r in side
          for t in (r.get("time_wait_before"), r.get("time_wait_after")) if t is not None]
    return {"a": label(a_cmd), "b": label(b_cmd), "pairs_ok": len(pairs),
            "rate_ratio": rate, "cpu_ratio": cpu, "client_cpu_ratio": client_cpu,
            "p99_ratio": p99,
            "rate_a": med("A", lambda r: r["conns_per_sec"]),
            "rate_b": med("B", lambda r: r["conns_per_sec"]),
            "p99_a": med("A", lambda r: r["latency_us"]["p99"]),
            "p99_b": med("B", lambda r: r["latency_us"]["p99"]),
            "errors": sum(r.get("errors", 0) for s in runs.values() for r in s),
            "leaked_fds": sum(r.get("leaked_fds", 0) for s in runs.values() for r in s),
            "failed_runs": sum(not r["ok"] for s in runs.values() for r in s),
            "time_wait": [min(tw), max(tw)] if tw else None,
            "runs": runs}


def tw_range(tw):
    return "-" if not tw else f"{tw[0]:,}-{tw[1]:,}"


def summary_lines(rows):
    lines = ["| A vs B | pairs | conn/s A | conn/s B | conn/s A/B | server CPU/conn A/B "
             "(lower is better) | client CPU/conn A/B | p99 A us | p99 B us | errors | "
             "leaked fds | TIME_WAIT |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in rows:
        m = lambda x: "-" if x is None else f"{x['median']:,.0f}"  # noqa: E731
        lines.append(
            f"| {s['a']} vs {s['b']} | {s['pairs_ok']} | {m(s['rate_a'])} | {m(s['rate_b'])} | "
            f"{harness.fmt_spread(s['rate_ratio'])} "
            f"{harness.verdict(s['rate_ratio'], lower_is_better=False)} | "
            f"{harness.fmt_spread(s['cpu_ratio'])} "
            f"{harness.verdict(s['cpu_ratio'], words=('less CPU', 'more CPU'))} | "
            f"{harness.fmt_spread(s.get('client_cpu_ratio'))} "
            f"{harness.verdict(s.get('client_cpu_ratio'), words=('less CPU', 'more CPU'))} | "
            f"{m(s['p99_a'])} | {m(s['p99_b'])} | {s['errors']} | {s['leaked_fds']} | "
            f"{tw_range(s.get('time_wait'))} |")
    return lines


def add_arguments(ap):
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("-c", "--clients", type=int, default=50, help="concurrent clients")
    ap.add_argument("-d", "--duration", type=float, default=2.0)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("-n", "--connections", type=int, default=0,
                    help="exactly this many connections per run instead of -d")
    ap.add_argument("-s", "--size", type=int, default=256)
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--a", default="bench_latency server -p {port} --backend io_uring")
    ap.add_argument("--b", default="raw_uring {port}")
    ap.add_argument("--a-client", help="the churn client (a bench_latency) for A's runs; default: "
                    "the one in --bin (a client-side change is A/B'd by its CPU per connection)")
    ap.add_argument("--b-client", help="the same for B's runs")
    ap.add_argument("--out", help="JSON output")
    add_arguments(ap)
    args = ap.parse_args()
    if not shutil.which("taskset"):
        sys.exit("churn.py: taskset (util-linux) is required for CPU pinning")
    s = ab(args, args.a, args.b, log=lambda x: print(x, flush=True))
    print()
    print("\n".join(summary_lines([s])))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"config": vars(args), "summary": s}, f, indent=1)
    bad = s["errors"] or s["leaked_fds"] or s["failed_runs"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
