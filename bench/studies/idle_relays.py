#!/usr/bin/env python3
"""What an idle relay costs tcp_proxy: descriptors and memory per connection that moved bytes once
and now waits.

    python3 bench/studies/idle_relays.py --bin build/release/bin -n 10000 [--copy] [--proxies N]

A raw_epoll echo upstream and tcp_proxy (examples/tcp_proxy.cpp, io::copy_bidirectional) are
started; 100 connections through the proxy each send 4 KiB and read the echo back (warm-up: the
proxy's pipe pool, its first allocations), then the proxy's descriptors (/proc/PID/fd, pipes
counted apart) and resident memory (VmRSS) are read. Then N more connections do the same and stay
open, idle, and the figures are read again: the growth divided by N is what one idle relay costs.
Pipes are taken only while bytes move, so an idle relay should hold its two sockets and no pipe.
Not counted: the kernel's socket buffers. The proxy needs 2 descriptors per relay; the
descriptor limit is raised as far as permitted (above the hard limit needs CAP_SYS_RESOURCE).
When one proxy's limit cannot hold N relays (10,000 need 20,264 descriptors, the hard limit here
is 20,000), the relays are split over as many tcp_proxy processes as needed (--proxies sets the
number), each warmed with its own 100 relays and each taking its share, and the output says so;
the figures are the growth summed over the processes divided by N. This script and the upstream
hold one descriptor per relay (N up to the limit minus a few).
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

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
from harness import (free_port, proc_status, raise_nofile, resolve, stop,  # noqa: E402
                     wait_accepting)

MESSAGE = bytes((i * 7 + 3) % 256 for i in range(4096))
WARM = 100  # relays opened through each proxy before the first reading
SPARE = 64


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


def start_proxy(args, up_port):
    port = free_port()
    cmd = f"tcp_proxy {{port}} 127.0.0.1:{up_port} --idle 600" + (" --copy" if args.copy else "")
    proc = children.popen(resolve(cmd, args.bin, port), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env=dict(os.environ,
                                                           GALAY_BACKEND=args.backend))
    return proc, port


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("-n", type=int, default=10000, help="idle relays to open")
    ap.add_argument("--backend", default="io_uring", choices=["io_uring", "epoll"])
    ap.add_argument("--copy", action="store_true", help="tcp_proxy --copy (no splice)")
    ap.add_argument("--proxies", type=int, default=0,
                    help="proxy processes to split the relays over (default: as few as the "
                    "descriptor limit allows)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for prog in ("tcp_proxy", "raw_epoll"):
        if not os.access(resolve(prog, args.bin, 0)[0], os.X_OK):
            sys.exit(f"idle_relays.py: no {prog} in {args.bin}")
    # This process holds the client end of every relay, the upstream one socket per relay and
    # each proxy two per relay it holds, plus a few (listeners, a pipe, stdio).
    need = 2 * (args.n + WARM) + SPARE
    try:  # (above the hard limit only with CAP_SYS_RESOURCE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
    except (ValueError, OSError):
        raise_nofile()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if args.n + WARM * max(1, args.proxies) + SPARE > soft:
        sys.exit(f"idle_relays.py: this client and the upstream hold one descriptor per relay: "
                 f"{args.n} relays need more than the limit of {soft}")
    per_proxy_room = (soft - SPARE) // 2 - WARM  # relays one proxy can add after its warm ones
    nproxies = args.proxies or max(1, -(-args.n // per_proxy_room))
    if nproxies > 1 and not args.proxies:
        print(f"idle_relays.py: {args.n} relays need {need} descriptors in one proxy, above its "
              f"limit of {soft} (hard {hard}; raising it needs CAP_SYS_RESOURCE): split over "
              f"{nproxies} tcp_proxy processes", file=sys.stderr)
    shares = [args.n // nproxies + (1 if i < args.n % nproxies else 0) for i in range(nproxies)]
    up_port = free_port()
    upstream = children.popen(resolve("raw_epoll {port}", args.bin, up_port),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proxies = [start_proxy(args, up_port) for _ in range(nproxies)]
    keep = []
    try:
        if not wait_accepting(upstream, up_port, 10) or not all(
                wait_accepting(p, port, 10) for p, port in proxies):
            sys.exit("idle_relays.py: the upstream or a proxy did not start")
        before = []
        for (proxy, port), share in zip(proxies, shares):
            open_relays(port, WARM, keep)
            fds0, pipes0 = fds_of(proxy.pid)
            room = (soft - fds0 - 4) // 2  # (4 spare: a pipe the pool may still make, the accept)
            if room < share:
                sys.exit(f"idle_relays.py: a proxy holding {fds0} descriptors with its {WARM} warm "
                         f"relays has room for {room} more, not {share} (limit {soft}): use "
                         f"--proxies {nproxies + 1}")
            before.append((fds0, pipes0, proc_status(proxy.pid, "VmRSS")))
        for (proxy, port), share in zip(proxies, shares):
            open_relays(port, share, keep)
        after = []
        for proxy, _ in proxies:
            if proxy.poll() is not None:
                sys.exit("idle_relays.py: a proxy died")
            fds1, pipes1 = fds_of(proxy.pid)
            after.append((fds1, pipes1, proc_status(proxy.pid, "VmRSS")))
        per = [{"relays": share, "fds_before": b[0], "fds_after": a[0], "pipes_before": b[1],
                "pipes_after": a[1], "rss_kb_before": b[2], "rss_kb_after": a[2]}
               for share, b, a in zip(shares, before, after)]
        r = {"relays": args.n, "relays_held": args.n + WARM * nproxies,
             "backend": args.backend, "copy": args.copy, "proxies": nproxies,
             "fds_per_relay": sum(a[0] - b[0] for a, b in zip(after, before)) / args.n,
             "pipes_before": sum(b[1] for b in before), "pipes_after": sum(a[1] for a in after),
             "rss_kb_before": sum(b[2] for b in before), "rss_kb_after": sum(a[2] for a in after),
             "bytes_per_relay": sum(a[2] - b[2] for a, b in zip(after, before)) * 1024 / args.n,
             "per_proxy": per}
        split = (f" over {nproxies} processes ({' + '.join(str(x) for x in shares)})"
                 if nproxies > 1 else "")
        print(f"{args.n} idle relays through tcp_proxy ({args.backend}"
              f"{', --copy' if args.copy else ', splice'}){split}: "
              f"{r['fds_per_relay']:.2f} descriptors and {r['bytes_per_relay']:.0f} bytes of "
              f"resident memory per relay; pipes held (all proxies): {r['pipes_before']} before, "
              f"{r['pipes_after']} after; {r['relays_held']} relays open at the end")
        if args.json:
            print(json.dumps(r))
        return 0
    except (OSError, RuntimeError) as e:
        print(f"idle_relays.py: {e}", file=sys.stderr)
        return 1
    finally:
        for sock in keep:
            sock.close()
        for proxy, _ in proxies:
            stop(proxy)
        stop(upstream)


if __name__ == "__main__":
    sys.exit(main())
