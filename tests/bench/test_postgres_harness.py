#!/usr/bin/env python3
"""bench/harness/postgres.py against a real PostgreSQL and its own client (psql): the socket and
TCP with the password, a wrong password refused with the server's message, the server's CPU
with a reaped backend's in it, pinning, restart and crash, and nothing left behind: not by
close(), not by a script ended with SIGTERM, not by one killed outright. No binaries: the
one-line reason, SKIP (exit 77). Run by ctest."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "..", "..", "bench", "harness")
sys.path.insert(0, HARNESS)
import postgres  # noqa: E402

# Missing binaries are a clear error, not a crash.
os.environ["GALAY_PG_BINDIR"] = "/nonexistent"
try:
    postgres.Server()
    raise AssertionError("a server started without binaries")
except postgres.Unavailable as e:
    assert "GALAY_PG_BINDIR=/nonexistent has no initdb and postgres" in str(e), e
del os.environ["GALAY_PG_BINDIR"]
try:
    postgres.bindir()
except postgres.Unavailable as e:
    print(f"test_postgres_harness: SKIP: {e}")
    sys.exit(77)
if shutil.which("psql") is None:
    print("test_postgres_harness: SKIP: psql not found (apt-get install postgresql-client)")
    sys.exit(77)


def psql(conninfo, sql):
    return subprocess.run(["psql", conninfo, "-XAtc", sql], capture_output=True, text=True,
                          timeout=60)


def gone(pid):
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    import select
    try:
        return bool(select.select([fd], [], [], 30)[0])
    finally:
        os.close(fd)


with postgres.Server(cpu=0) as pg:
    r = psql(pg.conninfo(tcp=False), "SELECT 1")
    assert (r.returncode, r.stdout) == (0, "1\n"), r
    r = psql(pg.conninfo(), "SELECT inet_server_addr(), inet_server_port()")
    assert (r.returncode, r.stdout) == (0, f"127.0.0.1|{pg.port}\n"), r
    r = psql(pg.conninfo(password="wrong"), "SELECT 1")
    assert r.returncode != 0 and 'password authentication failed for user "galay"' in r.stderr, r
    # Not root, pinned to CPU 0 with its children, a process group of its own.
    with open(f"/proc/{pg.pid}/status") as f:
        uid = [ln.split()[1] for ln in f if ln.startswith("Uid:")][0]
    assert uid != "0", uid
    assert all(os.sched_getaffinity(p) == {0} for p in pg.processes()), pg.processes()
    assert os.getpgid(pg.pid) == pg.pid

    # A backend's CPU counts once its client has left and the postmaster reaped it.
    assert pg.wait_no_backends()
    before = pg.cpu_s()
    r = psql(pg.conninfo(), "SELECT count(*) FROM generate_series(1, 3000000)")
    assert (r.returncode, r.stdout) == (0, "3000000\n"), r
    assert pg.wait_no_backends() and pg.backends() == []
    used = pg.cpu_s() - before
    assert used > 0.05, f"server CPU for 3M rows: {used} s"

    first, port = pg.pid, pg.port
    pg.restart()
    assert pg.pid != first and pg.port == port and gone(first)
    assert psql(pg.conninfo(), "SELECT 2").stdout == "2\n"

    procs = pg.processes()
    pg.kill()
    assert pg.pid is None and all(gone(p) for p in procs)
    assert postgres.processes_in(pg.dir) == []
    pg.start()
    assert psql(pg.conninfo(tcp=False), "SELECT 3").stdout == "3\n"
    d, procs = pg.dir, pg.processes()
assert not os.path.exists(d) and postgres.processes_in(d) == []
assert all(gone(p) for p in procs)
print("test_postgres_harness: socket, password, CPU, pinning, restart, crash, close ok")

# A script ended by SIGTERM closes its server (atexit); one killed outright takes it along (the
# parent-death signal), and the next server sweeps its directory.
SCRIPT = textwrap.dedent(f"""
    import os, signal, sys, time
    sys.path.insert(0, {HARNESS!r})
    import postgres
    pg = postgres.Server()
    print(pg.pid, pg.dir, flush=True)
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()
""")
for how in ("term", "kill"):
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, how], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    pid, d = p.stdout.readline().split()
    if how == "term":
        p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=60)
    assert rc == (143 if how == "term" else -9), (how, rc)
    assert gone(int(pid)), how
    for left in postgres.processes_in(d):
        assert gone(left), (how, left)
    if how == "term":
        assert not os.path.exists(d), d
    else:
        assert os.path.exists(d)
        postgres.Server().close()  # sweeps what the killed script left
        assert not os.path.exists(d), d
print("test_postgres_harness: SIGTERM and SIGKILL leave nothing behind ok")
