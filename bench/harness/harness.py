"""What every bench/ script shares: ports and server start/stop, CPU and memory accounting, and
the one spread and verdict every study is judged by. Standard library only.

Ports and servers:
  free_port()                  a free port below the ephemeral range
  resolve(cmd, bindir, port)   a shell-like command string to argv ({port} filled, binary in bindir)
  label_of(cmd)                a command string without its {port}, for tables
  wait_accepting(proc, port)   polls a TCP connect until the server accepts (False if it died)
  stop(proc, sig, timeout)     stops a server, killing its process group if it does not exit in
                               time (children.stop: every process is started through children.py)
  raise_nofile()               RLIMIT_NOFILE soft limit up to the hard limit
  temp_dir(name)               a directory galay-<name>-XXXXXXXX in $TMPDIR, removed at the end
  start_pinned(cmd, cpu, ...)  a server on one CPU (taskset), returned once it accepts
  veth_netns(srv_cpu, cli_cpu) a network namespace joined by a veth pair, RPS steered (a with)
Rounds (every contender once per round, ratios taken within a round):
  run_rounds(names, n, run, describe, rotate)  the rounds, each run printed as it ends
  round_ratio(rounds, name, ref, key)          spread of name/ref over the rounds
CPU and memory accounting:
  cpu_busy_s(cpus)             busy seconds of some CPUs (or of the machine) since boot
  cpu_irq_s(cpus)              irq + softirq seconds of some CPUs since boot (/proc/stat)
  irq_time_accounted()         whether the kernel takes irq time out of tasks' time
  proc_cpu_s(pid)              utime+stime of a process (ticks)
  task_cpu_s(pid)              time on a CPU of a process's live threads (schedstat: nanoseconds)
  tree_pids(pid), tree_cpu_s(pid)  a process and its descendants, and their CPU seconds
  children_cpu_s()             user+system seconds of the reaped children of this process
  proc_status(pid, key)        a kB figure of /proc/PID/status (VmRSS, VmHWM)
  RssSampler(pid)              a thread keeping the peak VmRSS of a process
  loadavg()                    the 1-minute load average
Spreads and verdicts (a ratio is quoted as median [min-max] over alternating rounds):
  spread(values), median_min_max(values), fmt_spread(s), iqr(values), median_of(runs, key)
  verdict(s)                   "faster"/"slower" only when the whole spread is on one side of 1.00
  criterion_verdict(s, t)      a threshold criterion read off the whole spread
"""
import contextlib
import gzip
import os
import random
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import children

# ---------------------------------------------------------------------------------------------
# Ports and servers
# ---------------------------------------------------------------------------------------------



