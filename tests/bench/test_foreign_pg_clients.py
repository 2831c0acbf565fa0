#!/usr/bin/env python3
"""raw_pg (libpq on an epoll loop, both modes) and pg_threads (a blocking connection per thread)
against a real PostgreSQL (bench/harness/postgres.py): short runs over TCP with the password and
over the Unix socket, unnamed and prepared statements, every reply checked (JSON: queries > 0,
errors 0); bad flags are one line and exit 2; a wrong password is exit 1 with the server's
message; a server restarted in the middle of a run ends it with errors and exit 1, never a hang.
No timing is asserted. argv[1]: the bin directory of this build. Run by ctest."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "harness"))
import postgres  # noqa: E402

BIN = sys.argv[1]
RAW_PG, PG_THREADS = os.path.join(BIN, "raw_pg"), os.path.join(BIN, "pg_threads")
FIELDS = {"implementation", "mode", "statement", "connections", "depth", "inflight", "warmup_s",
          "queries", "seconds", "queries_per_s", "client_cpu_s", "client_cpu_us_per_query",
          "total_queries", "errors", "connections_lost", "first_error"}


def run(argv, timeout=120):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def expect_usage(argv, words):
    r = run(argv)
    name = os.path.basename(argv[0])
    assert r.returncode == 2 and r.stdout == "", (argv, r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}: error: ") and words in lines[0] \
        and lines[0].endswith("(see --help)"), (argv, r.stderr)


for prog in (RAW_PG, PG_THREADS):
    expect_usage([prog], "--conninfo is required")
    expect_usage([prog, "--conninfo", "x", "--connections", "0"], "--connections")
    expect_usage([prog, "--conninfo", "x", "--duration", "0"], "--duration")
    expect_usage([prog, "--conninfo", "x", "--bogus"], "--bogus")
    r = run([prog, "--help"])
    assert r.returncode == 0 and "--conninfo" in r.stdout and r.stderr == "", r
expect_usage([RAW_PG, "--conninfo", "x", "--mode", "nope"], "--mode")
expect_usage([RAW_PG, "--conninfo", "x", "--mode", "pipeline", "--connections", "8",
              "--inflight", "4"], "--inflight: 4 is fewer than --connections 8")
print("test_foreign_pg_clients: bad flags ok")

try:
    pg = postgres.Server()
except postgres.Unavailable as e:
    print(f"test_foreign_pg_clients: SKIP the runs: {e}")
    sys.exit(77)


def title(pid):
    """A backend's process title: `postgres: <role> <db> <client> <what it does>`."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def check_run(argv, **want):
    r = run(argv + ["--json"])
    assert r.returncode == 0, (argv, r)
    res = json.loads(r.stdout)
    assert set(res) == FIELDS, set(res) ^ FIELDS
    assert res["errors"] == 0 and res["first_error"] == "" and res["connections_lost"] == 0, res
    assert res["queries"] > 0 and res["total_queries"] >= res["queries"], res
    assert res["client_cpu_s"] > 0 and res["client_cpu_us_per_query"] > 0, res
    for k, v in want.items():
        assert res[k] == v, (k, res)
    return res


with pg:
    short = ["--duration", "0.5", "--warmup", "0.2"]
    tcp, sock = pg.conninfo(), pg.conninfo(tcp=False)
    for statement in ("params", "prepared"):
        flag = ["--prepared"] if statement == "prepared" else []
        check_run([RAW_PG, "--conninfo", tcp, "--connections", "4"] + short + flag,
                  implementation="raw_pg", mode="single", statement=statement, connections=4,
                  inflight=4, depth=1)
        check_run([RAW_PG, "--conninfo", sock, "--connections", "4", "--mode", "pipeline",
                   "--depth", "8", "--inflight", "70"] + short + flag,
                  mode="pipeline", statement=statement, depth=8, inflight=70)
        check_run([PG_THREADS, "--conninfo", tcp, "--connections", "4"] + short + flag,
                  implementation="pg_threads", mode="single", statement=statement, inflight=4)
    # More in flight than one connection's socket buffers hold (PQflush returns 1: EPOLLOUT).
    check_run([RAW_PG, "--conninfo", tcp, "--connections", "2", "--mode", "pipeline",
               "--depth", "2000", "--inflight", "20000"] + short, depth=2000, inflight=20000)
    # A human line without --json.
    r = run([RAW_PG, "--conninfo", tcp, "--connections", "2"] + short)
    assert r.returncode == 0 and r.stdout.startswith("raw_pg single: ") and \
        "0 errors" in r.stdout, r
    print("test_foreign_pg_clients: raw_pg single and pipeline, pg_threads ok")

    for prog in (RAW_PG, PG_THREADS):
        r = run([prog, "--conninfo", pg.conninfo(password="wrong")] + short)
        assert r.returncode == 1 and r.stdout == "", r
        assert r.stderr.count("\n") == 1 and \
            'password authentication failed for user "galay"' in r.stderr, r.stderr
    print("test_foreign_pg_clients: a wrong password ok")

    # The server restarted (fast shutdown) while every connection has queries in flight.
    for argv in ([RAW_PG, "--mode", "single"], [RAW_PG, "--mode", "pipeline"], [PG_THREADS]):
        p = subprocess.Popen(argv + ["--conninfo", tcp, "--connections", "4", "--duration", "20",
                                     "--warmup", "0", "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Every connection made and querying: each backend seen at work on a query (its title
        # says PARSE, BIND or SELECT only once its client has sent one).
        deadline, querying = time.monotonic() + 60, set()
        while len(querying) < 4:
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            querying |= {b for b in pg.backends()
                         if title(b).rsplit(" ", 1)[-1] in ("PARSE", "BIND", "SELECT")}
            time.sleep(0.005)
        pg.restart()
        out, err = p.communicate(timeout=60)
        res = json.loads(out)
        assert p.returncode == 1 and res["errors"] >= 4 and res["connections_lost"] == 4, res
        assert "terminating connection due to administrator command" in res["first_error"] or \
            "server closed the connection" in res["first_error"], res
    print("test_foreign_pg_clients: a restart mid-run ends every run with errors ok")
