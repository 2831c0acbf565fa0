#!/usr/bin/env python3
"""Ctrl-C in the middle of a benchmark leaves nothing behind. argv: the bin directory of this
build, then a target: `suite:<section>` (bench/suite.py --sections <section>, what `make bench`
runs) or `study:<script>` (bench/studies/<script>.py in a short form); `--list`: the targets.

The target is started with a TMPDIR of its own; once one of the programs named for it is
running below it (its first server, usually caught before it accepts, while the script waits
for it: where a server started but not yet handed to the caller is lost; or the build of a
control group), it gets SIGINT, as the script alone gets it from a terminal or from a test (the
signal is not sent to its group).
Then, once it has exited: no process it started is alive (this test is the child subreaper of
everything below it, so an orphan comes back here; and every process with this test's mark in
its environment counts), no port is held (a port is held by a live process) and its TMPDIR is
empty. A target whose programs or tools are missing here: SKIP (exit 77) with the reason. A
target that ends before any of its programs started fails: nothing was interrupted."""
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "harness"))
import children  # noqa: E402  (descendants, wait_gone)
import harness  # noqa: E402  (free_port)

PR_SET_CHILD_SUBREAPER = 36
MARK = "GALAY_INTERRUPT_TEST"
STUDIES = os.path.join(ROOT, "bench", "studies")

