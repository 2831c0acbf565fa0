#!/usr/bin/env python3
"""Runs a command (a test suite, a benchmark run) and fails when it left anything behind.

    python3 tests/leftovers.py [--keep] [--grace SECONDS] -- COMMAND [ARG...]

What "this run" is, on a machine where other checkouts run their tests at the same time:
  - a temporary directory of its own, galay-run-XXXXXXXX under $TMPDIR (or /tmp), given to the
    command as TMPDIR: every temporary file or directory of the run is made inside it;
  - GALAY_RUN, a list of run names in the environment (ours appended), inherited by everything
    the command starts;
  - this process is the command's child subreaper (prctl): a process whose parent ended is
    reparented here instead of to init, so whatever the run started stays below it.
When the command has exited, these are left behind and named, each with the reason it counts:
  - every live process below this one (started by the run: a server a test did not stop, a
    grandchild of a command that was killed), every process with our run in its GALAY_RUN, and
    every process whose working directory or command line is inside the run's directory;
  - the ports they hold: their listening TCP and Unix sockets and bound UDP sockets, read from
    their descriptors and /proc/PID/net of their own network namespace (a port is held only as
    long as some process holds its socket, so a port of the run still held has its holder in
    that list);
  - whatever is still in the run's directory.
A process that ends within --grace seconds (default 3) of the command is not counted: a test's
server may still be exiting from the signal it was sent. What is found is then ended (SIGTERM,
SIGKILL after --grace) and the run's directory removed, unless --keep, so that the next run is
not measured beside it.

Exit status: the command's when it failed; else 1 when something was left behind, 0 when
nothing was. Bad usage: one line and exit 2. Nested runs (CI's phases around `make test`) each
check their own.
"""
import ctypes
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PR_SET_CHILD_SUBREAPER = 36
ENV = "GALAY_RUN"


def usage_error(msg):
    print(f"leftovers.py: error: {msg} (see --help)", file=sys.stderr)
    sys.exit(2)


def parse(argv):
    keep, grace, i = False, 3.0, 0
    while i < len(argv) and argv[i].startswith("-"):
        a = argv[i]
        i += 1
        if a == "--":
            break
        if a in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        if a == "--keep":
            keep = True
        elif a == "--grace":
            if i >= len(argv):
                usage_error("--grace: needs a value")
            try:
                grace = float(argv[i])
            except ValueError:
                grace = -1.0
            if not 0 <= grace <= 600:
                usage_error(f"--grace: {argv[i]!r} is not a number of seconds, 0..600")
            i += 1
        else:
            usage_error(f"{a}: unknown option")
    if i >= len(argv):
        usage_error("no COMMAND to run")
    return keep, grace, argv[i:]


# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------

