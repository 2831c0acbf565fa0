#!/usr/bin/env python3
"""Syscalls per request of an echo server under load.

    python3 bench/studies/syscalls.py --bin build/release/bin --server "raw_uring {port}" \\
        --client raw_client -c 100 -d 3

Starts the server pinned to CPU 0, attaches a counter to it, runs the client (CPU 1) with no
warm-up so that its measured window covers all the traffic, detaches, and prints each syscall's
count divided by the requests the client completed (messages still in flight at the end, at most
connections x pipeline, are the only imprecision).

Counting uses `perf stat` on the syscall tracepoints: no ptrace, so the server runs at full speed
and its batching is what it would be unobserved. Without perf it falls back to `strace -c -f`,
which stops the server at every syscall; that enlarges batches and so understates syscalls per
request of batching servers (the output says which counter was used).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
from harness import free_port, label_of, resolve, stop, temp_dir, wait_accepting  # noqa: E402

SYSCALLS = ["io_uring_enter", "epoll_wait", "epoll_pwait", "epoll_ctl", "read", "write", "readv",
            "writev", "recvfrom", "sendto", "recvmsg", "sendmsg", "accept4", "close", "futex"]


def perf_works():
    if not shutil.which("perf"):
        return False
    r = children.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "true"],
                     capture_output=True, text=True)
    return r.returncode == 0 and "not supported" not in r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--server", required=True, help='e.g. "raw_uring {port}"')
    ap.add_argument("--client", default="raw_client")
    ap.add_argument("--client-args", default="", help='e.g. --client-args="-P 16"')
    ap.add_argument("-c", "--connections", type=int, default=100)
    ap.add_argument("-s", "--size", type=int, default=256)
    ap.add_argument("-d", "--duration", type=float, default=3.0)
    ap.add_argument("--strace", action="store_true", help="use strace -c -f even if perf works")
    args = ap.parse_args()

    use_perf = not args.strace and perf_works()
    port = free_port()
    tmp = temp_dir("syscalls")
    out_path = os.path.join(tmp, "counts.txt")
    server = children.popen(["taskset", "-c", "0"] + resolve(args.server, args.bin, port),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_accepting(server, port, 10):
            sys.exit(f"syscalls.py: server did not start: {args.server}")
        if use_perf:
            events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{s}" for s in SYSCALLS]
            counter = children.popen(["perf", "stat", "-x,", "-o", out_path, "-e",
                                      ",".join(events), "-p", str(server.pid)],
                                     stderr=subprocess.DEVNULL)
        else:
            counter = children.popen(["strace", "-c", "-f", "-o", out_path, "-p",
                                      str(server.pid)], stderr=subprocess.DEVNULL)
        time.sleep(0.3)  # let the counter attach
        cli = children.run(["taskset", "-c", "1"] + resolve(args.client, args.bin, port)
                           + ["-h", "127.0.0.1", "-p", str(port), "-c", str(args.connections),
                              "-s", str(args.size), "-d", str(args.duration), "--warmup", "0",
                              "--json"] + shlex.split(args.client_args),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        counter.send_signal(signal.SIGINT)
        counter.wait(timeout=10)
    finally:
        stop(server)
    result = json.loads([l for l in cli.stdout.splitlines() if l.startswith("{")][-1])
    n = result["successful"]
    if cli.returncode != 0 or result["errors"] or not n:
        sys.exit(f"syscalls.py: client failed (exit {cli.returncode}, {result['errors']} errors)")

    counts = {}
    with open(out_path) as f:
        for line in f:
            if use_perf:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[0].isdigit():
                    name = parts[2].split(":")[1].replace("sys_enter_", "")
                    counts["total" if name == "sys_enter" else name] = int(parts[0])
            else:
                m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
                if m:
                    counts[m.group(2)] = int(m.group(1))
    print(f"server: {label_of(args.server)}   client: {args.client} -c {args.connections} -s {args.size} "
          f"-d {args.duration} {args.client_args}")
    print(f"counter: {'perf stat (tracepoints)' if use_perf else 'strace -c -f (ptrace: biased low for batching servers)'}")
    print(f"requests: {n:,}  qps: {result['qps']:,.0f}")
    for name, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        if v:
            print(f"  {name:<16} {v:>12,}  {v / n:8.4f} per request")


if __name__ == "__main__":
    main()