# target: (argv after the script, the programs whose start means "mid-run": the first server it
# starts (a name, or a name and a word of its command line), caught while the script waits for it
# to accept, or the build of a control group; the tools it needs here). {bin}: this build's
# programs; {work}: a directory for the target's own files (not its TMPDIR); {free_port}: a free
# port; {port}: left for the script. A suite target is interrupted in its own section (after
# the suite's "== <section>" line).
EPOLL_PAIR = ["--a", "bench_server {port} --backend epoll", "--b", "raw_epoll {port}"]
TARGETS = {
    "suite:tcp": ([], ["bench_server"], []),
    "suite:latency": ([], ["bench_latency server", "cargo", "go"], []),
    "suite:churn": ([], ["bench_latency server"], []),
    "suite:udp": ([], ["bench_udp server"], []),
    "suite:files": ([], ["bench_file_io"], []),
    "suite:aio": ([], ["aio_bench"], []),
    "suite:http": ([], ["http_server"], ["wrk"]),
    "suite:sync": ([], ["bench_sync"], []),
    "suite:local": ([], ["raw_unix_echo", "bench_server"], []),
    "suite:tls": ([], ["http_server", "nginx", "tls_echo_raw"], ["openssl"]),
    "suite:relay": ([], ["cargo", "raw_epoll"], []),
    "suite:foreign": ([], ["nginx"], ["nginx"]),
    "suite:kv": ([], ["mini_redis"], ["redis-server", "redis-benchmark"]),
    "study:echo": (EPOLL_PAIR + ["-c", "10", "--pairs", "1", "--warmup", "0", "-d", "60",
                                 "--out", "{work}/echo.json", "--logs", "{work}/logs"],
                   ["bench_server"], []),
    "study:syscalls": (["--server", "raw_epoll {port}", "-c", "10", "-d", "60", "--strace"],
                       ["raw_epoll"], ["strace"]),
    "study:echo_profile": (["--server", "raw_epoll {port}", "-c", "10", "-d", "60"],
                           ["raw_epoll"], ["perf"]),
    "study:listen_imbalance": (["--rounds", "1", "-d", "60", "--backend", "epoll"],
                               ["bench_server"], []),
    "study:udp_ab": (["--rounds", "1", "--backends", "epoll", "--port", "{free_port}"],
                     ["bench_udp server"], []),
    "study:file_io_ab": (["--dir", "{work}", "--pairs", "1", "-n", "1000000", "--batch", "8"],
                         ["bench_file_io"], []),
    "study:fio_compare": (["--file", "{work}/fio.dat", "--size", "64m", "--runtime", "60",
                           "--rounds", "1", "--engines", "io_uring", "--patterns", "rand_read",
                           "--depths", "1", "--modes", "fio-default"], ["fio", "aio_bench"],
                          ["fio"]),
    "study:fixedbufs_ab": (["--file", "{work}/fixed.dat", "--size", "64m", "--runtime", "60",
                            "--pairs", "1", "--dir", "{work}"], ["aio_bench", "bench_file_io"],
                           []),
    "study:latency": (["--rounds", "1", "--no-build", "--only", "galay-epoll", "-n", "1000",
                       "--sample-ms", "50"], ["bench_latency server"], []),
    "study:churn": (["--pairs", "1", "-d", "60", "--a",
                     "bench_latency server -p {port} --backend epoll", "--b", "raw_epoll {port}"],
                    ["bench_latency server"], []),
    "study:http_servers": (["-c", "10", "--pairs", "1", "-d", "60", "--warmup", "0",
                            "--scenarios", "fixed", "--mode", "sequential", "--servers",
                            "galay-epoll", "--out", "{work}/http.json"], ["http_server"], ["wrk"]),
    "study:http_ab": (["--a", "{bin}/http_server {port} --backend epoll", "--b",
                       "{bin}/http_server {port} --backend epoll", "-c", "10", "--rounds", "1",
                       "-d", "60", "--warmup", "0"], ["http_server"], ["wrk"]),
    "study:http_count": (["--servers", "galay-epoll", "-c", "10", "-d", "60"],
                         ["valgrind", "cachegrind-amd64-linux"], ["wrk", "valgrind"]),
    "study:idle_memory": (["-n", "8000", "--servers", "galay-epoll"], ["http_server"], []),
    "study:idle_relays": (["-n", "9000", "--backend", "epoll"], ["raw_epoll", "tcp_proxy"], []),
    "study:tls": (["--parts", "https", "--servers", "galay-epoll", "-c", "10", "--pairs", "1",
                   "-d", "60", "--warmup", "0", "--out", "{work}/tls.json"], ["http_server"],
                  ["openssl"]),
    "study:relay": (["--sizes", "65536", "-c", "4", "--proxies", "galay-splice-epoll,raw-splice",
                     "--refs", "raw-splice", "--rounds", "1", "-d", "60", "--warmup", "0"],
                    ["raw_epoll"], []),
    "study:static_files": (["--sizes", "65536", "-c", "4", "--servers",
                            "galay-sendfile-epoll,galay-copy-uring", "--refs",
                            "galay-copy-uring", "--rounds", "1", "-d", "60", "--warmup", "0"],
                           ["http_server"], ["wrk"]),
    "study:static_profile": (["--size", "65536", "-c", "4", "--servers", "galay-sendfile-epoll",
                              "-d", "60", "--warmup", "1"], ["http_server"], ["wrk", "perf"]),
    "study:sync": (["--pairs", "3", "--rounds", "100000000", "--cases", "pingpong"],
                   ["bench_sync"], []),
    "study:foreign": (["--rounds", "1", "--parts", "curl,pg"], ["nginx"], ["nginx"]),
    "study:kv": (["--servers", "galay-epoll", "--rounds", "1", "-n", "100000000"],
                 ["mini_redis"], ["redis-server", "redis-benchmark"]),
    "study:local": (["--study", "unix", "--rounds", "1", "--secs", "60", "--conns", "10",
                     "--backends", "epoll", "--json"], ["bench_server", "raw_unix_echo"], []),
}
# How each study names this build's bin directory.
BIN_FLAG = {"file_io_ab": ("--bin", "{bin}/bench_file_io"), "local": ("--bindir", "{bin}"),
            "fio_compare": ("--bin", "{bin}/aio_bench"), "http_ab": None,
            "fixedbufs_ab": ("--aio-bench", "{bin}/aio_bench", "--bench-file-io",
                             "{bin}/bench_file_io")}


def skip(why):
    print(f"test_interrupt: SKIP: {why}")
    sys.exit(77)


def fail(why):
    print(f"test_interrupt: FAIL: {why}")
    sys.exit(1)


def skip_here():
    """A target this build cannot run (tests/CMakeLists.txt says which, in GALAY_TEST_SKIP)."""
    why = os.environ.get("GALAY_TEST_SKIP")
    if why:
        skip(why)


def argv_of(target, bindir, work):
    kind, name = target.split(":", 1)
    rest, _, _ = TARGETS[target]
    port = str(harness.free_port())
    fill = lambda a: (a.replace("{bin}", bindir).replace("{work}", work)  # noqa: E731
                      .replace("{free_port}", port))
    if kind == "suite":
        return [sys.executable, os.path.join(ROOT, "bench", "suite.py"), "--bin", bindir,
                "--sections", name, "--out", os.path.join(work, "out"), "--file-dir", work]
    flag = BIN_FLAG.get(name, ("--bin", "{bin}"))
    return ([sys.executable, os.path.join(STUDIES, name + ".py")]
            + [fill(a) for a in (flag or ())] + [fill(a) for a in rest])


