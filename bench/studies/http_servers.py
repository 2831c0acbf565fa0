#!/usr/bin/env python3
"""The io_uring survey's HTTP comparison, in one command.

    python3 bench/studies/http_servers.py [--bin build/release/bin] [-c 100,1000] [--pairs 3] [-d 5]
                                  [--warmup 1] [--scenarios fixed,file] [--mode both]
                                  [--slice 0.5] [--control] [--quick] [--out FILE.json]

Servers, each on CPU 0 (taskset), loaded by wrk (one thread) on CPU 1:
  galay-io_uring  http_server --backend io_uring (apps/http)
  galay-epoll     http_server --backend epoll
  go              Go net/http, GOMAXPROCS=1 (bench/control/go_http), as the survey had it
  nginx           Debian's nginx, one worker, `return 200 "..."` and the same static file
  raw_http        the hand-written epoll responder (bench/baselines/raw_http.cpp): the floor;
                  it answers every request with the fixed answer, so it runs in `fixed` only
Scenarios: `fixed` is GET / answering "Hello, World!" (the survey replaced its file by a constant
for the Go comparison); `file` is GET /page.html, a 1 KiB static file.

Every round runs every server once, in an order rotated from round to round (alternating, so a
drift of the shared machine falls on all of them); each run is a fresh server on a fresh port,
checked with one real request (status and body) before the load, then `--warmup` seconds of wrk,
then `-d` seconds measured. Columns are the survey's: requests, mean, median, p90, p95, p99, max
(ms), error %, std dev, throughput (requests/s); plus server CPU per request (time on a CPU of
the server's process tree over the measured run, from /proc/PID/task/*/schedstat: nanoseconds,
where /proc/PID/stat counts 250 Hz ticks). Percentiles come from wrk's histogram through a Lua
done() hook (wrk prints only 50/75/90/99).

`--mode interleaved` (part of the default `both`) measures CPU per request a second way, in
one run per round: every server started, each warmed up alone, then each loaded by its own wrk
(all on the client CPU), the wrks taking turns (SIGSTOP/SIGCONT) every `--slice` seconds until
each has had `-d` seconds. Only one server is loaded at a time, as when it runs alone, but the
others' turns are a second or two away instead of 10-40 s: on a shared machine whose speed
drifts, the spread of a ratio measured one at a time is mostly that drift. raw_http against
itself, 10 rounds of 4 s at 1,000 connections, gave 1.005x [0.886-1.154] one at a time and
0.984x [0.965-1.010] interleaved. Latencies are not reported in this mode (a paused wrk's
requests wait out the pause), and wrk's own timeout is raised so that a pause is not an error.

`--mode turns` (opt-in; `all` is both + turns) measures latencies and CPU per request in one
run per round, without wrk: every server started, then our own load generator, http_turns
(bench/baselines/http_turns.cpp, on the client CPU), gives them turns of `--slice` seconds. In a
server's turn every one of its `-c` keep-alive connections has one request outstanding, the next
sent as soon as a response is complete (closed loop: wrk -t1's shape); when the slice is over no
new request is sent and the turn ends once the outstanding responses are in, before the next
server's turn. No request is ever outstanding while its server waits for its turn, so the
latencies are kept, and a drift of the machine falls on all servers alike, as in interleaved.
Why not wrk: a SIGSTOPped wrk's requests wait out the pause, and pacing wrk with its Lua delay()
changed the load's shape (most connections sat in wrk's timer list). `--warmup` seconds of turns
per server are not counted, then each server gets `-d` seconds of measured turns, the order
rotated from one cycle of turns to the next. Latency: from the request's write to the read of
its response's last byte (http_turns' histogram, <1% error). Throughput: measured requests per
second of the server's own measured turns (first request to last response, drains included).
Server CPU per request here is the server tree's CPU over the whole http_turns run (connects,
warm-up and measured turns, the idle waits between turns, which cost next to nothing, and the
closes at the end) divided by every response the server sent in that run (warm-up included).
Accepting and closing 1,000 connections cost raw_http ~35 ms of CPU here: ~1% of a run of 1 s
warm-up + 2 s, less in longer runs. It is our generator, not wrk: absolute figures differ from
the sequential table's; the ratios between servers are what it is for. Turns mode adds one ratio,
"p99 turn by turn": http_turns also reports the p99 of each measured turn on its own; in every
cycle of turns the two servers' turn p99s are divided (the k-th turn of each, at most a few
slices apart), and the round's figure is the median of those per-cycle ratios. A stall of the
machine that falls in a few turns sets a run's overall p99 (on this VM a turn's p99 varies 2-3x
within one run, for every server, raw_http included), but moves only a few of the per-cycle
ratios: it is the tail of a typical slice of the run (with the client's own queueing in it where
the one-thread client saturates: 100 connections against the fastest servers), the overall p99
is what a client saw over the whole run. Both are reported; neither replaces the other.
Two rows show where the queue is: "client busy in the turns" (http_turns' CPU over the wall time
of a server's turns; near 100% the one-thread client, not the server, sets the pace) and "ready
connections per epoll_wait". And one more latency, "99% at the socket": up to the kernel's
receive timestamp of each response (SO_TIMESTAMPNS: on loopback, when the server sent it)
instead of the client's read, so without the client's own queue of ready responses; its ratio
is the column "p99 at the socket". In a closed loop the queue sits at the bottleneck: against a
server faster than the client most of the end-to-end latency is the client's.
`--rate R` (turns only) makes http_turns' load open-loop: in a server's turn requests fall due
at R per second, each sent on a
free connection when due (or when one frees up, even after the slice: every request due in a
turn is sent and measured), its latency counted from when it fell due; every server then gets
the same offered load, where the closed loop gives the faster one more requests per second and,
once the one-thread client is saturated, part of the client's queueing.

Ratios are galay / other measured in the same round, median [min-max] over the rounds, with a
verdict: faster/slower only when the whole spread is on one side of 1.00. A missing wrk, go or
nginx is one line in the output, not a failure. Exit status 1 when a galay server failed to start,
answered wrong, or had errors under load.

Standard library only. `suite_section()` is the short form `make bench` (bench/suite.py) runs.
"""
import argparse
import contextlib
import ctypes
import json
import math
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (ports, servers, CPU accounting, spreads and verdicts)

