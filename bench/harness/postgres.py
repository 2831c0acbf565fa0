"""A real PostgreSQL server for the benchmark scripts and their tests, and the CPU its processes
use. Standard library only.

    with postgres.Server(cpu=0) as pg:         # initdb, start, wait until it accepts
        before = pg.cpu_s()
        run(["raw_pg", "--conninfo", pg.conninfo(), ...])
        pg.wait_no_backends()                   # the client's backends ended and were reaped
        server_cpu = pg.cpu_s() - before        # postmaster, background processes, backends

Server() raises Unavailable (one line: why) when the server binaries, or a user to run them as,
are missing; the caller prints it as its skip line.

The cluster lives in a fresh directory `galay-pg-<our pid>-XXXXXX` under $TMPDIR or /tmp, owned by
the user the server runs as (PostgreSQL refuses root: `postgres` when we are root, else
ourselves). The server listens on a Unix socket in that directory (trust) and on a free loopback
TCP port (SCRAM password). The postmaster runs in a session of its own (children.popen), pinned
to `cpu` with taskset when given (its backends inherit it), with a parent-death signal (SIGKILL)
through setpriv, so that it never outlives this process: close() stops it (fast shutdown,
SIGKILL after a deadline) and removes the directory, and so does children.py's stop_all (at
exit, on SIGINT, SIGTERM and SIGHUP) before it signals the other children; a process killed
outright takes its server along, and the next Server sweeps the directory it left.

Server CPU (server_cpu_s): the postmaster's own user+system time, that of the children it has
reaped (cutime+cstime: a backend's once its client disconnected) and that of its live children
(backends, checkpointer, walwriter ...), in clock ticks. Read it while no client connects or
disconnects (before a client starts, and after wait_no_backends()): a backend reaped between
the two halves of a read would count twice or not at all.
"""
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import children

PREFIX = "galay-pg-"
_live = set()


class Unavailable(RuntimeError):
    """No PostgreSQL server can be started here; str() is the one-line reason."""


def bindir():
    """The directory with `initdb` and `postgres`: $GALAY_PG_BINDIR, else the newest Debian
    /usr/lib/postgresql/<version>/bin, else `pg_config --bindir`. Raises Unavailable."""
    def has(d):
        return all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "postgres"))
    env = os.environ.get("GALAY_PG_BINDIR")
    if env:
        if has(env):
            return env
        raise Unavailable(f"GALAY_PG_BINDIR={env} has no initdb and postgres")
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        m = re.match(r"/usr/lib/postgresql/(\d+)", d)
        if m and has(d):
            found.append((int(m.group(1)), d))
    if found:
        return max(found)[1]
    if shutil.which("pg_config"):
        r = children.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if r.returncode == 0 and has(r.stdout.strip()):
            return r.stdout.strip()
    raise Unavailable("postgresql server binaries not found: apt-get install postgresql "
                      "(or set GALAY_PG_BINDIR to the directory with initdb and postgres)")


