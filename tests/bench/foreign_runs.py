"""What the tests of the foreign-library comparison's clients share: bad flags (one line, exit 2),
a short run of a PostgreSQL client checked against its JSON, a wrong password, and a server
restarted while every connection has queries in flight."""
import json
import socket
import subprocess
import threading
import time

# The JSON fields of every PostgreSQL client (raw_pg, pg_threads, pg_tokio, pg_pgx).
PG_FIELDS = {"implementation", "mode", "statement", "connections", "depth", "inflight",
             "warmup_s", "queries", "seconds", "queries_per_s", "client_cpu_s",
             "client_cpu_us_per_query", "total_queries", "errors", "connections_lost",
             "first_error"}


def run(argv, timeout=120):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def expect_usage(name, argv, words):
    """`argv` exits 2 with nothing on stdout and one line `<name>: error: ...` holding `words`."""
    r = run(argv)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and r.stdout == "" and len(lines) == 1, (argv, r)
    assert lines[0].startswith(f"{name}: error: ") and words in lines[0] and \
        lines[0].endswith("(see --help)"), (argv, r.stderr)


def check_pg_run(argv, **want):
    """A run with --json: exit 0, every field, queries answered and none wrong; `want`: fields
    that must have these values. Returns the JSON."""
    r = run(argv + ["--json"])
    assert r.returncode == 0, (argv, r)
    res = json.loads(r.stdout)
    # malloc_trim: the C++ clients' allocator setting (the Rust and Go controls have none).
    assert PG_FIELDS <= set(res) <= PG_FIELDS | {"malloc_trim"}, set(res) ^ PG_FIELDS
    assert res["errors"] == 0 and res["first_error"] == "" and res["connections_lost"] == 0, res
    assert res["queries"] > 0 and res["total_queries"] >= res["queries"], res
    assert res["client_cpu_s"] > 0 and res["client_cpu_us_per_query"] > 0, res
    for k, v in want.items():
        assert res[k] == v, (k, res)
    return res


def expect_wrong_password(argv, pg):
    """`argv` with the server's TCP conninfo but a wrong password: exit 1, one line with the
    server's message."""
    r = run(argv + ["--conninfo", pg.conninfo(password="wrong")])
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r
    assert 'password authentication failed for user "galay"' in r.stderr, r.stderr


def title(pid):
    """A backend's process title: `postgres: <role> <db> <client> <what it does>`."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def restart_mid_run(argv, pg, connections=4):
    """Starts `argv` (a client with 4 connections and a long run) and restarts the server once
    every backend has been seen at work on a query (its title says PARSE, BIND or SELECT only
    once its client has sent one): the client must end on its own, exit 1, with every
    connection lost and an error for each query that was in flight (at least one: a connection
    between its answer and its next query loses none)."""
    p = subprocess.Popen(argv + ["--conninfo", pg.conninfo(), "--connections", str(connections),
                                 "--duration", "20", "--warmup", "0", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, querying = time.monotonic() + 60, set()
    while len(querying) < connections:
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        querying |= {b for b in pg.backends()
                     if title(b).rsplit(" ", 1)[-1] in ("PARSE", "BIND", "SELECT")}
        time.sleep(0.005)
    pg.restart()
    out, err = p.communicate(timeout=60)
    res = json.loads(out)
    assert p.returncode == 1 and res["errors"] >= 1 and \
        res["connections_lost"] == connections, (argv, res, err)
    assert "terminating connection due to administrator command" in res["first_error"] or \
        "connection" in res["first_error"], res


class Staller:
    """An HTTP server that stalls in the middle of a body: it answers every request with a 200
    whose Content-Length is 1000 but sends 10 bytes of the body, then holds the connection open
    until closed."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            c.recv(4096)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()
