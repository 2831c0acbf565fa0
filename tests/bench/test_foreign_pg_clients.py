#!/usr/bin/env python3
"""raw_pg (libpq on an epoll loop, both modes) and pg_threads (a blocking connection per thread)
against a real PostgreSQL (bench/harness/postgres.py): short runs over TCP with the password and
over the Unix socket, unnamed and prepared statements, every reply checked (JSON: queries > 0,
errors 0); bad flags are one line and exit 2; a wrong password is exit 1 with the server's
message; a server restarted in the middle of a run ends it with errors and exit 1, never a hang.
No timing is asserted. argv[1]: the bin directory of this build. Run by ctest."""
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "harness"))
import postgres  # noqa: E402
from foreign_runs import (check_pg_run, expect_usage, expect_wrong_password,  # noqa: E402
                          restart_mid_run, run)

BIN = sys.argv[1]
RAW_PG, PG_THREADS = os.path.join(BIN, "raw_pg"), os.path.join(BIN, "pg_threads")

for prog in (RAW_PG, PG_THREADS):
    name = os.path.basename(prog)
    expect_usage(name, [prog], "--conninfo is required")
    expect_usage(name, [prog, "--conninfo", "x", "--connections", "0"], "--connections")
    expect_usage(name, [prog, "--conninfo", "x", "--duration", "0"], "--duration")
    expect_usage(name, [prog, "--conninfo", "x", "--bogus"], "--bogus")
    r = run([prog, "--help"])
    assert r.returncode == 0 and "--conninfo" in r.stdout and r.stderr == "", r
expect_usage("raw_pg", [RAW_PG, "--conninfo", "x", "--mode", "nope"], "--mode")
expect_usage("raw_pg", [RAW_PG, "--conninfo", "x", "--mode", "pipeline", "--connections", "8",
                        "--inflight", "4"], "--inflight: 4 is fewer than --connections 8")
print("test_foreign_pg_clients: bad flags ok")

try:
    pg = postgres.Server()
except postgres.Unavailable as e:
    print(f"test_foreign_pg_clients: SKIP the runs: {e}")
    sys.exit(77)

with pg:
    short = ["--duration", "0.5", "--warmup", "0.2"]
    tcp, sock = pg.conninfo(), pg.conninfo(tcp=False)
    for statement in ("params", "prepared"):
        flag = ["--prepared"] if statement == "prepared" else []
        check_pg_run([RAW_PG, "--conninfo", tcp, "--connections", "4"] + short + flag,
                     implementation="raw_pg", mode="single", statement=statement,
                     connections=4, inflight=4, depth=1)
        check_pg_run([RAW_PG, "--conninfo", sock, "--connections", "4", "--mode", "pipeline",
                      "--depth", "8", "--inflight", "70"] + short + flag,
                     mode="pipeline", statement=statement, depth=8, inflight=70)
        check_pg_run([PG_THREADS, "--conninfo", tcp, "--connections", "4"] + short + flag,
                     implementation="pg_threads", mode="single", statement=statement,
                     inflight=4)
    # More in flight than one connection's socket buffers hold (PQflush returns 1: EPOLLOUT).
    check_pg_run([RAW_PG, "--conninfo", tcp, "--connections", "2", "--mode", "pipeline",
                  "--depth", "2000", "--inflight", "20000"] + short, depth=2000, inflight=20000)
    # Several hosts, the first refusing: libpq gives up its socket and opens another while
    # connecting (often with the same number), which the loop must watch anew.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connecting is refused
    check_pg_run([RAW_PG, "--conninfo", f"host=127.0.0.1,127.0.0.1 "
                  f"port={closed.getsockname()[1]},{pg.port} dbname=postgres user=galay "
                  f"password={pg.password}", "--connections", "4"] + short, connections=4)
    closed.close()
    # A human line without --json.
    r = run([RAW_PG, "--conninfo", tcp, "--connections", "2"] + short)
    assert r.returncode == 0 and r.stdout.startswith("raw_pg single: ") and \
        "0 errors" in r.stdout, r
    print("test_foreign_pg_clients: raw_pg single and pipeline, pg_threads ok")

    for prog in (RAW_PG, PG_THREADS):
        expect_wrong_password([prog] + short, pg)
    print("test_foreign_pg_clients: a wrong password ok")

    for argv in ([RAW_PG, "--mode", "single"], [RAW_PG, "--mode", "pipeline"], [PG_THREADS]):
        restart_mid_run(argv, pg)
    print("test_foreign_pg_clients: a restart mid-run ends every run with errors ok")
