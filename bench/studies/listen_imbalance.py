#!/usr/bin/env python3
"""How evenly each listening mode spreads a few long-lived heavy connections over the workers.

    python3 bench/studies/listen_imbalance.py --bin build/release/bin --rounds 5 -c 8 -d 3

For each round and each mode (sharded: a SO_REUSEPORT listener per worker, the kernel hashes each
connection; dispatch: one acceptor gives each connection to the worker with the fewest), it starts
`bench_server --threads W --listen MODE --pin --json` on a fresh port, runs `bench_client -c C -P
P` against it for D seconds (C long-lived connections, each kept busy with P messages in flight),
stops the server with SIGTERM and reads its per-worker figures: connections and echoes. It prints
per round the split of connections and of echoes, and per mode the imbalance (the busiest
worker's share over a fair 1/W share: 1.00 is even) as a median with its min-max over the rounds,
and how many rounds were split exactly evenly. Modes alternate within a round.

The server's workers are pinned one per CPU of --server-cpus, the client to --client-cpu: on a
2-core machine the client shares a core with a worker, so echo counts are informative (they also
show how the scheduler shares a core); connection counts are exact. Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (free_port, resolve, wait_accepting, stop, spread)


def run_mode(args, mode, logdir, seq):
    port = harness.free_port()
    srv_argv = ["taskset", "-c", args.server_cpus] + harness.resolve(
        f"bench_server {port} --threads {args.workers} --listen {mode} --pin --json "
        f"--backend {args.backend}", args.bin, port)
    out_path = os.path.join(logdir, f"server-{seq}-{mode}.out")
    with open(out_path, "w") as out:
        server = children.popen(srv_argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            if not harness.wait_accepting(server, port, 10.0):
                raise RuntimeError(f"{mode}: bench_server did not accept on port {port}")
            cli_argv = ["taskset", "-c", args.client_cpu] + harness.resolve(
                f"bench_client -p {port} -c {args.connections} -s {args.size} "
                f"-P {args.pipeline} -d {args.duration} --json", args.bin, port)
            cp = children.run(cli_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=args.duration + 60)
            if cp.returncode != 0:
                raise RuntimeError(f"{mode}: bench_client exited {cp.returncode}: {cp.stderr}")
        finally:
            rc = harness.stop(server)
    if rc != 0:
        raise RuntimeError(f"{mode}: bench_server exited {rc} (see {out_path})")
    with open(out_path) as f:
        lines = [l for l in f.read().splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"{mode}: no JSON from bench_server (see {out_path})")
    stats = json.loads(lines[-1])
    conns = [w["connections"] for w in stats["workers"]]
    echoes = [w["echoes"] for w in stats["workers"]]
    return {"mode": mode, "connections": conns, "echoes": echoes,
            "conn_imbalance": imbalance(conns), "echo_imbalance": imbalance(echoes)}


def imbalance(values):
    """The busiest worker's share over an even share (1.0 = perfectly even)."""
    total = sum(values)
    return max(values) * len(values) / total if total else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--bin", default="build/release/bin", help="directory of the binaries")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-w", "--workers", type=int, default=2)
    ap.add_argument("-c", "--connections", type=int, default=8)
    ap.add_argument("-s", "--size", type=int, default=256)
    ap.add_argument("-P", "--pipeline", type=int, default=4, help="messages in flight per connection")
    ap.add_argument("-d", "--duration", type=float, default=3.0)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--server-cpus", default="0,1")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--out", help="write every figure as JSON here")
    args = ap.parse_args()

    runs = []
    logdir = harness.temp_dir("listen-imbalance")
    try:
        for r in range(args.rounds):
            modes = ("sharded", "dispatch") if r % 2 == 0 else ("dispatch", "sharded")
            for mode in modes:
                rec = run_mode(args, mode, logdir, r)
                rec["round"] = r
                runs.append(rec)
                print(f"round {r} {mode:8s}  connections {'/'.join(map(str, rec['connections'])):>7s}"
                      f"  echoes {'/'.join(f'{e:,}' for e in rec['echoes'])}"
                      f"  (busiest/even: connections {rec['conn_imbalance']:.2f}, "
                      f"echoes {rec['echo_imbalance']:.2f})", flush=True)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"listen_imbalance: {e}", file=sys.stderr)
        return 1
    summary = {}
    print(f"\n{args.connections} connections x -P {args.pipeline} on {args.workers} workers, "
          f"{args.rounds} rounds (busiest worker's share / even share; 1.00 = even)")
    for mode in ("sharded", "dispatch"):
        mine = [r for r in runs if r["mode"] == mode]
        c = harness.spread([r["conn_imbalance"] for r in mine])
        e = harness.spread([r["echo_imbalance"] for r in mine])
        even = sum(1 for r in mine if max(r["connections"]) == min(r["connections"]))
        summary[mode] = {"connections": c, "echoes": e, "rounds_even": even}
        print(f"  {mode:8s} connections {c['median']:.2f} [{c['min']:.2f}-{c['max']:.2f}]"
              f"   echoes {e['median']:.2f} [{e['min']:.2f}-{e['max']:.2f}]"
              f"   evenly split in {even}/{len(mine)} rounds")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "runs": runs, "summary": summary}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
