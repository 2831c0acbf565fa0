#!/usr/bin/env python3
"""Work per HTTP request, counted: user-space instructions and L1d misses per request of each
server under load, from valgrind's cachegrind. Deterministic where bench/studies/http_servers.py's
timings are not (on a shared VM they move 5-10% from round to round): a change of a few hundred
instructions or a few cache lines per request shows here in one run.

    python3 bench/studies/http_count.py [--bin build/release/bin] [--servers galay-epoll,raw_http]
                                [-c 1000] [-d 8] [--out FILE.json]

Each server runs under `valgrind --tool=cachegrind --cache-sim=yes` on CPU 0; `wrk -t1` loads it
with GET / from CPU 1 for `-d` seconds; then SIGINT, and the counts are divided by the requests
the server says it answered (its exit line). User space only: the kernel's share is not seen.

Servers: galay-epoll (http_server --backend epoll) and raw_http (bench/baselines/raw_http.cpp, the
floor). galay on io_uring cannot be counted: valgrind does not know io_uring's system calls.
valgrind simulates the host's last-level cache when it has one, whatever --LL says, so only the
L1d figures are informative (48 KiB here); L1d misses stand for the cache lines a request
touches that other requests evicted.

Exit status: 0; 1 when a server did not start, answered nothing or its counts could not be read;
2 for bad flags or a missing valgrind/wrk/server binary (one line saying which).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (free_port, wait_accepting, stop)

SERVERS = {
    "galay-epoll": lambda b, port: [os.path.join(b, "http_server"), str(port), "--backend", "epoll"],
    "raw_http": lambda b, port: [os.path.join(b, "raw_http"), str(port)],
}
# The servers' exit lines: how many requests they answered.
ANSWERED = [
    re.compile(r"http_server: SIGINT: (\d+) requests"),
    re.compile(r"raw_http: \d+ connections, (\d+) requests"),
]


def number(text, label):
    m = re.search(label + r":\s+([\d,]+)", text)
    if not m:
        raise ValueError(f"no '{label}' in cachegrind's summary")
    return int(m.group(1).replace(",", ""))


def count(name, argv_for, conns, seconds):
    port = harness.free_port()
    argv = argv_for(port)
    with tempfile.TemporaryDirectory(prefix="galay-http-count-") as tmp:
        out = os.path.join(tmp, "cachegrind.out")
        log = os.path.join(tmp, "server.log")
        with open(log, "w") as f:
            # valgrind's own temporary files go in tmp too: killed before it cleans up (an
            # interrupted run), it leaves them behind.
            server = children.popen(
                ["taskset", "-c", "0", "valgrind", "--tool=cachegrind", "--cache-sim=yes",
                 f"--cachegrind-out-file={out}"] + argv,
                stdout=f, stderr=subprocess.STDOUT, env=dict(os.environ, TMPDIR=tmp))
        try:
            if not harness.wait_accepting(server, port, 60):
                raise RuntimeError(f"did not start accepting on port {port}")
            wrk = children.run(["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}",
                                f"-d{seconds}", f"http://127.0.0.1:{port}/"],
                               capture_output=True, text=True)
            if wrk.returncode != 0:
                raise RuntimeError(f"wrk failed: {wrk.stderr.strip()}")
        finally:
            # SIGINT: the servers print what they answered; valgrind then writes its counts.
            harness.stop(server, signal.SIGINT, timeout=120)
        text = open(log).read()
    answered = None
    for pattern in ANSWERED:
        m = pattern.search(text)
        if m:
            answered = int(m.group(1))
    if not answered:
        raise RuntimeError(f"reported no answered requests:\n{text[-2000:]}")
    d1 = re.search(r"D1  misses:\s+([\d,]+)\s+\(\s*([\d,]+) rd\s+\+\s+([\d,]+) wr", text)
    if not d1:
        raise ValueError("no D1 misses in cachegrind's summary")
    misses, rd, wr = (int(x.replace(",", "")) for x in d1.groups())
    return {
        "server": name,
        "requests": answered,
        "instructions_per_request": number(text, "I   refs") / answered,
        "l1d_misses_per_request": misses / answered,
        "l1d_read_misses_per_request": rd / answered,
        "l1d_write_misses_per_request": wr / answered,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--servers", default="galay-epoll,raw_http")
    ap.add_argument("-c", "--connections", type=int, default=1000)
    ap.add_argument("-d", "--duration", type=int, default=8)
    ap.add_argument("--out")
    args = ap.parse_args()
    names = [s for s in args.servers.split(",") if s]
    unknown = [s for s in names if s not in SERVERS]
    if unknown or not names:
        ap.error(f"unknown server(s) {','.join(unknown) or '(none)'}; known: {','.join(SERVERS)}")
    if args.connections < 1 or args.duration < 1:
        ap.error("-c and -d must be at least 1")
    for tool in ("valgrind", "wrk", "taskset"):
        if shutil.which(tool) is None:
            print(f"http_count: {tool} is not installed (Debian: apt-get install {tool})",
                  file=sys.stderr)
            return 2
    for name in names:
        binary = SERVERS[name](args.bin, 0)[0]
        if not os.access(binary, os.X_OK):
            print(f"http_count: {binary} not found (build it first: make build)", file=sys.stderr)
            return 2
    results, failed = [], False
    for name in names:
        try:
            r = count(name, lambda port, n=name: SERVERS[n](args.bin, port), args.connections,
                      args.duration)
        except (RuntimeError, ValueError) as e:
            print(f"http_count: {name}: {e}", file=sys.stderr)
            failed = True
            continue
        results.append(r)
        print(f"{name:12s} {r['requests']:>9,} requests  "
              f"{r['instructions_per_request']:7,.0f} instructions/request  "
              f"L1d misses/request {r['l1d_misses_per_request']:.1f} "
              f"(read {r['l1d_read_misses_per_request']:.1f}, "
              f"write {r['l1d_write_misses_per_request']:.1f})", flush=True)
    by = {r["server"]: r for r in results}
    if "galay-epoll" in by and "raw_http" in by:
        g, raw = by["galay-epoll"], by["raw_http"]
        ratio = g["instructions_per_request"] / raw["instructions_per_request"]
        print(f"galay-epoll / raw_http: {ratio:.2f}x the instructions, "
              f"{g['l1d_misses_per_request'] - raw['l1d_misses_per_request']:+.1f} L1d misses "
              f"per request")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"connections": args.connections, "duration_s": args.duration,
                       "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "results": results}, f,
                      indent=2)
        print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
