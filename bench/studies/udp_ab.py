#!/usr/bin/env python3
"""A/B the UDP echo servers: bench_udp's server (per backend) against bench/baselines/raw_udp.

Server pinned to one CPU, bench_udp's client to the other, same client flags for every server,
alternating A B C A B C ... so drift on this shared machine hits every server alike. Prints each
run (received pkt/s, server CPU us per echoed packet, loss) and, per galay backend, the median of
the per-round ratios against raw_udp (and, with --raw-offload, against raw_udp using UDP_GRO and
UDP_SEGMENT like galay's defaults) with their min-max spread.

    bench/studies/udp_ab.py --bin build/release/bin --rounds 3 -- \\
        -c 100 -s 256 -P 10 -d 3 --warmup 1
"""
import argparse
import json
import subprocess
import os
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (spreads)


def start_server(cmd, cpu):
    p = children.popen(["taskset", "-c", str(cpu)] + cmd, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()  # "listening on ..." once the sockets are bound
    if "listening" not in line:
        p.kill()
        sys.exit(f"udp_ab: {cmd[0]} did not start: {line!r}")
    return p


def run_client(binary, port, cpu, server_pid, client_args):
    cmd = ["taskset", "-c", str(cpu), f"{binary}/bench_udp", "client", "-p", str(port),
           "--server-pid", str(server_pid), "--json"] + client_args
    out = children.run(cmd, capture_output=True, text=True)
    try:
        j = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        sys.exit(f"udp_ab: client failed (exit {out.returncode}): {out.stderr}")
    if out.returncode != 0:
        print(f"udp_ab: client exit {out.returncode}: {out.stderr.strip()}", file=sys.stderr)
    return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=19321)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--raw-sockets", type=int, default=1)
    ap.add_argument("--raw-offload", action="store_true",
                    help="also raw_udp with UDP_GRO + UDP_SEGMENT (raw_udp_offload)")
    ap.add_argument("--backends", default="epoll,io_uring",
                    help="galay backends to measure (empty: none)")
    ap.add_argument("--uring-modes", default="",
                    help="also raw_uring_udp in these modes, e.g. mmsg,ms-sqe,ms-linked,ms-mmsg")
    ap.add_argument("--galay-server-args", default="",
                    help="extra flags for bench_udp server, e.g. --no-gso")
    ap.add_argument("client_args", nargs="*")
    a = ap.parse_args()

    servers = {"raw_udp": [f"{a.bin}/raw_udp", str(a.port), str(a.raw_sockets)]}
    if a.raw_offload:
        servers["raw_udp_offload"] = servers["raw_udp"] + ["offload"]
    for m in filter(None, a.uring_modes.split(",")):
        servers[f"uring/{m}"] = [f"{a.bin}/raw_uring_udp", str(a.port), str(a.raw_sockets), m]
    for b in filter(None, a.backends.split(",")):
        servers[f"galay/{b}"] = [f"{a.bin}/bench_udp", "server", "-p", str(a.port), "-w",
                                 str(a.workers), "--backend", b] + a.galay_server_args.split()
    results = {name: [] for name in servers}
    for r in range(a.rounds):
        for name, cmd in servers.items():
            srv = start_server(cmd, a.server_cpu)
            try:
                j = run_client(a.bin, a.port, a.client_cpu, srv.pid, a.client_args)
            finally:
                srv.kill()
                srv.wait()
            results[name].append(j)
            cpu = j.get("server_cpu_us_per_packet")
            print(f"round {r + 1} {name:15s} {j['received_pps']:>12,.0f} pkt/s  "
                  f"server {cpu if cpu is None else f'{cpu:.3f}'} us/pkt  "
                  f"loss {j['loss_percent']:.2f}% ({j['packets_lost']} of {j['packets_sent']})",
                  flush=True)
            time.sleep(0.2)

    print()
    bases = ["raw_udp"] + (["raw_udp_offload"] if a.raw_offload else [])
    for base_name in bases:
        base = results[base_name]
        for name in servers:
            if name in bases:
                continue
            pps = [x["received_pps"] / b["received_pps"] for x, b in zip(results[name], base)]
            cpu = [b["server_cpu_us_per_packet"] / x["server_cpu_us_per_packet"]
                   for x, b in zip(results[name], base)
                   if x.get("server_cpu_us_per_packet") and b.get("server_cpu_us_per_packet")]
            med, lo, hi = harness.median_min_max(pps)
            line = f"{name:15s} pkt/s vs {base_name}: median {med:.3f}x (min {lo:.3f}, max {hi:.3f})"
            if cpu:
                med, lo, hi = harness.median_min_max(cpu)
                line += (f" | server efficiency (base CPU/pkt / ours): median "
                         f"{med:.3f}x ({lo:.3f}-{hi:.3f})")
            print(line)
    for name in servers:
        v = [x["received_pps"] for x in results[name]]
        med, lo, hi = harness.median_min_max(v)
        print(f"{name:15s} received pkt/s: median {med:,.0f} (min {lo:,.0f}, max {hi:,.0f})")


if __name__ == "__main__":
    main()
