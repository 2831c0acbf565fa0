#!/usr/bin/env python3
"""Relay benchmark: TCP proxies between a load client and an echo upstream, compared in one run.

    python3 bench/studies/relay.py --bin build/release/bin --sizes 65536,1048576 -c 16,256 \\
        --rounds 3

Proxies (each a command with {port} and {upstream}):
  galay-splice-uring   tcp_proxy {port} {upstream}                  (GALAY_BACKEND=io_uring)
  galay-splice-epoll   tcp_proxy {port} {upstream}                  (GALAY_BACKEND=epoll)
  galay-copy           tcp_proxy {port} {upstream} --copy           (io_uring, copying path)
  galay-copy-epoll     tcp_proxy {port} {upstream} --copy           (epoll, copying path)
  tokio                tokio_proxy {port} {upstream}                (bench/control/tokio_proxy)
  raw-splice           raw_splice_relay {port} {upstream}           (bench/baselines: the floor)

Per scenario (-s x -c) the proxies run in turn, one after the other, for --rounds rounds (so each
round holds one run of each, and ratios are taken within a round). Each run: a fresh raw_epoll echo
upstream and the raw_client load on --client-cpu, the proxy alone on --server-cpu; the client
keeps one message in flight per connection, verifies every echoed byte, and reports the proxy's
CPU (--server-pid). Printed per run: MiB/s echoed and proxy CPU per MiB echoed (each echoed MiB
crosses the proxy twice); per scenario: each proxy's median ratio to Tokio and to raw-splice with
the min-max spread over the rounds (--refs names the proxies the others are compared with: the
crossover study uses --refs galay-copy,galay-copy-epoll). --json prints one JSON object at the
end; --out writes it.
A client error, a proxy that dies or never accepts: said loudly, and the exit status is 1.
"""
import argparse
import json
import os
import subprocess
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
from harness import (fmt_spread, free_port, loadavg, raise_nofile, resolve,  # noqa: E402
                     round_ratio, run_rounds, start_pinned, stop, verdict)

MIB = 1024 * 1024
PROXIES = {
    "galay-splice-uring": ("tcp_proxy {port} {upstream}", {"GALAY_BACKEND": "io_uring"}),
    "galay-splice-epoll": ("tcp_proxy {port} {upstream}", {"GALAY_BACKEND": "epoll"}),
    "galay-copy": ("tcp_proxy {port} {upstream} --copy", {"GALAY_BACKEND": "io_uring"}),
    "galay-copy-epoll": ("tcp_proxy {port} {upstream} --copy", {"GALAY_BACKEND": "epoll"}),
    "tokio": ("tokio_proxy {port} {upstream}", {}),
    "raw-splice": ("raw_splice_relay {port} {upstream}", {}),
}


def run_one(args, name, size, conns):
    cmd, env = PROXIES[name]
    up_port, px_port = free_port(), free_port()
    rec = {"proxy": name, "size": size, "connections": conns, "ok": False, "problems": []}
    try:
        upstream = start_pinned("raw_epoll {port}", args.client_cpu, args.bin, up_port)
    except RuntimeError as e:
        rec["problems"].append(str(e))
        return rec
    try:
        proxy = start_pinned(cmd.replace("{upstream}", f"127.0.0.1:{up_port}"), args.server_cpu,
                             args.bin, px_port, env=env)
    except RuntimeError as e:
        stop(upstream)
        rec["problems"].append(str(e))
        return rec
    try:
        argv = (["taskset", "-c", str(args.client_cpu)] + resolve("raw_client", args.bin, 0)
                + ["-h", "127.0.0.1", "-p", str(px_port), "-c", str(conns), "-s", str(size),
                   "-d", str(args.duration), "--warmup", str(args.warmup),
                   "--server-pid", str(proxy.pid), "--json"])
        cp = children.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=args.warmup + args.duration + 60)
        lines = [l for l in cp.stdout.splitlines() if l.startswith("{")]
        if cp.returncode != 0 or not lines:
            rec["problems"].append(f"client exit {cp.returncode}: {cp.stderr.strip()[-300:]}")
            return rec
        r = json.loads(lines[-1])
        if r.get("errors"):
            rec["problems"].append(f"client reported {r['errors']} errors")
        if proxy.poll() is not None:
            rec["problems"].append(f"proxy exited with status {proxy.returncode}")
        cpu_s = r.get("server_cpu_s")
        mib = r["successful"] * size / MIB
        rec["mib_s"] = r["qps"] * size / MIB
        rec["cpu_ms_per_mib"] = None if not cpu_s or mib == 0 else 1000 * cpu_s / mib
        rec["errors"] = r.get("errors")
        rec["ok"] = not rec["problems"]
        return rec
    finally:
        stop(proxy)
        stop(upstream)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--sizes", default="65536,1048576", help="message sizes, bytes")
    ap.add_argument("-c", "--connections", default="16,256")
    ap.add_argument("--proxies", default="galay-splice-uring,galay-splice-epoll,galay-copy,tokio,"
                    "raw-splice", help=f"comma-separated, of: {', '.join(PROXIES)}")
    ap.add_argument("--refs", default="tokio,raw-splice",
                    help="proxies every other one is compared with (ratios)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-d", "--duration", type=float, default=3)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--server-cpu", default="1")
    ap.add_argument("--client-cpu", default="0")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    raise_nofile()
    proxies = args.proxies.split(",")
    refs = args.refs.split(",")
    for p in proxies + refs:
        if p not in PROXIES:
            sys.exit(f"relay.py: unknown proxy {p!r} (known: {', '.join(PROXIES)})")
    failed = False
    report = {"load_start": loadavg(), "scenarios": []}
    for size in [int(s) for s in args.sizes.split(",")]:
        for conns in [int(c) for c in args.connections.split(",")]:
            rounds, bad = run_rounds(
                proxies, args.rounds, lambda name, rnd: run_one(args, name, size, conns),
                lambda name, rnd, rec: (f"s={size} c={conns} round {rnd + 1}/{args.rounds} "
                                        f"{name:<19} {rec.get('mib_s', 0):9.1f} MiB/s  "
                                        f"{rec.get('cpu_ms_per_mib') or 0:7.3f} ms CPU/MiB"))
            failed |= bad
            sc = {"size": size, "connections": conns, "rounds": rounds, "ratios": {}}
            for name in proxies:
                for ref in refs:
                    if ref not in proxies or ref == name:
                        continue
                    sc["ratios"][f"{name}/{ref}"] = {
                        "cpu_per_mib": round_ratio(rounds, name, ref, "cpu_ms_per_mib"),
                        "mib_s": round_ratio(rounds, name, ref, "mib_s"),
                    }
            report["scenarios"].append(sc)
            print(f"\n## {size} B messages, {conns} connections")
            print("| proxy vs | CPU per MiB | verdict | MiB/s | verdict |")
            print("|---|---|---|---|---|")
            for key, r in sc["ratios"].items():
                print(f"| {key} | {fmt_spread(r['cpu_per_mib'])} | {verdict(r['cpu_per_mib'])} | "
                      f"{fmt_spread(r['mib_s'])} | "
                      f"{verdict(r['mib_s'], lower_is_better=False, words=('more', 'less'))} |")
            sys.stdout.flush()
    report["load_end"] = loadavg()
    print(f"\nload average: {report['load_start']:.2f} at start, {report['load_end']:.2f} at end")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    if args.json:
        print(json.dumps(report))
    if failed:
        print("relay.py: some runs FAILED (see above)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
