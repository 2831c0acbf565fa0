#!/usr/bin/env python3
"""Bounded soak: find what leaks or breaks over many connection and file cycles.

    python3 tests/soak/soak.py --bin build/soak/bin --duration 180     # make soak
    python3 tests/soak/soak.py --bin build/soak/bin --duration 30      # CI (the soak preset: release + fault injection)

For each backend (io_uring where the kernel allows it, epoll):

1. TCP churn against `bench_server PORT --backend B --bind 127.0.0.1`: concurrent clients
   connect, send 1 to 4 messages of random sizes (1 B to 256 KiB) and check every echoed byte,
   then end the connection one of five ways: close (FIN), reset (SO_LINGER 0), half-close (the
   rest of the echo and then the server's EOF must arrive), a reset while the server is still
   echoing 256 KiB, or a close before anything was sent. After a warm-up phase the server's
   open fds (/proc/PID/fd) and RSS are taken; after the churn the fds must come back to exactly
   that number (within 10 s) and the RSS must not have grown by more than the tolerance
   (--rss-slack-mib, default 8 MiB: the pool's buffers in rotation may grow with the load's
   peaks). The server must still echo at the end.
2. soak_local (UDP sockets, files, TCP connections opened, used and closed inside one galay
   program; see soak_local.cpp) for the same backend, then once more under fault injection
   (GALAY_FAULTS: interrupted calls, short transfers, EAGAIN, late completions, ended multishot
   recvs, an empty buffer ring), which must change nothing.

Prints a summary per phase and exits 0 when everything came back, 1 on any leak or error (the
message says which), 2 on bad usage. Time is split: 60% churn, 40% soak_local.
"""
import argparse
import asyncio
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench", "harness"))
import children  # noqa: E402  (what it starts ends when it does, on SIGTERM too)

ENDINGS = ("close", "reset", "half_close", "reset_mid_echo", "close_idle")
FAULTS = ("seed=13,interrupted=0.05,would_block=0.05,short=0.2,late=0.1,"
          "end_multishot=0.05,starve_ring=0.2")


def fail(msg):
    print(f"soak: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Churn:
    """Concurrent clients against an echo server; counts what happened."""

    def __init__(self, port, seed):
        self.port = port
        self.rng = random.Random(seed)
        self.connections = 0
        self.bytes = 0
        self.endings = {e: 0 for e in ENDINGS}
        self.errors = []

    async def read_exactly(self, reader, n):
        return await asyncio.wait_for(reader.readexactly(n), 10)

    async def one(self):
        rng = self.rng
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self.port), 10)
        sock = writer.get_extra_info("socket")
        ending = rng.choice(ENDINGS)
        try:
            if ending == "close_idle":
                return
            for _ in range(rng.randint(1, 4)):
                size = rng.choice((1, 100, 4096, 65536, rng.randint(1, 256 << 10)))
                data = rng.randbytes(size)
                writer.write(data)
                await writer.drain()
                back = await self.read_exactly(reader, size)
                if back != data:
                    raise RuntimeError(f"echo of {size} bytes came back different")
                self.bytes += size
            if ending == "half_close":
                data = rng.randbytes(rng.randint(1, 64 << 10))
                writer.write(data)
                writer.write_eof()
                back = await self.read_exactly(reader, len(data))
                if back != data:
                    raise RuntimeError("echo after the half-close came back different")
                rest = await asyncio.wait_for(reader.read(), 10)
                if rest:
                    raise RuntimeError("data after the echo of a half-closed connection")
            elif ending == "reset_mid_echo":
                writer.write(rng.randbytes(256 << 10)) # reset while the server still echoes
        finally:
            self.endings[ending] += 1
            self.connections += 1
            if ending in ("reset", "reset_mid_echo"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
            else:
                writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def worker(self, until):
        while time.monotonic() < until:
            try:
                await self.one()
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError,
                    OSError, RuntimeError) as e:
                self.errors.append(f"{type(e).__name__}: {e}")
                if len(self.errors) > 20:
                    return

    async def once(self):
        try:
            await self.one()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, OSError,
                RuntimeError) as e:
            self.errors.append(f"{type(e).__name__}: {e}")

    async def run(self, seconds, concurrency):
        until = time.monotonic() + seconds
        await asyncio.gather(*(self.worker(until) for _ in range(concurrency)))