def _run_as():
    """The argv prefix that runs a command as the server's user with a parent-death signal."""
    if os.geteuid() != 0:
        return ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise Unavailable("running as root and there is no 'postgres' user to run the server "
                          "as (PostgreSQL refuses root): apt-get install postgresql creates it")
    if shutil.which("setpriv") is None:
        raise Unavailable("setpriv (util-linux) is needed to run the server as postgres")
    return ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--clear-groups",
            "--pdeathsig", "KILL", "--"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def child_pids(pid):
    """Direct children of `pid` (every thread's list); [] when it is gone."""
    out = []
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(os.path.join(task, "children")) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def server_cpu_s(pid):
    """CPU seconds of the server whose postmaster is `pid` (see the module's notes): its own,
    its reaped children's and its live children's user+system time. None when it is gone."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for child in child_pids(pid):
        try:
            f = _stat_fields(child)
            total += int(f[11]) + int(f[12])
        except (OSError, IndexError, ValueError):
            pass  # ended meanwhile: counted in the postmaster's cutime once reaped
    try:
        f = _stat_fields(pid)
    except (OSError, IndexError, ValueError):
        return None
    return (total + int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / tick


def processes_in(path):
    """The processes tied to `path`: working directory inside it, or `path` on their command
    line (a postmaster's cwd is its data directory; backends inherit it)."""
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        pid = int(d[6:])
        if pid == os.getpid():
            continue
        try:
            cwd = os.readlink(d + "/cwd")
            if cwd == path or cwd.startswith(path + "/"):
                out.append(pid)
                continue
        except OSError:
            pass
        try:
            with open(d + "/cmdline", "rb") as f:
                if path.encode() in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out


def _kill_and_wait(pids, timeout=30):
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in pids:
        children.wait_gone(p, timeout)


def _sweep(base):
    """Removes the directories of servers whose owning process has ended without removing them."""
    for d in glob.glob(os.path.join(base, PREFIX + "*")):
        m = re.match(re.escape(PREFIX) + r"(\d+)-", os.path.basename(d))
        if not m or int(m.group(1)) == os.getpid() or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        _kill_and_wait(processes_in(d))
        shutil.rmtree(d, ignore_errors=True)


def _cleanup_all():
    for s in list(_live):
        s.close()


def _tail(path, n=1500):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return text if len(text) <= n else "..." + text[-n:]


class Server:
    """A running PostgreSQL server of its own (see the module's notes); a context manager."""

    def __init__(self, role="galay", password="galay-bench-password", max_connections=200,
                 cpu=None, base=None, ready_timeout=60):
        self.role, self.password, self.cpu = role, password, cpu
        self.ready_timeout = ready_timeout
        self.bin = bindir()
        self._prefix = _run_as()
        self.proc, self.port = None, None
        base = base or tempfile.gettempdir()
        _sweep(base)
        children.at_stop(_cleanup_all)  # a fast shutdown first, before stop_all's SIGTERM
        self.dir = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base)
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "server.log")
        _live.add(self)
        try:
            if len(self.dir) + 17 > 107:
                raise RuntimeError(f"{self.dir} is too long for a Unix socket path "
                                   "(set TMPDIR shorter)")
            if os.geteuid() == 0:
                pw = pwd.getpwnam("postgres")
                os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            os.chmod(self.dir, 0o700)
            self._initdb(max_connections)
            for attempt in range(5):  # a port free a moment ago may be taken by the time it binds
                before = len(_tail(self.log_path, 1 << 30))
                try:
                    self._start_on(_free_port())
                    break
                except RuntimeError:
                    fresh = _tail(self.log_path, 1 << 30)[before:]
                    if attempt == 4 or "Address already in use" not in fresh:
                        raise
        except BaseException:
            self.close()
            raise

    def _spawn(self, argv, log, cwd):
        with open(log, "ab") as out:
            if os.geteuid() == 0:
                pw = pwd.getpwnam("postgres")
                os.chown(log, pw.pw_uid, pw.pw_gid)
            pin = ["taskset", "-c", str(self.cpu)] if self.cpu is not None else []
            return children.popen(self._prefix + pin + argv, stdin=subprocess.DEVNULL,
                                  stdout=out, stderr=out, cwd=cwd, start_new_session=True)

    def _initdb(self, max_connections):
        pwfile = os.path.join(self.dir, "pwfile")
        with open(pwfile, "w") as f:
            f.write(self.password + "\n")
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        log = os.path.join(self.dir, "initdb.log")
        p = self._spawn([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", self.role,
                         f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                         "--no-sync", "--locale=C", "-E", "UTF8", "--no-instructions"],
                        log, self.dir)
        try:
            rc = p.wait(timeout=self.ready_timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise RuntimeError(f"initdb did not finish within {self.ready_timeout} s: "
                               f"{_tail(log)}")
        if rc != 0:
            raise RuntimeError(f"initdb failed (exit {rc}; the server's user must reach "
                               f"{self.dir}): {_tail(log)}")
        os.unlink(pwfile)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"\n# galay benchmark server\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.dir}'\n"
                    f"max_connections = {max_connections}\n"
                    "shared_buffers = 32MB\nfsync = off\nsynchronous_commit = off\n"
                    "full_page_writes = off\nautovacuum = off\n")

    def _start_on(self, port):
        self.port = port
        self.proc = self._spawn([os.path.join(self.bin, "postgres"), "-D", self.data,
                                 "-p", str(port)], self.log_path, self.data)
        self._wait_ready()

    def _accepting(self):
        """The postmaster has written `ready` into postmaster.pid and the TCP port answers."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                lines = f.read().splitlines()
        except OSError:
            return False
        if len(lines) < 8 or lines[7].strip() != "ready":
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def _wait_ready(self):
        deadline = time.monotonic() + self.ready_timeout
        while True:
            try:  # its exit ends the wait at once; otherwise this paces the checks
                rc = self.proc.wait(timeout=0.02)
                self.proc = None
                raise RuntimeError(f"postgres exited ({rc}) before accepting connections on "
                                   f"port {self.port}: {_tail(self.log_path)}")
            except subprocess.TimeoutExpired:
                pass
            if self._accepting():
                return
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"postgres did not accept connections within "
                                   f"{self.ready_timeout} s: {_tail(self.log_path)}")

    @property
    def pid(self):
        """The postmaster's pid, or None when stopped."""
        return self.proc.pid if self.proc else None

    def conninfo(self, tcp=True, password=None):
        """libpq's connection string: TCP with the password (or `password`), or the socket."""
        if not tcp:
            return f"host={self.dir} port={self.port} dbname=postgres user={self.role}"
        pw = self.password if password is None else password
        return (f"host=127.0.0.1 port={self.port} dbname=postgres user={self.role} "
                f"password={pw}")

    def url(self, password=None):
        """The same TCP connection as a URL (pgx, tokio-postgres)."""
        pw = self.password if password is None else password
        return f"postgres://{self.role}:{pw}@127.0.0.1:{self.port}/postgres?sslmode=disable"

    def log(self):
        return _tail(self.log_path, 1 << 30)

    def processes(self):
        """The postmaster and its children, or [] when stopped."""
        return [self.pid] + child_pids(self.pid) if self.proc else []

    def backends(self):
        """The pids of the client backends (their title is `postgres: <role> <db> ...`)."""
        out = []
        for p in child_pids(self.pid) if self.proc else []:
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if f.read().startswith(f"postgres: {self.role} ".encode()):
                        out.append(p)
            except OSError:
                pass
        return out

    def wait_no_backends(self, timeout=30):
        """Waits until every client backend has ended and been reaped; False at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.backends()
            if not left:
                return True
            for p in left:
                if not children.wait_gone(p, max(0.0, deadline - time.monotonic())):
                    return False
            # An ended backend stays listed until the postmaster reaps it (a moment later).
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)

    def cpu_s(self):
        return server_cpu_s(self.pid) if self.proc else None

    def stop(self, timeout=30):
        """Fast shutdown (SIGINT); SIGKILL to the postmaster and its children at the deadline."""
        if not self.proc:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout)
            self.proc = None
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        """SIGKILL to the postmaster and every child, waiting until all have ended (a crash)."""
        if self.proc:
            os.kill(self.proc.pid, signal.SIGSTOP)  # forks nothing between listing and kill
            _kill_and_wait(child_pids(self.proc.pid) + [self.proc.pid])
            self.proc.wait()
            self.proc = None
        _kill_and_wait(processes_in(self.dir))

    def start(self):
        """Starts again on the same directory and port, returning once it accepts."""
        if not self.proc:
            self._start_on(self.port)

    def restart(self):
        self.stop()
        self.start()

    def close(self):
        """Stops the server and removes its directory (idempotent)."""
        try:
            self.stop()
        finally:
            if os.path.isdir(self.dir):
                _kill_and_wait(processes_in(self.dir))
                shutil.rmtree(self.dir, ignore_errors=True)
            _live.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
