#!/usr/bin/env python3
"""Memory per idle keep-alive connection: the HTTP servers of bench/studies/http_servers.py, each
holding N connections that have made one request and wait for the next.

  python3 bench/studies/idle_memory.py [--bin build/release/bin] [-n 5000]
                                       [--servers galay-epoll,nginx]

For each server: start it (pinned to --server-cpu, and checked with one request, as
bench/studies/http_servers.py does), open 100 connections that each make one request (warm-up: the
server's first allocations, its thread-local caches), read the resident memory of its process
tree (VmRSS of every process, nginx's master and worker together), then open N more connections,
each making one request and reading the whole answer, and read it again. The figure is the growth
divided by N: what one more idle connection costs the server in user memory. Not counted: the
kernel's socket memory (the same for every server) and what a server allocates for all its
connections up front (nginx's connection and event arrays for its worker_connections, 8,192 here:
about 0.5 KB each, resident from the start).

A server that fails to start or answer is one line in the output, not a figure. Exit status 1
when a galay server failed.
"""
import argparse
import os
import resource
import signal
import socket
import sys
import tempfile
import time
import urllib.parse

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import harness  # noqa: E402
import http_servers  # noqa: E402


def rss_kib(pid):
    total = 0
    for p in harness.tree_pids(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def open_idle(port, n, body):
    """n connections, each with one request answered in full; the sockets stay open."""
    socks = []
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(request)
        socks.append(s)
    want = body.encode()
    for s in socks:
        got = b""
        while not got.endswith(want):
            chunk = s.recv(4096)
            if not chunk:
                raise OSError("the server closed a connection")
            got += chunk
    return socks


def measure(servers, name, n, args, logdir, seq):
    """(resident KiB before, after), None; or None, why it could not be measured."""
    rec = http_servers.new_record(name, "fixed", n)
    proc, log, url = http_servers.start_checked(servers, name, "fixed", n, args, logdir, seq, rec)
    socks = []
    try:
        if url is None:
            return None, "; ".join(rec["problems"])
        port = urllib.parse.urlsplit(url).port
        socks += open_idle(port, 100, http_servers.BODY)
        time.sleep(0.3)  # (a server may free per-request memory right after it answered)
        before = rss_kib(proc.pid)
        socks += open_idle(port, n, http_servers.BODY)
        time.sleep(0.3)
        after = rss_kib(proc.pid)
        return (before, after), None
    except OSError as e:
        return None, str(e)
    finally:
        for s in socks:
            s.close()
        harness.stop(proc, signal.SIGTERM, 10)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("-n", "--connections", type=int, default=5000,
                    help="idle connections measured (at most 8,000: nginx's worker_connections)")
    ap.add_argument("--servers", help="only these, comma-separated (default: every one here)")
    ap.add_argument("--server-cpu", default="0", help="CPU the servers are pinned to")
    args = ap.parse_args()
    if not 1 <= args.connections <= 8000:
        ap.error("--connections must be 1..8000")
    need = args.connections + 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard) if hard > 0 else need,
                                                        hard))
        except (ValueError, OSError):
            pass
        if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need:
            sys.exit(f"idle_memory: need {need} open files (ulimit -n), have {soft}")
    with tempfile.TemporaryDirectory(prefix="galay-idle-memory-") as work:
        known = http_servers.GALAY + http_servers.OTHERS
        wanted = args.servers.split(",") if args.servers else None
        if wanted is not None:
            unknown = [w for w in wanted if w not in known]
            if unknown:
                ap.error(f"unknown server(s): {', '.join(unknown) or '(none)'}")
        servers = http_servers.Servers(args.bin, work, wanted)
        names = [n for n in known if n in servers.available and (wanted is None or n in wanted)]
        for m in servers.missing:
            print(m)
        print(f"\n**Memory per idle keep-alive connection ({args.connections:,} connections, "
              "each after one GET /)**\n")
        print("| server | resident before (KiB) | resident after (KiB) | per connection (bytes) |")
        print("|---|---|---|---|")
        failed = False
        logdir = os.path.join(work, "logs")
        os.makedirs(logdir)
        for seq, name in enumerate(names):
            res, problem = measure(servers, name, args.connections, args, logdir, seq)
            if res is None:
                print(f"| {name} | failed: {problem} | | |")
                failed = failed or name in http_servers.GALAY
                continue
            before, after = res
            per = (after - before) * 1024 / args.connections
            print(f"| {name} | {before:,} | {after:,} | {per:,.0f} |")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