def start_server(binary, backend, port):
    proc = children.popen([binary, str(port), "--backend", backend, "--bind", "127.0.0.1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "listening on" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    out, err = proc.communicate()
    fail(f"bench_server --backend {backend} did not start: {err.strip() or out.strip()}")


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def churn_phase(args, backend, seconds, seed):
    binary = os.path.join(args.bin, "bench_server")
    port = args.port or free_port()
    proc = start_server(binary, backend, port)
    pid = proc.pid
    try:
        warm = Churn(port, seed)
        asyncio.run(warm.run(max(1.0, seconds * 0.2), args.concurrency))
        if warm.errors:
            fail(f"{backend} warm-up: {len(warm.errors)} errors, first: {warm.errors[0]}")
        # Every client is gone: wait for the server to have closed its side too.
        settle_fds(pid, None)
        fds0, rss0 = fd_count(pid), rss_kib(pid)
        churn = Churn(port, seed + 1)
        asyncio.run(churn.run(seconds * 0.8, args.concurrency))
        if proc.poll() is not None:
            fail(f"{backend}: bench_server died (exit {proc.returncode}): {proc.stderr.read()}")
        fds1 = settle_fds(pid, fds0)
        rss1 = rss_kib(pid)
        alive = Churn(port, seed + 2)
        asyncio.run(alive.once()) # one more connection: still serving
        ok_fds = fds1 == fds0
        ok_rss = rss1 <= rss0 + args.rss_slack_mib * 1024
        endings = ", ".join(f"{k} {v}" for k, v in churn.endings.items())
        print(f"soak churn {backend}: {churn.connections} connections ({endings}), "
              f"{churn.bytes / 2**20:.1f} MiB echoed and verified, {len(churn.errors)} errors; "
              f"server fds {fds0} -> {fds1}, RSS {rss0 / 1024:.1f} -> {rss1 / 1024:.1f} MiB "
              f"(limit +{args.rss_slack_mib} MiB): {'ok' if ok_fds and ok_rss else 'LEAK'}")
        if churn.errors or alive.errors:
            fail(f"{backend}: {len(churn.errors) + len(alive.errors)} client errors, first: "
                 f"{(churn.errors + alive.errors)[0]}")
        if not ok_fds:
            fail(f"{backend}: bench_server holds {fds1 - fds0} more fds than before the churn")
        if not ok_rss:
            fail(f"{backend}: bench_server RSS grew by {(rss1 - rss0) / 1024:.1f} MiB")
    finally:
        stop_server(proc)


def settle_fds(pid, target):
    """Waits (10 s at most) until the server's fd count stops falling (or reaches `target`)."""
    deadline = time.monotonic() + 10
    last = fd_count(pid)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = fd_count(pid)
        if target is not None and now == target:
            return now
        if target is None and now == last:
            return now
        last = now
    return fd_count(pid)


def local_phase(args, backend, seconds, faults):
    env = dict(os.environ)
    if faults:
        env["GALAY_FAULTS"] = FAULTS
    else:
        env.pop("GALAY_FAULTS", None)
    cmd = [os.path.join(args.bin, "soak_local"), "--duration", f"{seconds:.1f}", "--backend",
           backend, "--dir", args.dir]
    r = children.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 120)
    label = " (under GALAY_FAULTS)" if faults else ""
    for line in r.stdout.splitlines():
        print(line + label)
    if r.returncode != 0:
        fail(f"soak_local --backend {backend}{label} exited {r.returncode}: {r.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/soak/bin", help="where bench_server and soak_local are")
    ap.add_argument("--duration", type=float, default=180, help="seconds in all (default 180)")
    ap.add_argument("--backends", default="io_uring,epoll")
    ap.add_argument("--concurrency", type=int, default=32, help="concurrent churn clients")
    ap.add_argument("--port", type=int, default=0, help="bench_server port (default: a free one)")
    ap.add_argument("--dir", default="/var/tmp", help="directory for soak_local's files")
    ap.add_argument("--rss-slack-mib", type=float, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.duration < 5:
        ap.error("--duration must be at least 5 seconds")
    for tool in ("bench_server", "soak_local"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            ap.error(f"{os.path.join(args.bin, tool)} not found (build it: make build, or "
                     "cmake --build --preset release --target bench_server soak_local)")
    backends = [b for b in args.backends.split(",") if b]
    for b in backends:
        if b not in ("io_uring", "epoll"):
            ap.error(f"unknown backend {b}")
    if "io_uring" in backends:
        probe = children.run([os.path.join(args.bin, "soak_local"), "--duration", "0.01",
                              "--backend", "io_uring", "--dir", args.dir],
                             capture_output=True, text=True)
        if probe.returncode != 0 and "unavailable" in probe.stderr:
            required = "io_uring" in os.environ.get("GALAY_REQUIRE_BACKENDS", "")
            print(f"soak: {'FAIL' if required else 'SKIP'} io_uring: {probe.stderr.strip()}")
            if required:
                sys.exit(1)
            backends.remove("io_uring")
    share = args.duration / len(backends)
    t0 = time.monotonic()
    for i, b in enumerate(backends):
        churn_phase(args, b, share * 0.6, args.seed + 10 * i)
        local_phase(args, b, share * 0.25, faults=False)
        local_phase(args, b, share * 0.15, faults=True)
    print(f"soak: ok ({time.monotonic() - t0:.0f} s, backends {', '.join(backends)})")


if __name__ == "__main__":
    main()