def program(pid):
    """(basename of the executable, argv) of `pid`, or None when it is gone."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    return exe, argv


def running(pid, when):
    """The first process below `pid` that is one of `when`, as 'pid: command', or None."""
    for p in children.descendants(pid):
        got = program(p)
        if got is None:
            continue
        exe, argv = got
        for w in when:
            name, _, word = w.partition(" ")
            if exe == name and (not word or word in argv):
                return f"{p} ({exe}): {' '.join(argv).strip()}"
    return None


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def marked(tag):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if f"{MARK}={tag}".encode() in f.read().split(b"\0"):
                    out.append(int(d))
        except OSError:
            pass
    return out


def left_behind(tag):
    """{pid: command} of the live processes this test's target left."""
    pids = set(children.descendants(os.getpid())) | set(marked(tag))
    out = {}
    for p in pids:
        got = program(p)
        if got is not None:
            out[p] = " ".join(got[1]).strip()
    return out


def main():
    if sys.argv[1:] == ["--list"]:  # (for CMake: one ctest per target)
        print("\n".join(TARGETS))
        return 0
    if len(sys.argv) != 3 or sys.argv[2] not in TARGETS:
        print(f"usage: test_interrupt.py BIN_DIR TARGET (one of {', '.join(TARGETS)})",
              file=sys.stderr)
        return 2
    bindir, target = os.path.realpath(sys.argv[1]), sys.argv[2]
    skip_here()
    _, when, needs = TARGETS[target]
    missing = [t for t in needs if shutil.which(t) is None]
    if missing:
        skip(f"{target} needs {', '.join(missing)} here")
    if "perf" in needs and subprocess.run(["perf", "stat", "-e", "task-clock", "true"],
                                          capture_output=True).returncode != 0:
        skip(f"{target} needs perf, which cannot count here (perf_event_paranoid?)")
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    work = tempfile.mkdtemp(prefix="galay-interrupt-")
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp)
    tag = uuid.uuid4().hex
    env = dict(os.environ, TMPDIR=tmp, **{MARK: tag})
    argv = argv_of(target, bindir, work)
    log = os.path.join(work, "output")
    with open(log, "w") as out:
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        hit = None
        section = f"== {target.split(':', 1)[1]}\n" if target.startswith("suite:") else ""
        while hit is None and p.poll() is None and time.monotonic() < deadline:
            if section in read(log):
                hit = running(p.pid, when)
            if hit is None:
                children.wait_gone(p.pid, 0.02)  # (paces the look; returns at once if it ends)
        if hit is None:
            tail = read(log)[-3000:]
            if p.poll() is None:
                fail(f"none of {when} started within 600 s: {' '.join(argv)}\n{tail}")
            if "not built, skipping" in tail or "not built, skipped" in tail:
                skip(f"{target}: {tail.strip().splitlines()[-1]}")
            fail(f"{' '.join(argv)} ended (exit {p.returncode}) before any of {when} "
                 f"started:\n{tail}")
        print(f"test_interrupt: {target}: SIGINT while {hit}")
        p.send_signal(signal.SIGINT)
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            fail(f"{target} still running 120 s after SIGINT")
        left = left_behind(tag)
        if left:  # (one still exiting from the signal it was sent is not left behind)
            for q in left:
                children.wait_gone(q, 5)
            left = {q: c for q, c in left_behind(tag).items() if q in left}
        # ThreadSanitizer maps its read-only data through a file it creates in TMPDIR and unlinks
        # a few instructions later, while the program starts; a program stopped inside that
        # window leaves the file. It is the sanitizer runtime's, not anything galay made.
        files = sorted(f for f in os.listdir(tmp) if not re.fullmatch(r"tsan\.rodata\.\d+", f))
        out = read(log)
        if left or files:
            fail(f"{target} (exit {rc} after SIGINT) left behind:\n"
                 + "".join(f"  process {q}: {c}\n" for q, c in sorted(left.items()))
                 + "".join(f"  {os.path.join(tmp, f)}\n" for f in files)
                 + f"its output:\n{out[-3000:]}")
        print(f"test_interrupt: {target}: exit {rc}, nothing left behind: ok")
        return 0
    finally:
        children.stop_all(grace=2)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