def cargo_build(crate_dir, binary):
    """Build the Rust control group in `crate_dir` (its Cargo.lock pinned) with cargo: returns
    (path of `binary`, None), or (None, why not: no cargo, or the build's last error line)."""
    if shutil.which("cargo") is None:
        return None, "cargo not found (Debian: cargo)"
    r = children.run(["cargo", "build", "--release", "--locked", "-q", "--manifest-path",
                      os.path.join(crate_dir, "Cargo.toml")], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"cargo build failed ({last})"
    return os.path.join(crate_dir, "target", "release", binary), None

def go_build(src_dir, out, package="."):
    """Build the Go control group `package` of the module in `src_dir` (its go.sum pinned, the
    local toolchain only, no cgo) into `out`: returns (out, None), or (None, why not: no go, or
    the end of the build's output)."""
    go = shutil.which("go")
    if go is None:
        return None, "no Go toolchain on PATH"
    env = dict(os.environ, GOFLAGS="-mod=mod", CGO_ENABLED="0", GOTOOLCHAIN="local")
    r = children.run([go, "build", "-o", out, package], cwd=src_dir, env=env,
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        name = os.path.relpath(src_dir, root)
        return None, f"build of {name} failed: {r.stdout.strip()[-200:]}"
    return out, None


def free_port():
    """A free port below the ephemeral range, so a client's 10,000 source ports never take it
    between this check and the server's bind."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError):
        low = 32768
    for _ in range(100):
        port = random.randrange(10000, max(low, 10001))
        with socket.socket() as s:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
                s.bind(("0.0.0.0", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def resolve(cmd, bindir, port):
    """argv of a shell-like command string: `{port}` replaced, a bare first word found in
    `bindir` run from there."""
    argv = shlex.split(cmd.replace("{port}", str(port)))
    if argv and "/" not in argv[0] and bindir:
        cand = os.path.join(bindir, argv[0])
        if os.access(cand, os.X_OK):
            argv[0] = cand
    return argv


def label_of(cmd):
    return " ".join(cmd.replace("{port}", "").split())


def wait_accepting(proc, port, timeout, host="127.0.0.1"):
    """Polls a TCP connect to `host` until the server accepts; False if it died or timed out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


stop = children.stop


def start_pinned(cmd, cpu, bindir, port, env=None, timeout=10, host="127.0.0.1", prefix=()):
    """Starts a server (a command string for resolve(), or an argv) alone on CPU `cpu`
    (taskset), stdin and stdout closed, stderr kept, `env` added to the environment; returns it
    once it accepts on `host`:`port`. `prefix` goes before taskset and must exec, not fork
    (veth_netns()'s `ip netns exec NAME`), so the process returned is the server itself. A
    server that dies or never accepts is stopped and RuntimeError raised with its command line
    and the end of its stderr."""
    argv = list(prefix) + ["taskset", "-c", str(cpu)] + (
        resolve(cmd, bindir, port) if isinstance(cmd, str) else list(cmd))
    proc = children.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL,
                          env=None if env is None else dict(os.environ, **env))
    if not wait_accepting(proc, port, timeout, host):
        err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
        stop(proc)
        raise RuntimeError(f"{' '.join(argv)} did not accept on port {port}: "
                           f"{err.strip()[-300:]}")
    return proc


class NetnsError(RuntimeError):
    """A network namespace could not be set up: no `ip`, no CAP_NET_ADMIN, no veth or RPS."""


class Netns:
    """What veth_netns() yields: the namespace's name, the two ends of the veth pair and their
    addresses, and `prefix`, the argv that runs a command inside the namespace."""

    def __init__(self, name, host_if, ns_if, host_addr, ns_addr):
        self.name, self.host_if, self.ns_if = name, host_if, ns_if
        self.host_addr, self.ns_addr = host_addr, ns_addr
        self.prefix = ["ip", "netns", "exec", name]


NETNS_TAG = "gkv"  # names are gkv<pid>-<2 hex>: the pid of the run that made them


def _ip(*args, check=True):
    r = children.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {r.stderr.strip() or f'exit {r.returncode}'}")
    return r


def _end_netns(name):
    """Ends every process in namespace `name` (SIGTERM, SIGKILL after children.GRACE), then
    deletes it, which destroys its veth pair too. `ip netns del` alone would only unlink the
    name: a process inside keeps the namespace, and its ports, alive."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        r = _ip("netns", "pids", name, check=False)
        left = [int(p) for p in r.stdout.split() if p.isdigit() and int(p) != os.getpid()]
        deadline = time.monotonic() + children.GRACE
        for p in left:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for p in left:
            children.wait_gone(p, max(0.0, deadline - time.monotonic()))
    _ip("netns", "del", name, check=False)


def _sweep_stale_netns():
    """Ends the namespaces, and the processes in them, that a run which has died left behind (its
    pid is gone)."""
    r = _ip("netns", "list", check=False)
    for line in r.stdout.splitlines():
        m = re.match(rf"({NETNS_TAG}(\d+)-[0-9a-f]{{2}})\b", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            _end_netns(m.group(1))


def _free_subnet():
    """A /30 in 10.213.0.0/16 that no interface here uses."""
    used = _ip("-4", "-o", "addr", "show", check=False).stdout
    for _ in range(100):
        a, b = random.randrange(256), random.randrange(0, 256, 4)
        if f"10.213.{a}.{b + 1}/" not in used and f"10.213.{a}.{b + 2}/" not in used:
            return f"10.213.{a}.{b + 1}", f"10.213.{a}.{b + 2}"
    raise NetnsError("no free /30 in 10.213.0.0/16")


def _cpu_list(cpus):
    """CPU numbers of a taskset-style list ("1", "0,2", "0-3")."""
    out = []
    for part in str(cpus).split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def _set_rps(prefix, dev, cpus):
    """Steers `dev`'s receive processing to the CPUs `cpus` (RPS), writing its rx queue's mask
    from inside the namespace `prefix` runs in (sysfs shows a namespace's own devices)."""
    path = f"/sys/class/net/{dev}/queues/rx-0/rps_cpus"
    mask = sum(1 << c for c in _cpu_list(cpus))
    r = children.run(list(prefix) + ["sh", "-c", f'echo {mask:x} > "$0"', path],
                     capture_output=True, text=True)
    if r.returncode != 0:
        raise NetnsError(f"RPS on {dev} (writing {path}): {r.stderr.strip()}")


@contextlib.contextmanager
def veth_netns(server_cpu, client_cpu):
    """A network namespace joined to this one by a veth pair with private addresses (a /30 in
    10.213.0.0/16), for a server to run in (`ip netns exec`, Netns.prefix) and a client here to
    reach at Netns.ns_addr. RPS on each end steers receive processing to the receiver's CPU:
    the namespace's end (the server receiving) to `server_cpu`, this namespace's end (the client
    receiving) to `client_cpu`. Yields a Netns; always torn down on leaving, on an error,
    Ctrl-C or SIGTERM (children.py turns those into exceptions once it has stopped the
    servers), every process left inside it ended first. Names carry this process's pid, so a run
    that was killed -9 never blocks the next one, which ends what it left. Raises NetnsError (one
    line: why) without `ip`, CAP_NET_ADMIN or veth."""
    if shutil.which("ip") is None:
        raise NetnsError("ip (iproute2) is not installed")
    _sweep_stale_netns()
    name = f"{NETNS_TAG}{os.getpid()}-{random.randrange(256):02x}"
    host_if, ns_if = name + "h", name + "n"
    host_addr, ns_addr = _free_subnet()
    made = False
    try:
        r = _ip("netns", "add", name, check=False)
        if r.returncode != 0:
            raise NetnsError(f"ip netns add: {r.stderr.strip()} (needs root or CAP_NET_ADMIN)")
        made = True
        ns = Netns(name, host_if, ns_if, host_addr, ns_addr)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", name)
        _ip("addr", "add", host_addr + "/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", name, "addr", "add", ns_addr + "/30", "dev", ns_if)
        _ip("-n", name, "link", "set", ns_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        _set_rps(ns.prefix, ns_if, server_cpu)
        _set_rps((), host_if, client_cpu)
        yield ns
    finally:
        if made:
            _end_netns(name)  # takes the veth pair with it
            _ip("link", "del", host_if, check=False)  # already gone unless the move failed


@contextlib.contextmanager
def bench_network(args):
    """The network a static-file run uses: `args.net` "loopback" (nothing to set up) or "veth"
    (veth_netns on args.server_cpu and args.client_cpu). Sets args.host (the address the client
    connects to) and args.prefix (the argv that runs the server there); yields the Netns, or None
    on loopback."""
    if args.net == "loopback":
        args.host, args.prefix = "127.0.0.1", ()
        yield None
        return
    with veth_netns(args.server_cpu, args.client_cpu) as ns:
        args.host, args.prefix = ns.ns_addr, ns.prefix
        yield ns


def nginx_binary():
    """nginx's path (PATH, else Debian's /usr/sbin/nginx), or None."""
    if shutil.which("nginx"):
        return shutil.which("nginx")
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


def nginx_static_conf(prefix, servers, connections=1024):
    """Writes `prefix`/nginx.conf for one nginx worker in the foreground whose files (logs, pid,
    temporary paths) all live in `prefix`, keep-alive without a request limit, no access log;
    `servers`: the text of its `server { ... }` blocks. Returns the file's path; run it as
    `nginx -p prefix -c path`."""
    user = "user root;" if os.geteuid() == 0 else ""
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""{user} daemon off; master_process off; worker_processes 1;
error_log {prefix}/error.log warn; pid {prefix}/nginx.pid;
events {{ worker_connections {connections}; }}
http {{ access_log off; keepalive_requests 1000000000; client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy; fastcgi_temp_path {prefix}/fcgi;
  uwsgi_temp_path {prefix}/uwsgi; scgi_temp_path {prefix}/scgi;
  {servers} }}
""")
    return conf


def temp_dir(name):
    """A fresh directory `galay-<name>-XXXXXXXX` under $TMPDIR (or /tmp), removed when the script
    ends however it ends, after its children have been stopped (children.at_exit): a
    benchmark's temporary files are recognisable by name and never outlive its run."""
    path = tempfile.mkdtemp(prefix=f"galay-{name}-")
    children.at_exit(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---------------------------------------------------------------------------------------------
# CPU and memory accounting
# ---------------------------------------------------------------------------------------------


def cpu_busy_s(cpus=None):
    """Busy seconds (everything but idle and iowait) since boot of the given CPUs (a collection
    of numbers as strings), or of the whole machine when `cpus` is None."""
    want = {""} if cpus is None else {str(c) for c in cpus}
    tick = os.sysconf("SC_CLK_TCK")
    busy = 0.0
    with open("/proc/stat") as f:
        for line in f:
            name, *vals = line.split()
            if name.startswith("cpu") and name[3:] in want:
                v = [int(x) for x in vals]
                busy += (sum(v[:8]) - v[3] - v[4]) / tick  # user..steal minus idle, iowait
    return busy


def cpu_irq_s(cpu):
    """irq + softirq seconds of the CPUs `cpu` (a taskset-style list) since boot, from
    /proc/stat: work done in interrupt context, which /proc/stat counts there (by the tick that
    lands in it) whether the CPU was running a task (whose own time then includes it too,
    unless the kernel has CONFIG_IRQ_TIME_ACCOUNTING) or idle (then charged to no task)."""
    want = {f"cpu{c}" for c in _cpu_list(cpu)}
    tick = os.sysconf("SC_CLK_TCK")
    total, seen = 0, set()
    with open("/proc/stat") as f:
        for line in f:
            name, *vals = line.split()
            if name in want:
                total += int(vals[5]) + int(vals[6])
                seen.add(name)
    if seen != want:
        raise ValueError(f"no {', '.join(sorted(want - seen))} in /proc/stat")
    return total / tick


def irq_time_accounted():
    """True when the kernel takes interrupt time out of tasks' time
    (CONFIG_IRQ_TIME_ACCOUNTING), False when it does not, None when its config is not readable."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return "CONFIG_IRQ_TIME_ACCOUNTING=y" in f.read()
    except OSError:
        pass
    try:
        with open(f"/boot/config-{os.uname().release}") as f:
            return "CONFIG_IRQ_TIME_ACCOUNTING=y" in f.read()
    except OSError:
        return None


def proc_cpu_s(pid):
    """utime+stime of `pid` in seconds (clock ticks), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def task_cpu_s(pid):
    """CPU seconds of `pid`'s live threads from /proc/PID/task/*/schedstat (nanoseconds of time
    on a CPU, not ticks: /proc/PID/stat's utime+stime count 250 Hz ticks, a sampling error of
    ~1-2% over a few seconds at the load here), or None when schedstat is not there
    (CONFIG_SCHED_INFO unset)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return total / 1e9


def tree_pids(pid):
    """`pid` and its descendants (nginx: master and worker)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def tree_cpu_s(pid):
    """CPU seconds of a server's process tree (threads that exited are not counted; none of
    the servers measured here ends a thread while it serves)."""
    total = 0.0
    for p in tree_pids(pid):
        v = task_cpu_s(p)
        if v is None:
            v = proc_cpu_s(p)
        total += v or 0.0
    return total


def children_cpu_s():
    """User+system seconds of the children of this process that have been waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_status(pid, key):
    """A kB figure from /proc/PID/status (VmRSS, VmHWM), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class RssSampler(threading.Thread):
    """Samples VmRSS every 50 ms while a client runs; keeps the peak."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, None, threading.Event()

    def run(self):
        while not self.done.wait(0.05):
            v = proc_status(self.pid, "VmRSS")
            if v is not None and (self.peak is None or v > self.peak):
                self.peak = v


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ---------------------------------------------------------------------------------------------
# Rounds
# ---------------------------------------------------------------------------------------------


def run_rounds(names, rounds, run, describe, rotate=False):
    """Runs every one of `names` once per round: `run(name, rnd)` returns its record (a dict with
    "ok" and "problems"), and `describe(name, rnd, rec)` the line printed on stderr as each run
    ends (followed by "ok" or "FAILED: <problems>"). With `rotate` the order turns by one from
    round to round, so no contender always runs first. Returns ([{name: record} per round],
    whether any run failed)."""
    out, failed = [], False
    for rnd in range(rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)] if rotate else list(names)
        runs = {}
        for name in order:
            rec = run(name, rnd)
            runs[name] = rec
            state = "ok" if rec["ok"] else "FAILED: " + "; ".join(rec["problems"])
            print(f"{describe(name, rnd, rec)}  {state}", file=sys.stderr, flush=True)
            failed |= not rec["ok"]
        out.append(runs)
    return out, failed


def round_ratio(rounds, name, ref, key):
    """spread() of record[name][key] / record[ref][key], taken within each round where both runs
    are ok and have the figure."""
    def one(rd):
        a, b = rd[name], rd[ref]
        if not (a["ok"] and b["ok"]) or not a.get(key) or not b.get(key):
            return None
        return a[key] / b[key]
    return spread([one(rd) for rd in rounds])


# ---------------------------------------------------------------------------------------------
# Spreads and verdicts
# ---------------------------------------------------------------------------------------------


def spread(values):
    """median/min/max of a list of ratios (None entries dropped), or None."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


def fmt_spread(s):
    return "n/a" if s is None else f"{s['median']:.3f}x [{s['min']:.3f}-{s['max']:.3f}]"


def median_min_max(values):
    """spread() as a (median, min, max) tuple, for tables and JSON that want three numbers."""
    s = spread(values)
    return None if s is None else (s["median"], s["min"], s["max"])


def iqr(values):
    """(first quartile, third quartile); min and max below 4 values."""
    if len(values) < 4:
        return min(values), max(values)
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def median_of(runs, key):
    """The median of `key` over the runs that are ok and have it, or None."""
    vals = [r.get(key) for r in runs if r.get("ok") and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def verdict(s, lower_is_better=True, words=("faster", "slower"), level="level within noise"):
    """'faster'/'slower' only when the whole spread of the ratio is on one side of 1.00; a single
    ratio has no spread, so it gets no verdict."""
    if s is None:
        return "no data"
    if len(s.get("values", ())) == 1:
        return "one round: no verdict"
    better, worse = words
    if s["max"] < 1.0:
        return better if lower_is_better else worse
    if s["min"] > 1.0:
        return worse if lower_is_better else better
    return level


def criterion_verdict(s, threshold):
    """A study criterion on a ratio of times (A/B, lower is better) with threshold `threshold`:
    met when every pair's ratio is below it, not met when every pair's ratio is above it,
    otherwise undecided (the spread straddles the threshold)."""
    if s is None:
        return "no data"
    if s["max"] < threshold:
        return "met"
    if s["min"] >= threshold:
        return "not met"
    return "undecided (spread straddles the threshold)"
