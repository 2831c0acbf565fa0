#!/usr/bin/env python3
"""TCP echo A/B harness: runs two echo servers alternately against a load client and compares them.

    python3 bench/studies/echo.py --bin build/release/bin \\
        --a "bench_server {port} --backend io_uring" --b "raw_uring {port}" \\
        --client bench_client -c 100,1000 -s 256 --pairs 3

For every scenario (each -c x -s combination) it runs A, B, A, B, ... (--pairs times), each run on
a fresh free port: the server pinned to CPU 0 and the client to CPU 1 (taskset), the server's idle
RSS taken once it accepts connections, then the client run with
`--warmup W -d D --server-pid PID --json`, the server's peak RSS sampled during the run, and the
server stopped. It prints per run QPS, p99 latency, server CPU per request and RSS per connection,
then per scenario the median A/B ratio of QPS and of server CPU per request with the min-max
spread over the pairs, and writes everything to a JSON file (--out).

Any client exit status != 0, any client-reported error, a server that dies or never accepts: the
harness says so loudly and exits 1 at the end. Ratios from failed runs are not used.

The machine is shared, so each run also records the CPU used on the two pinned CPUs by the server,
the client and everything else ("others"). A pair in which others exceeded --max-others percent is
run again (up to --retries times); if it stays busy it is kept and marked contaminated.

Commands are shell-like strings; `{port}` is replaced by the run's port and a first word found in
--bin is run from there. Extra client flags go through --client-args (write `--client-args="-P 16"`
so argparse does not take "-P" for an option of its own). Standard library only.
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
from harness import (RssSampler, children_cpu_s, cpu_busy_s, fmt_spread,  # noqa: E402
                     free_port, label_of, median_of, proc_cpu_s, proc_status, resolve, spread,
                     stop, wait_accepting)


def run_one(args, side, server_cmd, client_cmd, conns, size, logdir, seq):
    port = free_port()
    tag = f"{seq:03d}-{side}-c{conns}-s{size}"
    rec = {"side": side, "server": label_of(server_cmd), "client": label_of(client_cmd),
           "connections": conns, "message_size": size, "port": port, "ok": False, "problems": []}
    srv_argv = ["taskset", "-c", str(args.server_cpu)] + resolve(server_cmd, args.bin, port)
    srv_out = open(os.path.join(logdir, tag + ".server.log"), "w")
    # taskset execs the server, so proc.pid is the server's pid (for /proc/PID/stat and status).
    server = children.popen(srv_argv, stdout=srv_out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    rec["server_pid"] = server.pid
    try:
        if not wait_accepting(server, port, args.start_timeout):
            rec["problems"].append(f"server did not accept connections on port {port} "
                                   f"(exit status {server.poll()}): {' '.join(srv_argv)}")
            return rec
        time.sleep(0.2)  # let the accept of our probe settle before taking the idle figure
        rec["rss_idle_kb"] = proc_status(server.pid, "VmRSS")

        cli_argv = (["taskset", "-c", str(args.client_cpu)] + resolve(client_cmd, args.bin, port)
                    + ["-h", "127.0.0.1", "-p", str(port), "-c", str(conns), "-s", str(size),
                       "-d", str(args.duration), "--warmup", str(args.warmup),
                       "--server-pid", str(server.pid), "--json"]
                    + shlex.split(args.client_args))
        rec["client_argv"] = cli_argv
        sampler = RssSampler(server.pid)
        sampler.start()
        # To tell a contaminated run from a real difference: CPU time of the client (the only
        # child reaped during the run), of the server, and of everything else on the two CPUs.
        pinned = set(str(args.server_cpu).split(",")) | set(str(args.client_cpu).split(","))
        t0, busy0, srv0 = time.monotonic(), cpu_busy_s(pinned), proc_cpu_s(server.pid)
        ch0 = children_cpu_s()
        cli_err_path = os.path.join(logdir, tag + ".client.log")
        with open(cli_err_path, "w") as cli_err:
            try:
                cp = children.run(cli_argv, stdout=subprocess.PIPE, stderr=cli_err, text=True,
                                  timeout=args.warmup + args.duration + 120)
                rc, out = cp.returncode, cp.stdout
            except subprocess.TimeoutExpired:
                rc, out = "timeout", ""
        sampler.done.set()
        sampler.join()
        ch1 = children_cpu_s()
        wall, busy1, srv1 = time.monotonic() - t0, cpu_busy_s(pinned), proc_cpu_s(server.pid)
        client_cpu = ch1 - ch0
        rec["client_cpu_pct"] = 100 * client_cpu / wall
        if srv0 is not None and srv1 is not None:
            rec["server_cpu_pct"] = 100 * (srv1 - srv0) / wall
            rec["others_cpu_pct"] = max(0.0, 100 * ((busy1 - busy0) - (srv1 - srv0) - client_cpu)
                                        / wall)
        rec["client_exit"] = rc
        rec["rss_loaded_kb"] = sampler.peak
        rec["rss_hwm_kb"] = proc_status(server.pid, "VmHWM")
        if rc != 0:
            rec["problems"].append(f"client exit status {rc} (log: {cli_err_path})")
        lines = [l for l in out.splitlines() if l.startswith("{")]
        if not lines:
            rec["problems"].append(f"client printed no JSON (log: {cli_err_path})")
            return rec
        r = json.loads(lines[-1])
        rec["result"] = r
        if r.get("errors", 0) != 0:
            rec["problems"].append(f"client reported {r['errors']} errors (log: {cli_err_path})")
        if server.poll() is not None:
            rec["problems"].append(f"server exited during the run with status {server.returncode}")
        rec["qps"] = r.get("qps")
        rec["p99_us"] = (r.get("latency_us") or {}).get("p99")
        rec["cpu_us_per_req"] = r.get("server_cpu_us_per_req")
        if rec["rss_idle_kb"] is not None and rec["rss_loaded_kb"] is not None:
            rec["rss_per_conn_b"] = (rec["rss_loaded_kb"] - rec["rss_idle_kb"]) * 1024 / conns
        rec["ok"] = not rec["problems"]
        return rec
    finally:
        rec["server_exit"] = stop(server)
        srv_out.close()


def fmt(v, spec, unit=""):
    return "-" if v is None else format(v, spec) + unit


def fmt_ratio(s):
    return "-" if s is None else fmt_spread(s)


def print_run(rec, pair, pairs):
    head = (f"c={rec['connections']:<5} s={rec['message_size']:<6} pair {pair}/{pairs} "
            f"{rec['side']}: {rec['server'][:34]:<34}")
    if "result" in rec:
        print(f"{head} qps {fmt(rec.get('qps'), ',.0f'):>10}  p99 {fmt(rec.get('p99_us'), '.1f')}us"
              f"  cpu/req {fmt(rec.get('cpu_us_per_req'), '.3f')}us"
              f"  rss idle {fmt(rec.get('rss_idle_kb'), ',')}kB loaded "
              f"{fmt(rec.get('rss_loaded_kb'), ',')}kB ({fmt(rec.get('rss_per_conn_b'), ',.0f')} B/conn)"
              f"  errors {rec['result'].get('errors')}  cpu% srv/cli/others "
              f"{fmt(rec.get('server_cpu_pct'), '.0f')}/{fmt(rec.get('client_cpu_pct'), '.0f')}/"
              f"{fmt(rec.get('others_cpu_pct'), '.0f')}", flush=True)
    for p in rec["problems"]:
        print(f"{head} *** FAILED: {p}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--bin", default="build/release/bin", help="directory of the binaries")
    ap.add_argument("--a", required=True, help='server A command, e.g. "raw_uring {port}"')
    ap.add_argument("--b", required=True, help="server B command")
    ap.add_argument("--client", default="bench_client", help="load client for both sides")
    ap.add_argument("--client-a", help="client for side A (default --client)")
    ap.add_argument("--client-b", help="client for side B (default --client)")
    ap.add_argument("--client-args", default="", help='extra client flags, e.g. --client-args="-P 16"')
    ap.add_argument("-c", "--connections", default="100", help="comma-separated list")
    ap.add_argument("-s", "--sizes", default="256", help="comma-separated message sizes in bytes")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--order", choices=("abab", "abba"), default="abab",
                    help="run order within pairs: A B A B ... or A B B A A B ...")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("-d", "--duration", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 pair, 0.5 s warm-up, 2 s")
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--max-others", type=float, default=25.0,
                    help="repeat a pair when other processes used more than this %% of CPU on the "
                         "two pinned CPUs during one of its runs (default 25)")
    ap.add_argument("--retries", type=int, default=1, help="repeats of a contaminated pair")
    ap.add_argument("--start-timeout", type=float, default=10.0)
    ap.add_argument("--out", help="JSON output (default bench/results/echo-<time>.json)")
    ap.add_argument("--logs", help="directory for server/client logs "
                    "(default: bench/results/echo-logs-<time>)")
    args = ap.parse_args()
    if args.quick:
        args.pairs, args.warmup, args.duration = 1, 0.5, 2.0
    if not shutil.which("taskset"):
        sys.exit("echo.py: taskset (util-linux) is required for CPU pinning")
    client_a, client_b = args.client_a or args.client, args.client_b or args.client
    conns_list = [int(x) for x in args.connections.split(",") if x]
    sizes = [int(x) for x in args.sizes.split(",") if x]
    logdir = args.logs or os.path.join(BENCH, "results",
                                       time.strftime("echo-logs-%Y%m%d-%H%M%S"))
    os.makedirs(logdir, exist_ok=True)
    out = args.out or os.path.join(BENCH, "results",
                                   time.strftime("echo-%Y%m%d-%H%M%S.json"))

    label_a, label_b = label_of(args.a), label_of(args.b)
    if client_a != client_b:
        label_a += f" <- {label_of(client_a)}"
        label_b += f" <- {label_of(client_b)}"
    print(f"A = {label_a}\nB = {label_b}\nclient args: -d {args.duration} --warmup {args.warmup} "
          f"{args.client_args}; server on CPU {args.server_cpu}, client on CPU {args.client_cpu}; "
          f"logs in {logdir}", flush=True)

    runs, summary, failures, seq = [], [], 0, 0
    for size in sizes:
        for conns in conns_list:
            scenario_runs = {"A": [], "B": []}
            for pair in range(1, args.pairs + 1):
                for attempt in range(args.retries + 1):
                    recs = {}
                    order = (("A", args.a, client_a), ("B", args.b, client_b))
                    if args.order == "abba" and pair % 2 == 0:
                        order = order[::-1]  # cancels a linear drift of the machine over time
                    for side, srv, cli in order:
                        seq += 1
                        recs[side] = rec = run_one(args, side, srv, cli, conns, size, logdir, seq)
                        rec["pair"] = pair
                        runs.append(rec)
                        print_run(rec, pair, args.pairs)
                    # Another job on the shared CPUs skews one side of the pair: measure it again.
                    others = max(r.get("others_cpu_pct") or 0 for r in recs.values())
                    busy = others > args.max_others and all(r["ok"] for r in recs.values())
                    for r in recs.values():
                        r["contaminated"] = busy
                    if not busy:
                        break
                    print(f"    pair {pair}: other processes used {others:.0f}% CPU on the pinned "
                          f"CPUs (> {args.max_others:g}%)"
                          + (", repeating the pair" if attempt < args.retries
                             else "; keeping it, marked contaminated"), flush=True)
                for side in "AB":
                    recs[side]["used"] = True  # runs of repeated pairs stay in the JSON, unused
                    scenario_runs[side].append(recs[side])
                    failures += 0 if recs[side]["ok"] else 1
            qps_ratios, cpu_ratios = [], []
            for a, b in zip(scenario_runs["A"], scenario_runs["B"]):
                if not (a["ok"] and b["ok"]):
                    continue
                if a.get("qps") and b.get("qps"):
                    qps_ratios.append(a["qps"] / b["qps"])
                if a.get("cpu_us_per_req") and b.get("cpu_us_per_req"):
                    cpu_ratios.append(a["cpu_us_per_req"] / b["cpu_us_per_req"])
            s = {"connections": conns, "message_size": size, "client_args": args.client_args,
                 "pairs_ok": len(qps_ratios),
                 "pairs_contaminated": sum(r["contaminated"] for r in scenario_runs["A"]),
                 "qps_ratio": spread(qps_ratios),
                 "cpu_per_req_ratio": spread(cpu_ratios)}
            for side in "AB":
                rs = scenario_runs[side]
                s[side] = {k: median_of(rs, k) for k in
                           ("qps", "p99_us", "cpu_us_per_req", "rss_idle_kb", "rss_loaded_kb",
                            "rss_per_conn_b")}
            summary.append(s)

    print(f"\nA = {label_a}\nB = {label_b}\nmedians over {args.pairs} alternating pairs; "
          f"ratio = A/B, median [min-max]; CPU/req = server CPU per request (lower is better)")
    hdr = ("| conns | size | QPS A | QPS B | QPS A/B | CPU/req A us | CPU/req B us | CPU/req A/B "
           "| p99 A us | p99 B us | RSS/conn A | RSS/conn B |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for s in summary:
        a, b = s["A"], s["B"]
        print(f"| {s['connections']} | {s['message_size']} | {fmt(a['qps'], ',.0f')} "
              f"| {fmt(b['qps'], ',.0f')} | {fmt_ratio(s['qps_ratio'])} "
              f"| {fmt(a['cpu_us_per_req'], '.3f')} | {fmt(b['cpu_us_per_req'], '.3f')} "
              f"| {fmt_ratio(s['cpu_per_req_ratio'])} | {fmt(a['p99_us'], '.0f')} "
              f"| {fmt(b['p99_us'], '.0f')} | {fmt(a['rss_per_conn_b'], ',.0f', ' B')} "
              f"| {fmt(b['rss_per_conn_b'], ',.0f', ' B')} |"
              + (f" ({s['pairs_contaminated']} pair(s) contaminated)" if s["pairs_contaminated"]
                 else ""))

    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"config": {**vars(args), "label_a": label_a, "label_b": label_b,
                              "client_a": client_a, "client_b": client_b,
                              "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              "kernel": os.uname().release},
                   "summary": summary, "runs": runs}, f, indent=1)
    print(f"\nwrote {out}")
    if failures:
        print(f"\n*** {failures} run(s) FAILED: see the lines marked FAILED above ***",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
