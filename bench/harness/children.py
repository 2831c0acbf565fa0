"""Every process a bench script starts belongs to it and ends before it does. Standard library only.

    import children
    proc = children.popen(argv, ...)     # subprocess.Popen, in a process group of its own, tracked
    cp = children.run(argv, timeout=9)   # subprocess.run, the same way; its group ends with it
    children.stop(proc)                  # SIGTERM (or `sig`); SIGKILL at the deadline to it, its
                                         # group and what it started
    children.at_stop(fn)                 # fn() runs first when everything is stopped (a server
                                         # with a shutdown of its own: postgres.Server)
    children.at_exit(fn)                 # fn() runs at the script's end, after stop_all (removing
                                         # a directory its children were using)
    children.stop_all()                  # what the end of the script does
    children.descendants(pid), children.wait_gone(pid, timeout)

Importing this module (harness.py does, so every study does) makes the script own what it starts:
  - SIGINT, SIGTERM and SIGHUP stop every child at once (stop_all), then unwind the script
    (KeyboardInterrupt, or SystemExit(128 + signal)) so that its `finally` and `with` blocks run;
    a second signal while it does so is ignored, so that a clean-up (removing a network
    namespace, a temporary directory) is never cut short. A signal the script was started with
    ignored (nohup, a shell's background job) stays ignored.
  - atexit runs stop_all, then the at_exit functions: at the end of main(), after an uncaught
    exception, after sys.exit(), and after the unwinding a signal started.
stop_all: the at_stop functions; SIGTERM to every live child's process group and to every
process descending from this one; up to GRACE seconds for them to end (2 s more for a Python
script below this one, which spends that grace on its own children before its clean-up); then
whatever is left of them is frozen (SIGSTOP, so that nothing forks while it is listed) and killed
(SIGKILL), until nothing is left; the children are reaped.

Why a process group per child: a signal to the group reaches what the child started too (a
shell's commands, nginx's workers), and a Ctrl-C at the terminal reaches only the script, which
then stops its children in order instead of racing them. A server started under
`ip netns exec NAME` is the same process (ip execs it): it is tracked like any other, and
veth_netns() also ends whatever is left inside its namespace before deleting it.

What cannot be caught: SIGKILL of the script itself. Its children then outlive it; the next
veth_netns() ends a dead run's namespace with the processes in it, and tests/leftovers.py (around
`make test`) finds, names and ends whatever a test run left.
"""
import atexit
import os
import select
import signal
import subprocess
import sys
import threading
import time

GRACE = 5.0  # seconds to end after SIGTERM before SIGKILL

_live = {}  # pid -> Popen: every child started here and not yet reaped by stop() or run()
_hooks = []
_exit_hooks = []
_first_signal = None
_stopping = False
_owner = os.getpid()  # a forked copy of this process must not stop its parent's children


def popen(argv, **kw):
    """subprocess.Popen(argv, **kw) in a process group of its own (or the session of its own
    that `start_new_session` asks for), tracked until stop(), run() or the script's end."""
    if not kw.get("start_new_session"):
        kw.setdefault("process_group", 0)
    own_group = bool(kw.get("start_new_session")) or kw.get("process_group") == 0
    proc = subprocess.Popen(argv, **kw)
    proc.galay_own_group = own_group
    for pid, p in list(_live.items()):  # forget what was reaped elsewhere (communicate, wait)
        if p.returncode is not None:
            _live.pop(pid, None)
    _live[proc.pid] = proc
    return proc