def stat(pid):
    """(state, parent pid) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def all_pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def descendants(pid, pids):
    kids = {}
    for p in pids:
        s = stat(p)
        if s and s[0] not in "ZX":
            kids.setdefault(s[1], []).append(p)
    below, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), ()):
            below.append(k)
            todo.append(k)
    return below


def read(path, binary=False):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data if binary else data.decode(errors="replace")
    except OSError:
        return None


def command_line(pid):
    raw = read(f"/proc/{pid}/cmdline", binary=True) or b""
    return " ".join(raw.replace(b"\0", b" ").decode(errors="replace").split())


def in_run(pid, run_id, run_dir):
    """Why `pid`, not below this process, still belongs to the run; None when it does not."""
    env = read(f"/proc/{pid}/environ", binary=True) or b""
    for var in env.split(b"\0"):
        if var.startswith(ENV.encode() + b"=") and \
                run_id in var.split(b"=", 1)[1].decode(errors="replace").split(":"):
            return f"{ENV} names this run"
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        if cwd == run_dir or cwd.startswith(run_dir + "/"):
            return "its working directory is in the run's directory"
    except OSError:
        pass
    if run_dir in command_line(pid):
        return "its command line names the run's directory"
    return None


def find_processes(run_id, run_dir):
    """{pid: why it counts} of the live processes this run left."""
    me = os.getpid()
    pids = all_pids()
    found = {p: "started by the run (below it)" for p in descendants(me, pids)}
    for p in pids:
        if p in found or p == me:
            continue
        s = stat(p)
        if s is None or s[0] in "ZX":
            continue
        why = in_run(p, run_id, run_dir)
        if why:
            found[p] = why
    return found


def reap():
    """Reaps the orphans reparented here that have ended (this process is their subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def wait_gone(pids, timeout):
    """Waits up to `timeout` seconds until every process of `pids` has ended."""
    deadline = time.monotonic() + timeout
    for p in pids:
        try:
            fd = os.pidfd_open(p)
        except (ProcessLookupError, OSError):
            continue
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
    reap()


def end(pids, grace):
    """SIGTERM, then SIGSTOP and SIGKILL after `grace` seconds, to `pids`."""
    for sig in (signal.SIGTERM, signal.SIGSTOP, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if sig == signal.SIGTERM:
            wait_gone(pids, grace)
    wait_gone(pids, 10)


# ---------------------------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------------------------

def socket_inodes(pid):
    out = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def _addr(hexaddr, v6):
    ip, port = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    if v6:
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        return f"[{socket.inet_ntop(socket.AF_INET6, raw)}]:{int(port, 16)}"
    return f"{socket.inet_ntop(socket.AF_INET, raw[::-1])}:{int(port, 16)}"


def ports(pid):
    """The ports `pid` holds: 'tcp 0.0.0.0:8080', 'udp [::]:53', 'unix /path' (listening or
    bound), in its own network namespace."""
    inodes = socket_inodes(pid)
    if not inodes:
        return []
    held = []
    for proto, v6 in (("tcp", False), ("tcp6", True), ("udp", False), ("udp6", True)):
        text = read(f"/proc/{pid}/net/{proto}") or ""
        for line in text.splitlines()[1:]:
            f = line.split()
            if len(f) < 10 or f[9] not in inodes:
                continue
            listening = f[3] == "0A" if proto.startswith("tcp") else f[3] == "07"
            if listening:
                held.append(f"{proto[:3]} {_addr(f[1], v6)}")
    for line in (read(f"/proc/{pid}/net/unix") or "").splitlines()[1:]:
        f = line.split()
        if len(f) >= 8 and f[6] in inodes and f[5] == "01" and f[3] == "00010000":
            held.append(f"unix {f[7]}")  # listening (__SO_ACCEPTCON) and bound to a path
    return sorted(set(held))


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------

def run_command(cmd, env):
    """Runs `cmd`, passing SIGINT, SIGTERM and SIGHUP on, reaping orphans as they end; returns
    its exit status (128 + signal when a signal ended it)."""
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        print(f"leftovers.py: error: {cmd[0]}: {e.strerror}", file=sys.stderr)
        return 127

    def forward(signum, frame):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            break
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    rc = proc.returncode
    return 128 - rc if rc < 0 else rc


def main(argv):
    keep, grace, cmd = parse(argv)
    base = os.environ.get("TMPDIR") or tempfile.gettempdir()
    run_dir = os.path.realpath(tempfile.mkdtemp(prefix="galay-run-", dir=base))
    os.chmod(run_dir, 0o1777)  # a TMPDIR, like /tmp (a test's PostgreSQL runs as `postgres`)
    run_id = os.path.basename(run_dir)
    outer = os.environ.get(ENV)
    env = dict(os.environ, TMPDIR=run_dir, **{ENV: f"{outer}:{run_id}" if outer else run_id})
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("leftovers.py: warning: cannot become the run's child subreaper; orphans are "
              "found by GALAY_RUN and the run's directory only", file=sys.stderr)
    t0 = time.monotonic()
    rc = run_command(cmd, env)
    took = time.monotonic() - t0
    reap()

    found = find_processes(run_id, run_dir)
    if found:  # a process still exiting from a signal it was sent is not left behind
        wait_gone(list(found), grace)
        found = {p: why for p, why in find_processes(run_id, run_dir).items() if p in found}
    lines = []
    for pid, why in sorted(found.items()):
        held = ports(pid)
        s = stat(pid)
        lines.append(f"process {pid} (parent {s[1] if s else '?'}): {command_line(pid)[:300]}"
                     f" [{why}]" + (f"; holds {', '.join(held)}" if held else ""))
    try:
        entries = sorted(os.listdir(run_dir))
    except OSError:
        entries = []
    for name in entries:
        path = os.path.join(run_dir, name)
        kind = "directory" if os.path.isdir(path) and not os.path.islink(path) else "file"
        lines.append(f"temporary {kind} {path}")

    what = f"`{' '.join(' '.join(cmd).split())[:200]}` ({took:.0f} s)"
    if lines:
        print(f"leftovers: {what} left {len(lines)} thing(s) behind:", file=sys.stderr)
        for line in lines:
            print(f"  {line}", file=sys.stderr)
        if keep:
            print(f"leftovers: kept as found (--keep); the run's directory is {run_dir}",
                  file=sys.stderr)
    else:
        print(f"leftovers: {what} left no process, port or temporary file behind",
              file=sys.stderr)
    if not keep:
        if found:
            end(list(found), grace)
        shutil.rmtree(run_dir, ignore_errors=True)
    if rc != 0:
        return rc
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