BODY = "Hello, World!"
FILE_NAME = "page.html"  # (not index.html: Go's FileServer redirects that to ./)
FILE_BODY = "".join(f"line {i:03d} of the static file bench/studies/http_servers.py serves\n"
                    for i in range(30))[:1024]

WRK_LUA = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"min": %d, "mean": %.3f, "stdev": %.3f, "max": %d, ' ..
    '"p50": %d, "p90": %d, "p95": %d, "p99": %d, "p99_9": %d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(95),
    latency:percentile(99), latency:percentile(99.9)))
end
"""

GALAY = ("galay-io_uring", "galay-epoll")
OTHERS = ("nginx", "go", "raw_http")
# `--control`: raw_http a second time, as if it were another server; its ratio to raw_http is
# what the method reads when nothing differs.
CONTROL = "raw_http-again"


def note(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------------------------

def nginx_conf(prefix, port, root):
    user = ""
    if os.geteuid() == 0:  # else the worker would switch to nobody; run as the current user
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};"
    return f"""{user}
daemon off;
master_process on;
worker_processes 1;
error_log stderr warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    default_type text/plain;
    keepalive_requests 100000000;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen {port} backlog=4096;
        location = / {{ return 200 "{BODY}"; }}
        location / {{ root {root}; }}
    }}
}}
"""


class Servers:
    """What can run here: name -> function(port) -> (argv, env, cwd)."""

    def __init__(self, bindir, work, want=None):
        """`want`: the names that will run (None: all); Go is built only when it is one."""
        self.bindir, self.work = bindir, work
        self.available, self.missing = {}, []
        self.root = os.path.join(work, "www")
        os.makedirs(self.root, exist_ok=True)
        os.chmod(work, 0o755)
        os.chmod(self.root, 0o755)
        with open(os.path.join(self.root, FILE_NAME), "w") as f:
            f.write(FILE_BODY)
        os.chmod(os.path.join(self.root, FILE_NAME), 0o644)

        server = os.path.join(bindir, "http_server")
        if os.access(server, os.X_OK):
            for be in ("io_uring", "epoll"):
                self.available[f"galay-{be}"] = (
                    lambda port, be=be: ([server, str(port), "--backend", be, "--root", self.root],
                                         None))
        else:
            self.missing.append(f"galay: {server} not built (make build)")

        go_bin = self._build_go() if want is None or "go" in want else None
        if go_bin:
            env = dict(os.environ, GOMAXPROCS="1")
            self.available["go"] = lambda port: (
                [go_bin, "-port", str(port), "-root", self.root], env)

        nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK)
                                           else None)
        if nginx:
            self.available["nginx"] = lambda port: self._nginx(nginx, port)
        else:
            self.missing.append("nginx: not installed (apt-get install nginx-light): skipped")

        raw = os.path.join(bindir, "raw_http")
        if os.access(raw, os.X_OK):
            self.available["raw_http"] = lambda port: ([raw, str(port)], None)
            self.available[CONTROL] = self.available["raw_http"]
        else:
            self.missing.append(f"raw_http: {raw} not built: skipped")

    def _build_go(self):
        out, why = harness.go_build(os.path.join(BENCH, "control", "go_http"),
                                    os.path.join(self.work, "go_http"))
        if out is None:
            self.missing.append(f"go: {why}: the Go server is skipped")
        return out

    def _nginx(self, nginx, port):
        prefix = tempfile.mkdtemp(prefix="nginx-", dir=self.work)
        os.chmod(prefix, 0o755)
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(prefix, port, self.root))
        return [nginx, "-p", prefix, "-c", conf], None


def http_get(port, path, timeout=5.0):
    """One request: (status, body) or raises. Reads the answer by its Content-Length (raw_http
    ignores `Connection: close`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while length is not None and len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    status = int(head.split(b" ", 2)[1])
    return status, body.decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------

def start_checked(servers, name, scenario, conns, args, logdir, seq, rec):
    """Starts `name` pinned to the server CPU on a fresh port and checks one real request
    (status and body). (proc, log, url); proc is None when it failed (`rec` says why)."""
    port = harness.free_port()
    argv, env = servers.available[name](port)
    tag = f"{seq:03d}-{name}-{scenario}-c{conns}"
    log = open(os.path.join(logdir, tag + ".server.log"), "w")
    proc = children.popen(["taskset", "-c", str(args.server_cpu)] + argv, env=env,
                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          preexec_fn=harness.raise_nofile)
    if not harness.wait_accepting(proc, port, 10.0):
        rec["problems"].append(f"did not accept on port {port} (exit {proc.poll()}); "
                               f"log {log.name}")
        return proc, log, None
    path = "/" if scenario == "fixed" else "/" + FILE_NAME
    want = BODY if scenario == "fixed" else FILE_BODY
    try:
        status, body = http_get(port, path)
    except (OSError, ValueError, IndexError) as e:
        status, body = None, str(e)
    if status != 200 or body != want:
        rec["problems"].append(f"GET {path}: status {status}, body {body[:60]!r}")
        return proc, log, None
    return proc, log, f"http://127.0.0.1:{port}{path}"


def wrk_argv(args, conns, lua, seconds, url):
    return ["taskset", "-c", str(args.client_cpu), "wrk", "-t1", f"-c{conns}", "--timeout", "3s",
            "-s", lua, f"-d{max(1, round(seconds))}s", url]


def fill_record(rec, proc, returncode, stdout, stderr, cpu_s, active_s=None):
    """The survey's columns from wrk's done() line, and the server's CPU over the run.
    `active_s`: the seconds wrk was loading the server when that was not all of its run
    (interleaved); its latencies then include the pauses and are left out."""
    lines = [l for l in stdout.splitlines() if l.startswith("{")]
    if returncode != 0 or not lines:
        rec["problems"].append(f"wrk exit {returncode}: {stderr.strip()[-200:]}")
        return
    r = json.loads(lines[-1])
    errors = sum(r["errors"].values())
    seconds = r["duration_us"] / 1e6 if active_s is None else active_s
    set_columns(rec, proc, r["requests"], errors, r["errors"],
                100.0 * errors / max(r["requests"] + r["errors"]["connect"], 1), seconds,
                r["latency_us"] if active_s is None else None, cpu_s, r["requests"])


def set_columns(rec, proc, requests, errors, error_detail, error_pct, seconds, lat, cpu_s,
                served):
    """The record's columns. `lat`: latencies in us (wrk's or http_turns' keys), or None when
    they mean nothing (interleaved wrks); `served`: the requests the server's CPU `cpu_s` was
    spent on."""
    if proc.poll() is not None:
        rec["problems"].append(f"server died during the run (exit {proc.returncode})")
    rec.update({
        "requests": requests,
        "errors": errors,
        "error_detail": error_detail,
        "error_pct": error_pct,
        "rps": requests / seconds if seconds > 0 else 0.0,
        "cpu_us_per_req": 1e6 * cpu_s / served if served else None,
        # What one fully busy server core would serve: on two cores wrk saturates its own
        # CPU first, so throughput measures the client and this measures the server.
        "rps_per_core": served / cpu_s if cpu_s > 0 else None,
        "server_cpu_pct": 100.0 * cpu_s / seconds if seconds > 0 else None,
    })
    for key, lkey in (("mean_ms", "mean"), ("p50_ms", "p50"), ("p90_ms", "p90"),
                      ("p95_ms", "p95"), ("p99_ms", "p99"), ("p99_9_ms", "p99_9"),
                      ("max_ms", "max"), ("stdev_ms", "stdev")):
        rec[key] = None if lat is None else lat[lkey] / 1000
    rec["ok"] = not rec["problems"]


def new_record(name, scenario, conns):
    return {"server": name, "scenario": scenario, "connections": conns, "ok": False,
            "problems": []}


def run_one(servers, name, scenario, conns, args, lua, logdir, seq):
    """One server alone: warm-up, then the measured run."""
    rec = new_record(name, scenario, conns)
    proc, log, url = start_checked(servers, name, scenario, conns, args, logdir, seq, rec)
    try:
        if url is None:
            return rec
        if args.warmup > 0:  # (wrk takes whole seconds)
            children.run(wrk_argv(args, conns, lua, args.warmup, url),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=harness.raise_nofile, timeout=args.warmup + 60)
        cpu0 = harness.tree_cpu_s(proc.pid)
        try:
            cp = children.run(wrk_argv(args, conns, lua, args.duration, url),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=harness.raise_nofile, timeout=args.duration + 60)
        except subprocess.TimeoutExpired:
            rec["problems"].append("wrk did not finish")
            return rec
        cpu1 = harness.tree_cpu_s(proc.pid)
        fill_record(rec, proc, cp.returncode, cp.stdout, cp.stderr, cpu1 - cpu0)
        return rec
    finally:
        rec["server_exit"] = harness.stop(proc)
        log.close()


_TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)