def run(argv, *, input=None, capture_output=False, timeout=None, check=False, **kw):
    """subprocess.run(argv, ...) through popen(): on a timeout or an exception (Ctrl-C) its whole
    group is killed before this returns or raises, and what it left running in its group when it
    exited is killed too. Raises subprocess.TimeoutExpired and CalledProcessError as
    subprocess.run does."""
    if capture_output:
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
    if input is not None:
        kw["stdin"] = subprocess.PIPE
    with popen(argv, **kw) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
            raise subprocess.TimeoutExpired(proc.args, timeout, e.output, e.stderr) from None
        except BaseException:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            _end_group(proc, ())
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, out, err)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def stop(proc, sig=signal.SIGTERM, timeout=None):
    """Sends `sig` to `proc` (the process, not its group: a server's own shutdown); at the
    deadline (`timeout`, default GRACE seconds) SIGKILL to its group; once it has ended, SIGKILL
    to what is left of its group and of the processes it had started. Returns its exit status.
    Works on any Popen, not only popen()'s."""
    below = descendants(proc.pid) if proc.poll() is None else []
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.wait(timeout=GRACE if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            _kill(proc.pid, signal.SIGKILL)
            proc.wait()
    _end_group(proc, below)
    return proc.returncode


def at_stop(fn):
    """Runs fn() when stop_all() runs, before any child is signalled; once."""
    if fn not in _hooks:
        _hooks.append(fn)


def at_exit(fn):
    """Runs fn() when the script ends, after stop_all(); the last registered runs first."""
    _exit_hooks.append(fn)


def stop_all(grace=None):
    """Stops every process this one started and everything they started (see the module's notes);
    returns once none is left."""
    global _stopping
    if os.getpid() != _owner:
        return
    _stopping = True
    try:
        _stop_all(GRACE if grace is None else grace)
    finally:
        _stopping = False


def _stop_all(grace):
    for fn in list(_hooks):
        _hooks.remove(fn)
        try:
            fn()
        except Exception as e:  # one failed clean-up must not stop the others
            print(f"children: clean-up {getattr(fn, '__name__', fn)}: {e}", file=sys.stderr,
                  flush=True)
    procs = [p for p in list(_live.values()) if p.returncode is None]
    # The process groups to end: the children's own, and those of every process below this one
    # (a child started a moment ago, not yet tracked; what a child put in a group of its own). A
    # process forked just as its parent is ended is orphaned, but stays in its parent's group.
    groups = {p.pid for p in procs if getattr(p, "galay_own_group", False)}
    table = _table()
    below = _below(os.getpid(), table)
    groups |= {table[p][2] for p in below}
    groups.discard(os.getpgid(0))
    for g in groups:
        _killpg(g, signal.SIGTERM)
    for pid in below:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for pid in set(below) | {p.pid for p in procs}:
        wait_gone(pid, max(0.0, deadline - time.monotonic()))
    # A script of this harness below this one got the same SIGTERM and gives its own children the
    # same grace before it kills them, then removes its files: it needs more time than they do.
    # (nginx, signalled before its master loop starts, sleeps until the SIGKILL of that grace.)
    scripts = [pid for pid in below if _is_script(pid)]
    deadline = time.monotonic() + grace + 2.0
    for pid in scripts:
        wait_gone(pid, max(0.0, deadline - time.monotonic()))
    for _ in range(20):
        left = _freeze(groups)
        if not left:
            break
        for g in groups:
            _killpg(g, signal.SIGKILL)
        for pid in left:
            _kill(pid, signal.SIGKILL)
        for pid in left:
            wait_gone(pid, 1.0)
    for p in procs:  # (poll, not wait: a signal may have come in the middle of p.wait())
        if p.poll() is not None:
            _live.pop(p.pid, None)


def _is_script(pid):
    """Whether process `pid` is a Python interpreter running a script file (one of this harness,
    maybe, with a clean-up of its own), from its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return (len(argv) > 1 and b"python" in os.path.basename(argv[0])
            and argv[1].endswith(b".py"))


def descendants(pid):
    """The live (not zombie) processes below `pid`, from the parents in /proc/*/stat."""
    return _below(pid, _table())


def wait_gone(pid, timeout):
    """Waits until process `pid` (any, not only a child) has ended, a zombie included; False
    when it is still running at the deadline."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def _table():
    """{pid: (state, parent, process group)} of every live process (zombies left out)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[0] not in "ZX":
                out[int(d)] = (fields[0], int(fields[1]), int(fields[2]))
        except (OSError, IndexError, ValueError):
            continue
    return out


def _below(pid, table):
    kids = {}
    for p, (_, parent, _) in table.items():
        kids.setdefault(parent, []).append(p)
    below, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), ()):
            below.append(k)
            todo.append(k)
    return below


def _group_members(pgid):
    """The live processes of process group `pgid`."""
    return [p for p, (_, _, g) in _table().items() if g == pgid]


def _freeze(groups):
    """SIGSTOP to every live process below this one and in `groups` (which grows by the groups of
    what is found), listing again until the list no longer grows (a stopped process cannot fork);
    returns them."""
    stopped, mine = set(), os.getpgid(0)
    for _ in range(100):
        table = _table()
        found = set(_below(os.getpid(), table))
        groups |= {table[p][2] for p in found} - {mine}
        found |= {p for p, (_, _, g) in table.items() if g in groups}
        found.discard(os.getpid())
        new = found - stopped
        if not new:
            break
        for pid in new:
            _kill(pid, signal.SIGSTOP)
        stopped |= new
    return stopped


def _signal_group(proc, sig):
    """`sig` to `proc`'s process group while `proc` has not been reaped (its pid, the group's id,
    cannot be taken by another process before that); nothing when it has no group of its own."""
    if proc.returncode is not None or not getattr(proc, "galay_own_group", False):
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _end_group(proc, below):
    """Once `proc` has ended and been reaped: SIGKILL to what is left of its process group (a
    shell's background command) and of `below`, the processes it had started."""
    _live.pop(proc.pid, None)
    rest = set(below)
    if getattr(proc, "galay_own_group", False):
        rest.update(_group_members(proc.pid))
    for pid in rest:
        _kill(pid, signal.SIGKILL)


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _on_signal(signum, frame):
    global _first_signal
    if _first_signal is not None or _stopping:
        return  # already stopping: let the clean-up under way finish
    _first_signal = signum
    stop_all()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def _at_exit():
    stop_all()
    if os.getpid() != _owner:
        return
    while _exit_hooks:
        fn = _exit_hooks.pop()
        try:
            fn()
        except Exception as e:
            print(f"children: at exit {getattr(fn, '__name__', fn)}: {e}", file=sys.stderr,
                  flush=True)


def _install():
    atexit.register(_at_exit)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(sig, _on_signal)


_install()
