#!/usr/bin/env python3
"""galay_pg (libpq on galay's loop through the examples' PostgreSQL pool) against a real
PostgreSQL (bench/harness/postgres.py), on both backends: short runs in single and pipeline mode
over TCP with the password and over the Unix socket, every reply checked (JSON with raw_pg's
fields: queries > 0, errors 0); more in flight than a socket buffer holds; bad flags are one
line and exit 2; a wrong password is exit 1 with the server's message; a server restarted in the
middle of a run ends with errors and exit 1, never a hang. No timing is asserted. argv[1]: the
bin directory of this build. Run by ctest."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "harness"))
import postgres  # noqa: E402
from foreign_runs import (check_pg_run, expect_usage, expect_wrong_password,  # noqa: E402
                          run, title)

GALAY_PG = os.path.join(sys.argv[1], "galay_pg")

expect_usage("galay_pg", [GALAY_PG], "--conninfo is required")
expect_usage("galay_pg", [GALAY_PG, "--conninfo", "x", "--connections", "0"], "--connections")
expect_usage("galay_pg", [GALAY_PG, "--conninfo", "x", "--backend", "iocp"], "--backend")
expect_usage("galay_pg", [GALAY_PG, "--conninfo", "x", "--mode", "nope"], "--mode")
expect_usage("galay_pg", [GALAY_PG, "--conninfo", "x", "--prepared"], "--prepared")
expect_usage("galay_pg", [GALAY_PG, "--conninfo", "x", "--malloc-trim", "-1"], "--malloc-trim")
expect_usage("galay_pg", [GALAY_PG, "--conninfo", "x", "--mode", "pipeline", "--connections",
                          "8", "--inflight", "4"], "--inflight: 4 is fewer than --connections 8")
r = run([GALAY_PG, "--help"])
assert r.returncode == 0 and "--conninfo" in r.stdout and "--backend" in r.stdout, r
print("test_galay_pg: bad flags ok")

try:
    pg = postgres.Server()
except postgres.Unavailable as e:
    print(f"test_galay_pg: SKIP the runs: {e}")
    sys.exit(77)

with pg:
    short = ["--duration", "0.5", "--warmup", "0.2"]
    tcp, sock = pg.conninfo(), pg.conninfo(tcp=False)
    for backend in ("io_uring", "epoll"):
        be = ["--backend", backend]
        probe = run([GALAY_PG, "--conninfo", tcp, "--connections", "1", "--duration", "0.01",
                     "--warmup", "0"] + be)
        if probe.returncode == 1 and f"backend {backend} unavailable" in probe.stderr:
            assert backend not in os.environ.get("GALAY_REQUIRE_BACKENDS", ""), probe.stderr
            print(f"test_galay_pg: SKIP {backend}: {probe.stderr.strip()}")
            continue
        check_pg_run([GALAY_PG, "--conninfo", tcp, "--connections", "4"] + be + short,
                     implementation="galay_pg/" + backend, mode="single", statement="params",
                     connections=4, inflight=4, depth=1)
        check_pg_run([GALAY_PG, "--conninfo", sock, "--connections", "4", "--mode", "pipeline",
                      "--depth", "8", "--inflight", "70"] + be + short,
                     mode="pipeline", depth=8, inflight=70)
        # The batch's results taken together (pool.run), and one task per query (pool.query).
        for form in ("--hold", "--per-query"):
            check_pg_run([GALAY_PG, "--conninfo", sock, "--connections", "4", "--mode",
                          "pipeline", "--depth", "8", "--inflight", "70", form] + be + short,
                         mode="pipeline", depth=8, inflight=70, malloc_trim=64 << 20)
        # More in flight than one connection's socket buffers hold (PQflush returns 1).
        check_pg_run([GALAY_PG, "--conninfo", tcp, "--connections", "2", "--mode", "pipeline",
                      "--depth", "2000", "--inflight", "20000"] + be + short,
                     depth=2000, inflight=20000)
        print(f"test_galay_pg: {backend}: single and pipeline ok")
    r = run([GALAY_PG, "--conninfo", tcp, "--connections", "2", "--backend", "epoll"] + short)
    assert r.returncode == 0 and r.stdout.startswith("galay_pg/epoll single: ") and \
        "0 errors" in r.stdout, r
    expect_wrong_password([GALAY_PG, "--backend", "epoll"] + short, pg)
    print("test_galay_pg: a wrong password ok")
    # The pool makes its connections again, so the run goes on to its end with the queries the
    # restart cut (and those sent while the server was away) counted as errors. (raw_pg's check
    # waits to see every backend busy, which a debug build's client seldom makes them.)
    for mode in ("single", "pipeline"):
        p = subprocess.Popen([GALAY_PG, "--backend", "epoll", "--mode", mode, "--conninfo", tcp, "--connections", "4",
                              "--duration", "3", "--warmup", "0", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        # Every connection made (past authentication): the run has started.
        while sum(title(b).rsplit(" ", 1)[-1] in ("idle", "PARSE", "BIND", "SELECT")
                  for b in pg.backends()) < 4:
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.005)
        pg.restart()
        out, err = p.communicate(timeout=60)
        assert out.startswith("{"), (mode, p.returncode, out, err)
        res = json.loads(out)
        # Every connection is cut; the queries it carried fail (exit 1), unless the cut fell
        # between two of them on every connection (its queued queries then go to the new one).
        assert res["connections_lost"] >= 4 and p.returncode == (1 if res["errors"] else 0), \
            (mode, res, err)
        assert res["queries"] > 0, res
    print("test_galay_pg: a restart mid-run: errors, then the pool goes on ok")