def interrupt_main_thread(pid):
    """SIGINT to wrk's main thread. wrk's handler only sets a flag; its main thread sleeps out
    -d and then stops the others. A SIGINT sent to the process is taken by any thread that does
    not block it, and one sent while the process is stopped, or just continued, often goes to the
    worker thread: the main thread then sleeps on, and wrk does not end. tgkill names the
    thread."""
    if _TGKILL is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(_TGKILL, pid, pid, int(signal.SIGINT)) == 0:
            return
    os.kill(pid, signal.SIGINT)


@contextlib.contextmanager
def all_started(servers, names, scenario, conns, args, logdir, seq, clients=None):
    """Every server of `names` started on the server CPU and checked (start_checked), for one
    run of several at once: yields (records by name, started by name, the names that are
    serving). On leaving, the load generators still running in `clients` ({name: Popen}) are
    killed, then every server is stopped."""
    recs = {n: new_record(n, scenario, conns) for n in names}
    started = {}
    try:
        for i, n in enumerate(names):
            started[n] = start_checked(servers, n, scenario, conns, args, logdir, seq + i, recs[n])
        yield recs, started, [n for n in names if started[n][2] is not None]
    finally:
        for w in (clients or {}).values():
            if w.poll() is None:
                w.kill()
                w.wait()
        for n, (proc, log, _) in started.items():
            recs[n]["server_exit"] = harness.stop(proc)
            log.close()


