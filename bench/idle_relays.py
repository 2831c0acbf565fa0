#!/usr/bin/env python3
"""What an idle relay costs tcp_proxy: descriptors and memory per connection that moved bytes once
and now waits.

    python3 bench/idle_relays.py --bin build/release/bin -n 10000 [--copy]

A raw_epoll echo upstream and tcp_proxy (examples/tcp_proxy.cpp, io::copy_bidirectional) are
started; 100 connections through the proxy each send 4 KiB and read the echo back (warm-up: the
proxy's pipe pool, its first allocations), then the proxy's descriptors (/proc/PID/fd, pipes
counted apart) and resident memory (VmRSS) are read. Then N more connections do the same and stay
open, idle, and the figures are read again: the growth divided by N is what one idle relay costs.
Pipes are taken only while bytes move, so an idle relay should hold its two sockets and no pipe.
Not counted: the kernel's socket buffers. The proxy needs 2 descriptors per relay; the
descriptor limit is raised as far as permitted (above the hard limit needs CAP_SYS_RESOURCE) and
a shortfall is said, not hidden: then as many relays as the limit allows are measured.
--backend runs the proxy on io_uring or epoll; --json prints the figures as one JSON object.
Exit status 1 when a connection fails or a process dies.
"""
import argparse
import json
import os
import resource
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (free_port, proc_status, raise_nofile, resolve, stop,  # noqa: E402
                     wait_accepting)

MESSAGE = bytes((i * 7 + 3) % 256 for i in range(4096))


def fds_of(pid):
    names = os.listdir(f"/proc/{pid}/fd")
    pipes = 0
    for n in names:
        try:
            if os.readlink(f"/proc/{pid}/fd/{n}").startswith("pipe:"):
                pipes += 1
        except OSError:
            pass
    return len(names), pipes


def open_relays(port, n, keep):
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(MESSAGE)
        got = b""
        while len(got) < len(MESSAGE):
            chunk = s.recv(len(MESSAGE) - len(got))
            if not chunk:
                raise RuntimeError("the proxy closed a connection")
            got += chunk
        if got != MESSAGE:
            raise RuntimeError("the echo through the proxy differs from what was sent")
        keep.append(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("-n", type=int, default=10000, help="idle relays to open")
    ap.add_argument("--backend", default="io_uring", choices=["io_uring", "epoll"])
    ap.add_argument("--copy", action="store_true", help="tcp_proxy --copy (no splice)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for prog in ("tcp_proxy", "raw_epoll"):
        if not os.access(resolve(prog, args.bin, 0)[0], os.X_OK):
            sys.exit(f"idle_relays.py: no {prog} in {args.bin}")
    need = 2 * (args.n + 100) + 64
    try:  # (above the hard limit only with CAP_SYS_RESOURCE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
    except (ValueError, OSError):
        raise_nofile()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        print(f"idle_relays.py: raising the descriptor limit to {need} is not permitted (hard "
              f"limit {hard}, no CAP_SYS_RESOURCE); {args.n} relays need 2 each in the proxy: "
              f"measuring as many as {soft} descriptors allow", file=sys.stderr)
    up_port, px_port = free_port(), free_port()
    upstream = subprocess.Popen(resolve("raw_epoll {port}", args.bin, up_port),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cmd = f"tcp_proxy {{port}} 127.0.0.1:{up_port} --idle 600" + (" --copy" if args.copy else "")
    proxy = subprocess.Popen(resolve(cmd, args.bin, px_port), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=dict(os.environ,
                                                              GALAY_BACKEND=args.backend))
    keep = []
    try:
        if not wait_accepting(upstream, up_port, 10) or not wait_accepting(proxy, px_port, 10):
            sys.exit("idle_relays.py: the upstream or the proxy did not start")
        open_relays(px_port, 100, keep)
        fds0, pipes0 = fds_of(proxy.pid)
        rss0 = proc_status(proxy.pid, "VmRSS")
        room = (soft - fds0 - 4) // 2  # (4 spare: a pipe the pool may still make, the accept)
        if room < args.n:
            print(f"idle_relays.py: {args.n} requested, {room} measured (the proxy holds {fds0} "
                  f"descriptors with the 100 warm relays; its limit is {soft})", file=sys.stderr)
            args.n = room
        open_relays(px_port, args.n, keep)
        fds1, pipes1 = fds_of(proxy.pid)
        rss1 = proc_status(proxy.pid, "VmRSS")
        if proxy.poll() is not None:
            sys.exit("idle_relays.py: the proxy died")
        r = {"relays": args.n, "relays_held": args.n + 100, "backend": args.backend,
             "copy": args.copy,
             "fds_per_relay": (fds1 - fds0) / args.n, "pipes_before": pipes0,
             "pipes_after": pipes1, "rss_kb_before": rss0, "rss_kb_after": rss1,
             "bytes_per_relay": (rss1 - rss0) * 1024 / args.n}
        print(f"{args.n} idle relays through tcp_proxy ({args.backend}"
              f"{', --copy' if args.copy else ', splice'}): "
              f"{r['fds_per_relay']:.2f} descriptors and {r['bytes_per_relay']:.0f} bytes of "
              f"resident memory per relay; pipes held: {pipes0} before, {pipes1} after; "
              f"{args.n + 100} relays open at the end")
        if args.json:
            print(json.dumps(r))
        return 0
    except (OSError, RuntimeError) as e:
        print(f"idle_relays.py: {e}", file=sys.stderr)
        return 1
    finally:
        for s in keep:
            s.close()
        stop(proxy)
        stop(upstream)


if __name__ == "__main__":
    sys.exit(main())