def run_interleaved(servers, names, scenario, conns, args, lua, logdir, seq):
    """The servers of `names` (in that order) in one run: all started on the server CPU, each
    warmed up alone, then each loaded by its own wrk on the client CPU, the wrks taking turns
    (SIGSTOP/SIGCONT) `args.slice` seconds at a time until each has had `args.duration` seconds.
    Only one server is loaded at any moment, as when it runs alone; a drift of the shared
    machine falls on all of them within one turn. {name: record}; latencies are not recorded
    (a paused wrk's requests wait out the pause)."""
    runs = {}
    with all_started(servers, names, scenario, conns, args, logdir, seq, runs) as (recs, started,
                                                                                  live):
        if not live:
            return recs
        for n in live:
            if args.warmup > 0:
                children.run(wrk_argv(args, conns, lua, args.warmup, started[n][2]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=harness.raise_nofile, timeout=args.warmup + 60)
        turns = max(1, round(args.duration / args.slice))
        total = turns * args.slice * len(live)
        cpu0 = {n: harness.tree_cpu_s(started[n][0].pid) for n in live}
        for i, n in enumerate(live):
            argv = wrk_argv(args, conns, lua, total + 60, started[n][2])
            argv[argv.index("--timeout") + 1] = "60s"  # (a paused request is not a timeout)
            w = children.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=harness.raise_nofile)
            if i > 0:
                os.kill(w.pid, signal.SIGSTOP)  # (before it connects: it connects on its turn)
            runs[n] = w
        current = 0
        deadline = time.monotonic()
        for t in range(turns * len(live)):
            deadline += args.slice
            time.sleep(max(0.0, deadline - time.monotonic()))
            if t == turns * len(live) - 1:
                break
            os.kill(runs[live[current]].pid, signal.SIGSTOP)
            current = (current + 1) % len(live)
            os.kill(runs[live[current]].pid, signal.SIGCONT)
        # SIGINT ends wrk's run early with its summary (and our done() line), its thread
        # stopping within 100 ms. One wrk at a time, the loaded one first, so that they still
        # do not overlap.
        outs = {}
        for n in live[current:] + live[:current]:
            interrupt_main_thread(runs[n].pid)
            if n != live[current]:
                os.kill(runs[n].pid, signal.SIGCONT)
            try:
                out, err = runs[n].communicate(timeout=15)
                outs[n] = (runs[n].returncode, out, err)
            except subprocess.TimeoutExpired:
                runs[n].kill()
                runs[n].communicate()
                recs[n]["problems"].append("wrk did not finish")
        cpu1 = {n: harness.tree_cpu_s(started[n][0].pid) for n in live}
        for n in live:
            if n in outs:
                code, out, err = outs[n]
                fill_record(recs[n], started[n][0], code, out, err, cpu1[n] - cpu0[n],
                            active_s=turns * args.slice)
        return recs


def run_turns(servers, names, scenario, conns, args, logdir, seq):
    """The servers of `names` in one run of our own load generator, http_turns
    (bench/baselines/http_turns.cpp) on the client CPU: all started on the server CPU, then
    turns of `args.slice` seconds (the order rotated by http_turns from one cycle of turns to
    the next), `--warmup` seconds of turns per server not counted, then `-d` seconds of
    measured turns per server. In a turn every connection has one request outstanding, closed
    loop (wrk -t1's shape); at the end of the slice no new request is sent and the outstanding
    ones are awaited before the next server's turn: no request waits out another server's turn,
    so the latencies are kept. Server CPU per request: the server process tree's CPU over the
    whole http_turns run (connects, warm-up and measured turns, closes; an idle server burns
    ~nothing) divided by every response it sent in that run. {name: record}."""
    with all_started(servers, names, scenario, conns, args, logdir, seq) as (recs, started, live):
        if not live:
            return recs
        path = "/" if scenario == "fixed" else "/" + FILE_NAME
        argv = ["taskset", "-c", str(args.client_cpu), os.path.join(servers.bindir, "http_turns"),
                "-c", str(conns), "-d", str(args.duration), "--warmup", str(args.warmup),
                "--slice", str(args.slice), "--path", path, "--json"]
        if args.rate:
            argv += ["--rate", str(args.rate)]
        for n in live:
            argv += ["--target", f"{n}={urllib.parse.urlsplit(started[n][2]).netloc}"]
        turns = (math.ceil(args.duration / args.slice) + math.ceil(args.warmup / args.slice)) \
            * len(live)
        cpu0 = {n: harness.tree_cpu_s(started[n][0].pid) for n in live}
        try:
            cp = children.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=harness.raise_nofile, timeout=2 * turns * args.slice + 90)
        except subprocess.TimeoutExpired:
            for n in live:
                recs[n]["problems"].append("http_turns did not finish")
            return recs
        time.sleep(0.2)  # (the servers' work on the closes at http_turns' exit: in every run)
        cpu1 = {n: harness.tree_cpu_s(started[n][0].pid) for n in live}
        try:
            out = {t["name"]: t for t in json.loads(cp.stdout)["targets"]}
        except (ValueError, KeyError, TypeError):
            out = {}
        with open(os.path.join(logdir, f"{seq:03d}-turns-{scenario}-c{conns}.err"), "w") as f:
            f.write(cp.stderr)
        for n in live:
            t = out.get(n)
            if t is None:
                recs[n]["problems"].append(f"http_turns exit {cp.returncode}: "
                                           f"{cp.stderr.strip()[-200:]}")
                continue
            kinds = t["error_kinds"]
            # status and connection_close errors are complete responses, counted in `responses`
            tries = t["responses"] + t["errors"] - kinds["status"] - kinds["connection_close"]
            set_columns(recs[n], started[n][0], t["requests"], t["errors"], kinds,
                        100.0 * t["errors"] / max(tries, 1), t["active_s"], t["latency_us"],
                        cpu1[n] - cpu0[n], t["responses"])
            recs[n].update(active_s=t["active_s"], turns=t["turns"], responses=t["responses"],
                           warmup_requests=t["warmup_requests"], server_cpu_pct=None,
                           turn_p99_us=t.get("turn_p99_us"),
                           client_busy_pct=(None if t.get("client_busy") is None
                                            else 100.0 * t["client_busy"]),
                           client_ev_per_wait=t["client_events_per_wait"],
                           sock_p99_ms=(t["socket_latency_us"]["p99"] / 1000.0
                                        if t.get("socket_latency_count") else None))
            if not t["requests"]:
                recs[n]["problems"].append("no request completed in the measured turns")
                recs[n]["ok"] = False
        return recs


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------

ROWS = [  # (label, key, format)
    ("requests", "requests", "{:,.0f}"),
    ("mean (ms)", "mean_ms", "{:.3f}"),
    ("median (ms)", "p50_ms", "{:.3f}"),
    ("90% (ms)", "p90_ms", "{:.3f}"),
    ("95% (ms)", "p95_ms", "{:.3f}"),
    ("99% (ms)", "p99_ms", "{:.3f}"),
    ("max (ms)", "max_ms", "{:.1f}"),
    ("errors", "error_pct", "{:.2f}%"),
    ("std dev (ms)", "stdev_ms", "{:.3f}"),
    ("throughput (req/s)", "rps", "{:,.0f}"),
    ("server CPU/request (us)", "cpu_us_per_req", "{:.2f}"),
    ("req/s per server core", "rps_per_core", "{:,.0f}"),
]


median_of, spread, fmt_spread = harness.median_of, harness.spread, harness.fmt_spread


def verdict(s, lower_is_better, words):
    """harness' verdict, only from at least 3 rounds (fewer: none)."""
    if s is None or len(s["values"]) < 3:
        return ""
    return harness.verdict(s, lower_is_better, words)


def ratio_pairs(names):
    """(label, a, b) for every ratio reported: galay / each other server, and the control
    (raw_http run twice: the method's own noise) when it ran."""
    out = [(f"{g}/{o}", g, o) for g in GALAY for o in OTHERS if g in names and o in names]
    if CONTROL in names and "raw_http" in names:
        out.append((f"{CONTROL}/raw_http", CONTROL, "raw_http"))
    return out


# Ratio key -> the record's value it divides; the ratios each mode reports (interleaved runs
# have no latencies and no throughput of their own to compare).
RATIO_OF = {"rps": "rps", "rps_per_core": "rps_per_core", "cpu_per_req": "cpu_us_per_req",
            "mean": "mean_ms", "p99": "p99_ms", "sock_p99": "sock_p99_ms"}
RATIO_KEYS = {"sequential": ("rps_per_core", "cpu_per_req", "rps", "p99"),
              "interleaved": ("rps_per_core", "cpu_per_req"),
              "turns": ("rps_per_core", "cpu_per_req", "rps", "mean", "p99", "p99_turn",
                        "sock_p99")}


def turn_ratio(a, b):
    """The round's "p99 turn by turn" ratio of records a and b (turns mode): the median over
    the cycles of turns of a's turn p99 / b's (the k-th measured turn of each is in cycle k), or
    None without a pair of turns that both had responses."""
    ta, tb = a.get("turn_p99_us") or [], b.get("turn_p99_us") or []
    ratios = [x / y for x, y in zip(ta, tb) if x is not None and y]
    return statistics.median(ratios) if ratios else None


def round_ratio(key, a, b):
    """One round's ratio `key` (RATIO_KEYS) of record a over record b, or None."""
    if key == "p99_turn":
        return turn_ratio(a, b)
    x, y = a.get(RATIO_OF[key]), b.get(RATIO_OF[key])
    return x / y if x is not None and y else None


def summarise(rounds, names, mode="sequential"):
    """rounds: list of {name: rec}. Medians per server; ratios per round (galay/other, and the
    control), those of RATIO_KEYS[mode]."""
    rows = TURNS_ROWS if mode == "turns" else ROWS
    medians = {n: {key: median_of([r[n] for r in rounds if n in r], key) for _, key, _ in rows}
               for n in names}
    ratios = {}
    for label, x, y in ratio_pairs(names):
        pairs = [(r[x], r[y]) for r in rounds if x in r and y in r and r[x]["ok"] and r[y]["ok"]]
        ratios[label] = {k: spread([round_ratio(k, a, b) for a, b in pairs])
                         for k in RATIO_KEYS[mode]}
    return medians, ratios


INTERLEAVED_ROWS = [
    ("requests", "requests", "{:,.0f}"),
    ("errors", "error_pct", "{:.2f}%"),
    ("throughput while loaded (req/s)", "rps", "{:,.0f}"),
    ("server CPU/request (us)", "cpu_us_per_req", "{:.2f}"),
    ("req/s per server core", "rps_per_core", "{:,.0f}"),
]

# turns: the survey's rows; throughput is per second of the server's own turns, and the CPU is
# over the whole http_turns run divided by every response served in it (warm-up included).
TURNS_ROWS = [({"rps": "throughput in its turns (req/s)",
                "cpu_us_per_req": "server CPU/response, whole run (us)",
                "rps_per_core": "responses/s per server core"}.get(key, label), key, fmt)
              for label, key, fmt in ROWS] + [
    # The client's own load in the server's turns (http_turns' CPU over the turns' wall time):
    # near 100% the one-thread client, not the server, sets the pace, and the latencies hold
    # its queue of ready responses (the ready connections one epoll_wait returns, next row).
    ("client busy in the turns", "client_busy_pct", "{:.0f}%"),
    ("client: ready connections per epoll_wait", "client_ev_per_wait", "{:.1f}"),
    # Up to the kernel's receive timestamp of the response (SO_TIMESTAMPNS) instead of the
    # client's read: the client's queue of ready responses left out.
    ("99% at the socket (ms)", "sock_p99_ms", "{:.3f}"),
]


def table_lines(title, names, medians, rows=ROWS):
    lines = [f"**{title}**", "",
             "| | " + " | ".join(names) + " |",
             "|---|" + "---|" * len(names)]
    for label, key, fmt in rows:
        cells = []
        for n in names:
            v = medians[n].get(key)
            cells.append("-" if v is None else fmt.format(v))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


# The ratio columns: (header, key in a ratio dict, lower is better, verdict words); a mode shows
# those it has (RATIO_KEYS).
RATIO_COLUMNS = [
    ("throughput", "rps", False, ("faster", "slower")),
    ("req/s per server core", "rps_per_core", False, ("faster", "slower")),
    ("server CPU/request (lower is better)", "cpu_per_req", True, ("less CPU", "more CPU")),
    ("mean latency (lower is better)", "mean", True, ("lower", "higher")),
    ("p99 latency (lower is better)", "p99", True, ("lower", "higher")),
    ("p99 turn by turn (lower is better)", "p99_turn", True, ("lower", "higher")),
    ("p99 at the socket (lower is better)", "sock_p99", True, ("lower", "higher")),
]


def ratio_lines(ratios, pairs, where="the same round"):
    if not ratios:
        return []
    why = ("a verdict only when the whole spread is on one side of 1.00" if pairs >= 3 else
           "no verdicts: fewer than 3 rounds")
    columns = [c for c in RATIO_COLUMNS if c[1] in next(iter(ratios.values()))]
    lines = ["", f"Ratios galay / other in {where}, median [min-max] over {pairs} round(s); "
                 f"{why}:", "",
             "| | " + " | ".join(c[0] for c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for k, r in ratios.items():
        cells = [f"{fmt_spread(r[key])} {verdict(r[key], lower, words)}"
                 for _, key, lower, words in columns]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines


def target_lines(ratios, pairs):
    """Galay's targets, each read off a ratio's whole spread (harness.criterion_verdict on
    a lower-is-better ratio: met when every round is under the threshold). Requests/s per server
    core is the inverse of server CPU per request, so ">= 1.00x nginx" is "CPU/request ratio
    <= 1.00" and ">= 2.0x Go" is "<= 0.50"."""
    out = []

    def crit(s, threshold):
        if s is None:
            return "no data"
        got = f"{s['median']:.2f}x [{s['min']:.2f}-{s['max']:.2f}]"
        if pairs < 3:
            return got
        return f"{got}: {harness.criterion_verdict(s, threshold)}"

    for g in GALAY:
        checks = []
        r = ratios.get(f"{g}/nginx")
        if r:
            checks.append(f"CPU/request vs nginx <= 1.00 (req/s per core >= 1.00x): "
                          f"{crit(r['cpu_per_req'], 1.0)}")
            if "p99" in r:
                checks.append(f"p99 vs nginx <= 1.00: {crit(r['p99'], 1.0)}")
            if r.get("p99_turn"):
                checks.append(f"p99 turn by turn vs nginx <= 1.00: {crit(r['p99_turn'], 1.0)}")
            if r.get("sock_p99"):
                checks.append(f"p99 at the socket vs nginx <= 1.00: {crit(r['sock_p99'], 1.0)}")
        r = ratios.get(f"{g}/go")
        if r:
            checks.append(f"CPU/request vs Go <= 0.50 (req/s per core >= 2.0x): "
                          f"{crit(r['cpu_per_req'], 0.5)}")
        r = ratios.get(f"{g}/raw_http")
        if r:
            checks.append(f"CPU/request vs raw_http <= 1.10: {crit(r['cpu_per_req'], 1.1)}")
        if checks:
            out.append(f"- {g}: " + "; ".join(checks))
    return out


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

MODES = ("sequential", "interleaved")  # `both`; `turns` is opt-in (`--mode turns`, `all`)


def account(rec, mode, rnd, pairs, result, log):
    """Marks the run's round, prints its progress line, and records a galay server's failure or
    errors (the exit status)."""
    rec["round"] = rnd + 1
    what = f"  {mode + ' ' if mode else ''}{rec['scenario']} c={rec['connections']} " \
           f"round {rnd + 1}/{pairs} {rec['server']:15}"
    if rec["ok"]:
        p99 = f"  p99 {rec['p99_ms']:.2f} ms" if rec.get("p99_ms") is not None else ""
        log(f"{what} {rec['rps']:>10,.0f} req/s{p99}  cpu/req {rec['cpu_us_per_req'] or 0:.2f} us"
            f"  errors {rec['errors']}")
    else:
        log(f"{what} FAILED: {'; '.join(rec['problems'])}")
    if rec["server"] in GALAY and (not rec["ok"] or rec.get("errors")):
        result["failures"].append(
            f"{rec['server']} {rec['scenario']} c={rec['connections']}"
            f"{' (' + mode + ')' if mode else ''}: "
            + ("; ".join(rec["problems"]) or f"{rec['errors']} errors {rec['error_detail']}"))


def measure(bindir, scenarios, conns_list, pairs, warmup, duration, server_cpu=0, client_cpu=1,
            only=None, log=note, modes=("sequential",), slice_s=0.5, control=False, rate=0.0):
    """Runs everything; returns a result dict (and prints progress through `log`)."""
    args = argparse.Namespace(warmup=warmup, duration=duration, server_cpu=server_cpu,
                              client_cpu=client_cpu, slice=slice_s, rate=rate)
    result = {"config": {"scenarios": scenarios, "connections": conns_list, "pairs": pairs,
                         "modes": list(modes), "slice": slice_s, "control": control,
                         "rate": rate,
                         "warmup": warmup, "duration": duration, "bin": bindir,
                         "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                         "kernel": os.uname().release},
              "missing": [], "scenarios": [], "failures": []}
    if not shutil.which("wrk") and set(modes) & set(MODES):
        result["missing"].append("wrk: not installed (apt-get install wrk): nothing measured")
        return result
    if "turns" in modes and not os.access(os.path.join(bindir, "http_turns"), os.X_OK):
        result["missing"].append(f"http_turns: {os.path.join(bindir, 'http_turns')} not built "
                                 "(cmake --build build/release --target http_turns): turns "
                                 "mode skipped")
        modes = tuple(m for m in modes if m != "turns")
    if not shutil.which("taskset"):
        result["missing"].append("taskset (util-linux) not found: nothing measured")
        return result
    work = tempfile.mkdtemp(prefix="galay-http-bench-")
    try:
        servers = Servers(bindir, work)
        result["missing"] += servers.missing
        lua = os.path.join(work, "report.lua")
        with open(lua, "w") as f:
            f.write(WRK_LUA)
        logdir = os.path.join(work, "logs")
        os.makedirs(logdir)
        seq = 0
        for scenario in scenarios:
            names = [n for n in GALAY + OTHERS + ((CONTROL,) if control else ())
                     if n in servers.available and (only is None or n in only or n == CONTROL)
                     and not (scenario != "fixed" and n in ("raw_http", CONTROL))]
            for conns in conns_list:
                for mode in ("interleaved", "turns"):
                    if mode in modes:
                        seq = measure_together(mode, servers, names, scenario, conns, pairs, args,
                                               lua, logdir, seq, result, log)
                if "sequential" not in modes:
                    continue
                rounds = []
                for rnd in range(pairs):
                    k = rnd % len(names) if names else 0
                    order = names[k:] + names[:k]  # rotated: no server always first
                    recs = {}
                    for name in order:
                        seq += 1
                        rec = run_one(servers, name, scenario, conns, args, lua, logdir, seq)
                        recs[name] = rec
                        account(rec, "", rnd, pairs, result, log)
                    rounds.append(recs)
                medians, ratios = summarise(rounds, names)
                result["scenarios"].append({"scenario": scenario, "connections": conns,
                                            "mode": "sequential",
                                            "servers": names, "medians": medians,
                                            "ratios": ratios, "runs": rounds})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def measure_together(mode, servers, names, scenario, conns, pairs, args, lua, logdir, seq,
                     result, log):
    """`pairs` runs of every server together (mode interleaved: wrks taking turns; turns:
    http_turns), their order rotated from round to round. Returns the next seq."""
    if len(names) < 2:
        result["missing"].append(f"{mode} {scenario} c={conns}: nothing to compare "
                                 f"({', '.join(names) or 'no server'}): skipped")
        return seq
    rounds = []
    for rnd in range(pairs):
        k = rnd % len(names)
        order = names[k:] + names[:k]
        if mode == "turns":
            recs = run_turns(servers, order, scenario, conns, args, logdir, seq)
        else:
            recs = run_interleaved(servers, order, scenario, conns, args, lua, logdir, seq)
        seq += len(order)
        for name in order:
            account(recs[name], mode, rnd, pairs, result, log)
        rounds.append(recs)
    medians, ratios = summarise(rounds, names, mode)
    result["scenarios"].append({"scenario": scenario, "connections": conns, "mode": mode,
                                "servers": names, "medians": medians, "ratios": ratios,
                                "runs": rounds})
    return seq


def report_lines(result):
    lines = []
    for m in result["missing"]:
        lines.append(f"- {m}")
    if result["missing"]:
        lines.append("")
    for s in result["scenarios"]:
        what = ("GET / (fixed 13-byte body)" if s["scenario"] == "fixed"
                else f"GET /{FILE_NAME} (1 KiB static file)")
        slice_s = result["config"].get("slice", 0.5)
        how, rows, where = {
            "sequential": (" (", ROWS, "the same round"),
            "interleaved": (f", interleaved (every server in one run, their wrks taking turns "
                            f"every {slice_s} s; ", INTERLEAVED_ROWS, "the same interleaved run"),
            "turns": (f", turns (every server in one http_turns run, turns of {slice_s} s, "
                      + (f"open loop at {result['config']['rate']:,.0f} req/s, "
                         if result["config"].get("rate") else "")
                      + "no request outstanding between a server's turns; ", TURNS_ROWS,
                      "the same http_turns run"),
        }[s.get("mode", "sequential")]
        lines += table_lines(f"{what}, {s['connections']} connections{how}medians of "
                             f"{result['config']['pairs']} round(s))", s["servers"], s["medians"],
                             rows)
        lines += ratio_lines(s["ratios"], result["config"]["pairs"], where)
        t = target_lines(s["ratios"], result["config"]["pairs"])
        if t:
            lines += ["", "Galay's targets (medians; provisional on a shared machine):"] + t
        lines.append("")
    for f in result["failures"]:
        lines.append(f"- FAILED: {f}")
    return lines


def suite_section(bindir, out_dir, quick=True, pairs=3):
    """The short form for `make bench` (bench/suite.py), when quick: GET /, `pairs` rounds of
    1 s warm-up + 1 s, at 100 and 1000 connections in turns (every server in one http_turns
    run, turns of 0.25 s: the ratios whose spreads are tight enough for a verdict on a shared
    machine), then at 100 connections one server at a time under wrk (the survey's table).
    Else GET / and the file at 100 and 1000 connections, 1 s + 5 s, interleaved and one at a
    time. Returns (markdown lines, result dict); the result also goes to out_dir/http.json."""
    if quick:
        result = measure(bindir, ["fixed"], [100, 1000], pairs, 1, 1, modes=("turns",),
                         slice_s=0.25)
        survey = measure(bindir, ["fixed"], [100], pairs, 1, 1)
        result["config"]["modes"] += survey["config"]["modes"]
        result["missing"] += [m for m in survey["missing"] if m not in result["missing"]]
        result["scenarios"] += survey["scenarios"]
        result["failures"] += survey["failures"]
    else:
        result = measure(bindir, ["fixed", "file"], [100, 1000], pairs, 1, 5, modes=MODES)
    lines = ["## HTTP/1.1, the survey's comparison (bench/studies/http_servers.py: the load "
             "generator, http_turns or wrk with one thread, on CPU 1; the servers on CPU 0)", ""]
    lines += report_lines(result)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "http.json"), "w") as f:
            json.dump(result, f, indent=1, default=str)
    return lines, result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("-c", "--connections", default="100,1000", help="comma-separated")
    ap.add_argument("--pairs", type=int, default=3, help="rounds (every server once per round)")
    ap.add_argument("-d", "--duration", type=float, default=5,
                    help="seconds (wrk rounds to whole seconds)")
    ap.add_argument("--warmup", type=float, default=1,
                    help="seconds (wrk rounds to whole seconds, at least 1; 0: none)")
    ap.add_argument("--scenarios", default="fixed,file")
    ap.add_argument("--servers", help="only these, comma-separated (e.g. galay-epoll,nginx)")
    ap.add_argument("--mode", choices=("sequential", "interleaved", "both", "turns", "all"),
                    help="sequential: one server at a time (the survey's table); interleaved: "
                         "every server in one run, their wrks taking turns (CPU per request "
                         "only, much tighter spreads on a shared machine); both (default; "
                         "--quick: sequential); turns: every server in one run of http_turns, "
                         "our own load generator, which gives them turns with no request "
                         "outstanding between them (latencies and CPU per request); all: the "
                         "three")
    ap.add_argument("--control", action="store_true",
                    help=f"also run raw_http a second time ({CONTROL}): its ratio to raw_http "
                         "is the method's own noise (GET / only)")
    ap.add_argument("--slice", type=float, default=0.5,
                    help="interleaved, turns: seconds of each server's turn (default 0.5)")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="turns: open-loop load at this many requests/s in each server's turn, "
                         "latency from when each request fell due (default 0: closed loop)")
    ap.add_argument("--quick", action="store_true",
                    help="1 round, 1 s warm-up + 2 s, 100 connections, sequential")
    ap.add_argument("--server-cpu", default="0")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--out", help="JSON output (default bench/results/http-<time>.json)")
    args = ap.parse_args()
    if args.quick:
        args.pairs, args.warmup, args.duration, args.connections = 1, 1, 2, "100"
    mode = args.mode or ("sequential" if args.quick else "both")
    modes = {"both": MODES, "all": MODES + ("turns",)}.get(mode, (mode,))
    conns = [int(x) for x in args.connections.split(",") if x]
    scenarios = [s for s in args.scenarios.split(",") if s]
    for s in scenarios:
        if s not in ("fixed", "file"):
            ap.error(f"unknown scenario {s!r} (fixed, file)")
    only = set(args.servers.split(",")) if args.servers else None
    if args.pairs < 1 or args.duration < 1 or args.warmup < 0 or not conns or min(conns) < 1:
        ap.error("--pairs, -d and -c must be at least 1, --warmup at least 0")
    if not 0.05 <= args.slice <= args.duration:
        ap.error("--slice must be between 0.05 s and -d")
    if args.rate < 0 or (args.rate and "turns" not in modes):
        ap.error("--rate is for --mode turns (or all), and at least 0")
    note(f"server on CPU {args.server_cpu}, client on CPU {args.client_cpu}; {args.pairs} "
         f"round(s) "
         f"of {args.warmup} s warm-up + {args.duration} s; connections {conns}; "
         f"{' and '.join(modes)}")
    result = measure(args.bin, scenarios, conns, args.pairs, args.warmup, args.duration,
                     args.server_cpu, args.client_cpu, only, modes=modes, slice_s=args.slice,
                     control=args.control, rate=args.rate)
    print()
    print("\n".join(report_lines(result)))
    out = args.out or os.path.join(BENCH, "results", time.strftime("http-%Y%m%d-%H%M%S.json"))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(f"wrote {out}")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
