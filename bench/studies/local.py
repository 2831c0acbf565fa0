#!/usr/bin/env python3
"""Local resources (issue: Unix sockets, the filesystem namespace, child processes), three studies,
each a median over alternating rounds of same-round ratios with their min-max spread:

  unix    Unix stream echo, 256-byte ping-pong, 100 and 1,000 connections, on each backend:
          galay's `bench_server --unix` (recv_pooled, and recv into its own buffer) vs the
          hand-written epoll server (bench/baselines/raw_unix_echo.cpp), vs the hand-written
          io_uring server on the same socket (raw_uring --unix: multishot recv, provided buffers)
          and vs galay's own TCP loopback echo (bench_server on 127.0.0.1, recv_pooled, loaded by
          raw_client). Figure: server CPU per request (goal <= 1.05x the hand-written epoll one).
          Server pinned to CPU 1, load client to CPU 0.
  fsmeta  per file: create, write 4 KiB, fsync, rename, stat, unlink over 16 directories
          (bench_local fsmeta): galay's fs ops with io_uring opcodes (the default) vs every step
          on the blocking pool vs plain system calls on one thread. Figures: files/s and CPU per
          file. --files N (default 100,000) for the async modes; the synchronous loop, bound by
          one fsync at a time, runs --sync-files (default 2,000).
  spawn   spawn + wait of /bin/true per second: galay's process::Command (bench_local spawn, each
          backend) vs posix_spawn + waitpid in a loop (bench/baselines/raw_spawn.cpp) vs Tokio's
          process::Command (bench/control/tokio_spawn, built here with cargo when there is one).

    python3 bench/studies/local.py --bindir build/release/bin [--study unix,fsmeta,spawn]
                                   [--rounds 3] [--secs 3] [--files N] [--json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402


def wait_for_socket(proc, path, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if os.path.exists(path):
            return True
        time.sleep(0.02)
    return False


def one_run(server_argv, client, path, conns, size, secs):
    """Start the server, load it, return {"qps", "cpu_per_req_us"} or None on failure."""
    if os.path.exists(path):
        os.unlink(path)
    proc = children.popen(["taskset", "-c", "1"] + server_argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        if not wait_for_socket(proc, path):
            sys.stderr.write(f"local.py: {server_argv[0]} did not start: {proc.stderr.read()}\n")
            return None
        cpu0 = harness.proc_cpu_s(proc.pid)
        out = children.run(["taskset", "-c", "0", client, "client", path, "-c", str(conns),
                            "-s", str(size), "-d", str(secs)],
                           capture_output=True, text=True, timeout=secs + 60)
        cpu1 = harness.proc_cpu_s(proc.pid)
        if out.returncode != 0:
            sys.stderr.write(f"local.py: client failed: {out.stderr}\n")
            return None
        r = json.loads(out.stdout)
        if r["requests"] == 0:
            return None
        # The client's connect phase is outside its timed window and costs the server little.
        return {"qps": r["qps"], "cpu_per_req_us": (cpu1 - cpu0) / r["requests"] * 1e6}
    finally:
        harness.stop(proc)


def one_tcp_run(galay, client, backend, conns, size, secs):
    """bench_server on a TCP port, loaded by raw_client; {"qps", "cpu_per_req_us"} or None."""
    port = harness.free_port()
    proc = children.popen(["taskset", "-c", "1", galay, str(port), "--backend", backend,
                           "--bind", "127.0.0.1", "--recv", "pooled"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if not harness.wait_accepting(proc, port, 10):
            sys.stderr.write(f"local.py: bench_server (TCP) did not start: {proc.stderr.read()}\n")
            return None
        cpu0 = harness.proc_cpu_s(proc.pid)
        out = children.run(["taskset", "-c", "0", client, "-h", "127.0.0.1", "-p", str(port),
                            "-c", str(conns), "-s", str(size), "-d", str(secs),
                            "--warmup", "0", "--json"],
                           capture_output=True, text=True, timeout=secs + 60)
        cpu1 = harness.proc_cpu_s(proc.pid)
        if out.returncode != 0:
            sys.stderr.write(f"local.py: raw_client failed: {out.stderr[-2000:]}\n")
            return None
        r = json.loads(out.stdout)
        if not r.get("requests"):
            return None
        return {"qps": r["qps"], "cpu_per_req_us": (cpu1 - cpu0) / r["requests"] * 1e6}
    finally:
        harness.stop(proc)


def run_json(argv, timeout):
    """Run a workload program that prints one JSON object; the object, or None (said why)."""
    try:
        out = children.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"local.py: {' '.join(argv)} did not finish within {timeout} s\n")
        return None
    if out.returncode != 0:
        sys.stderr.write(f"local.py: {' '.join(argv)} failed (exit {out.returncode}): "
                         f"{out.stderr.strip()[-2000:]}\n")
        return None
    return json.loads(out.stdout)


def med(runs, key):
    return harness.median_of([dict(x, ok=True) for x in runs], key)


def f(v, fmt):
    return "n/a" if v is None else format(v, fmt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bindir", default="build/release/bin")
    ap.add_argument("--study", default="unix,fsmeta,spawn")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=float, default=3)
    ap.add_argument("--conns", default="100,1000")
    ap.add_argument("--backends", default="io_uring,epoll")
    ap.add_argument("--files", type=int, default=100000)
    ap.add_argument("--sync-files", type=int, default=2000)
    ap.add_argument("--fs-dir", default=None, help="where the metadata workload runs (default: "
                    "a temp directory on the filesystem of the build directory)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    studies = a.study.split(",")
    for st in studies:
        if st not in ("unix", "fsmeta", "spawn"):
            sys.exit(f"local.py: unknown study '{st}' (unix, fsmeta, spawn)")
    if a.rounds < 1 or a.secs <= 0 or a.files < 1 or a.sync_files < 1:
        sys.exit("local.py: --rounds, --secs, --files and --sync-files must be positive")
    need = {"unix": ["bench_server", "raw_unix_echo", "raw_client"],
            "fsmeta": ["bench_local"], "spawn": ["bench_local", "raw_spawn"]}
    for st in studies:
        for b in need[st]:
            if not os.access(os.path.join(a.bindir, b), os.X_OK):
                sys.exit(f"local.py: {os.path.join(a.bindir, b)} not found: build {b} first")
    harness.raise_nofile()
    report = {"study": "local", "rounds": a.rounds, "secs": a.secs}
    if "unix" in studies:
        report["unix"] = unix_study(a)
    if "fsmeta" in studies:
        report["fsmeta"] = fsmeta_study(a)
    if "spawn" in studies:
        report["spawn"] = spawn_study(a)
    if a.json:
        print(json.dumps(report))
        return
    if "unix" in report:
        print_unix(report["unix"], a)
    if "fsmeta" in report:
        print_fsmeta(report["fsmeta"], a)
    if "spawn" in report:
        print_spawn(report["spawn"], a)


def unix_study(a):
    galay = os.path.join(a.bindir, "bench_server")
    raw = os.path.join(a.bindir, "raw_unix_echo")
    raw_uring = os.path.join(a.bindir, "raw_uring")
    tcp_client = os.path.join(a.bindir, "raw_client")
    results = []
    with tempfile.TemporaryDirectory(prefix="galay-local-") as tmp:
        path = os.path.join(tmp, "echo.sock")
        servers = {
            "galay": lambda b: [galay, "--unix", path, "--backend", b, "--recv", "pooled"],
            "galay_copy": lambda b: [galay, "--unix", path, "--backend", b, "--recv", "copy",
                                     "--buffer", "4096"],
            "raw": lambda b: [raw, "server", path],
            "raw_uring": lambda b: [raw_uring, "--unix", path],
        }
        if not os.access(raw_uring, os.X_OK):
            sys.stderr.write(f"local.py: {raw_uring} not built: its column is skipped\n")
            del servers["raw_uring"]
        for backend in a.backends.split(","):
            for conns in [int(c) for c in a.conns.split(",")]:
                runs = {k: [] for k in ("galay", "galay_copy", "raw", "raw_uring", "tcp")}
                ratios = {k: [] for k in ("raw", "copy_raw", "raw_uring", "tcp")}
                load = harness.loadavg()
                for _ in range(a.rounds):
                    got = {k: one_run(argv(backend), raw, path, conns, 256, a.secs)
                           for k, argv in servers.items()}
                    got["tcp"] = one_tcp_run(galay, tcp_client, backend, conns, 256, a.secs)
                    for k, x in got.items():
                        if x:
                            runs[k].append(x)
                    g, gc = got["galay"], got["galay_copy"]
                    for key, num, den in (("raw", g, got["raw"]), ("copy_raw", gc, got["raw"]),
                                          ("raw_uring", g, got.get("raw_uring")),
                                          ("tcp", g, got["tcp"])):
                        if num and den:
                            ratios[key].append(num["cpu_per_req_us"] / den["cpu_per_req_us"])
                sp = {k: harness.spread(v) for k, v in ratios.items()}
                row = {"backend": backend, "conns": conns, "size": 256, "load": load}
                for k in runs:
                    row[k + "_cpu_per_req_us"] = med(runs[k], "cpu_per_req_us")
                    row[k + "_qps"] = med(runs[k], "qps")
                row.update({
                    "cpu_ratio": sp["raw"],
                    "verdict": harness.verdict(sp["raw"], words=("less CPU", "more CPU")),
                    "goal_1_05": harness.criterion_verdict(sp["raw"], 1.05) if sp["raw"]
                    else "no data",
                    "cpu_ratio_copy": sp["copy_raw"],
                    "cpu_ratio_vs_raw_uring": sp["raw_uring"],
                    "verdict_vs_raw_uring": harness.verdict(sp["raw_uring"],
                                                            words=("less CPU", "more CPU")),
                    "cpu_ratio_vs_tcp": sp["tcp"],
                    "verdict_vs_tcp": harness.verdict(sp["tcp"], words=("less CPU", "more CPU"))})
                results.append(row)
    return results


def print_unix(results, a):
    print(f"Unix echo, 256 B ping-pong, {a.rounds} alternating rounds of {a.secs:g} s "
          "(server CPU 1, client CPU 0); server CPU per request in us. galay: recv_pooled "
          "(copy: recv into its own buffer); raw: epoll loop; raw_uring: io_uring loop; "
          "tcp: galay on TCP loopback, recv_pooled")
    print(f"{'backend':9} {'conns':>6} {'galay':>6} {'copy':>6} {'raw':>6} {'r_uring':>7} "
          f"{'tcp':>6} {'qps':>7}  galay/raw [min-max] (goal)         copy/raw [min-max]      "
          "galay/raw_uring [min-max]  galay/tcp [min-max]  load")
    for r in results:
        print(f"{r['backend']:9} {r['conns']:>6} {f(r['galay_cpu_per_req_us'], '.2f'):>6} "
              f"{f(r['galay_copy_cpu_per_req_us'], '.2f'):>6} "
              f"{f(r['raw_cpu_per_req_us'], '.2f'):>6} "
              f"{f(r['raw_uring_cpu_per_req_us'], '.2f'):>7} "
              f"{f(r['tcp_cpu_per_req_us'], '.2f'):>6} {f(r['galay_qps'], '.0f'):>7}  "
              f"{harness.fmt_spread(r['cpu_ratio'])} (<=1.05x: {r['goal_1_05']})  "
              f"{harness.fmt_spread(r['cpu_ratio_copy'])}  "
              f"{harness.fmt_spread(r['cpu_ratio_vs_raw_uring'])} {r['verdict_vs_raw_uring']}  "
              f"{harness.fmt_spread(r['cpu_ratio_vs_tcp'])} {r['verdict_vs_tcp']}  "
              f"{r['load']:.1f}")


def fsmeta_study(a):
    tool = os.path.join(a.bindir, "bench_local")
    base = a.fs_dir or os.path.dirname(os.path.abspath(a.bindir))
    modes = [("uring", a.files), ("pool", a.files), ("sync", a.sync_files)]
    runs = {m: [] for m, _ in modes}
    vs_pool, vs_sync, cpu_vs_pool, cpu_vs_sync = [], [], [], []
    load = harness.loadavg()
    with tempfile.TemporaryDirectory(prefix="galay-fsmeta-", dir=base) as tmp:
        for _ in range(a.rounds):
            got = {}
            for mode, n in modes:
                got[mode] = run_json([tool, "fsmeta", tmp, "--mode", mode, "--files", str(n),
                                      "--backend", "io_uring"], timeout=3600)
                if got[mode]:
                    runs[mode].append(got[mode])
            u, p, s_ = got["uring"], got["pool"], got["sync"]
            if u and p:
                vs_pool.append(u["files_per_sec"] / p["files_per_sec"])
                cpu_vs_pool.append(u["cpu_us_per_file"] / p["cpu_us_per_file"])
            if u and s_:
                vs_sync.append(u["files_per_sec"] / s_["files_per_sec"])
                cpu_vs_sync.append(u["cpu_us_per_file"] / s_["cpu_us_per_file"])
    out = {"files": a.files, "sync_files": a.sync_files, "load": load, "fs_dir": base,
           "modes": {m: {"files_per_sec": med(runs[m], "files_per_sec"),
                         "cpu_us_per_file": med(runs[m], "cpu_us_per_file")} for m, _ in modes}}
    for key, vals, lower in (("rate_uring_vs_pool", vs_pool, False),
                             ("rate_uring_vs_sync", vs_sync, False),
                             ("cpu_uring_vs_pool", cpu_vs_pool, True),
                             ("cpu_uring_vs_sync", cpu_vs_sync, True)):
        s = harness.spread(vals)
        out[key] = s
        out[key + "_verdict"] = harness.verdict(s, lower_is_better=lower,
                                                words=("better", "worse"))
    return out


def print_fsmeta(r, a):
    print(f"\nMetadata workload (create, write 4 KiB, fsync, rename, stat, unlink; 16 dirs), "
          f"{a.rounds} alternating rounds; {r['files']} files (sync: {r['sync_files']})")
    print(f"{'mode':28} {'files/s':>9} {'CPU us/file':>12}")
    names = {"uring": "galay fs ops (io_uring ops)", "pool": "blocking pool, one job/step",
             "sync": "plain calls, one thread"}
    for m, v in r["modes"].items():
        print(f"{names[m]:28} {f(v['files_per_sec'], '.0f'):>9} {f(v['cpu_us_per_file'], '.1f'):>12}")
    for key, label in (("rate_uring_vs_pool", "files/s  io_uring / pool"),
                       ("cpu_uring_vs_pool", "CPU/file io_uring / pool"),
                       ("rate_uring_vs_sync", "files/s  io_uring / sync"),
                       ("cpu_uring_vs_sync", "CPU/file io_uring / sync")):
        print(f"  {label}: {harness.fmt_spread(r[key])} {r[key + '_verdict']}")
    print(f"  load {r['load']:.1f}")


def build_tokio():
    """The Tokio control program, built with cargo; its path, or None with the reason printed."""
    path, why = harness.cargo_build(
        os.path.join(BENCH, "control", "tokio_spawn"),
        "tokio_spawn")
    if path is None:
        sys.stderr.write(f"local.py: {why}: the Tokio control group is skipped\n")
    return path


def spawn_study(a):
    tool = os.path.join(a.bindir, "bench_local")
    raw = os.path.join(a.bindir, "raw_spawn")
    tokio = build_tokio()
    secs = str(max(1, int(round(a.secs))))
    variants = [(f"galay {b}", [tool, "spawn", "/bin/true", secs, "--backend", b])
                for b in a.backends.split(",")]
    variants.append(("posix_spawn+waitpid", [raw, "/bin/true", secs]))
    if tokio:
        variants.append(("tokio", [tokio, "/bin/true", secs]))
    runs = {name: [] for name, _ in variants}
    per_round = {name: [] for name, _ in variants}  # None where a run failed: rounds stay aligned
    ratios = {name: [] for name, _ in variants}
    load = harness.loadavg()
    for _ in range(a.rounds):
        got = {name: run_json(argv, timeout=int(secs) + 60) for name, argv in variants}
        for name, r in got.items():
            per_round[name].append(r)
            if r:
                runs[name].append(r)
            base = got["posix_spawn+waitpid"]
            if r and base:
                ratios[name].append(r["per_sec"] / base["per_sec"])
    rows = []
    for name, _ in variants:
        s = harness.spread(ratios[name])
        rows.append({"variant": name, "per_sec": med(runs[name], "per_sec"),
                     "cpu_us_per_spawn": med(runs[name], "cpu_us_per_spawn"),
                     "vs_raw": s, "verdict": harness.verdict(s, lower_is_better=False)})
    # CPU per spawn (the parent's own: every variant reports getrusage RUSAGE_SELF), same-round
    # ratios against posix_spawn + waitpid and against Tokio.
    for r in rows:
        name = r["variant"]
        for key, base in (("cpu_vs_raw", "posix_spawn+waitpid"), ("cpu_vs_tokio", "tokio")):
            if name == base or base not in runs:
                continue
            vals = [x["cpu_us_per_spawn"] / b["cpu_us_per_spawn"]
                    for x, b in zip(per_round[name], per_round[base])
                    if x and b and x.get("cpu_us_per_spawn") and b.get("cpu_us_per_spawn")]
            r[key] = harness.spread(vals)
            r[key + "_verdict"] = harness.verdict(r[key], words=("less CPU", "more CPU"))
    tok = next((r for r in rows if r["variant"] == "tokio"), None)
    for r in rows:
        if tok and r["variant"].startswith("galay"):
            vals = [g["per_sec"] / t["per_sec"]
                    for g, t in zip(per_round[r["variant"]], per_round["tokio"]) if g and t]
            r["vs_tokio"] = harness.spread(vals)
            r["verdict_vs_tokio"] = harness.verdict(r["vs_tokio"], lower_is_better=False)
    return {"rows": rows, "load": load, "secs": int(secs)}


def print_spawn(r, a):
    print(f"\nspawn + wait of /bin/true, one at a time, {a.rounds} alternating rounds of "
          f"{r['secs']} s")
    print(f"{'variant':22} {'spawns/s':>9} {'CPU us/spawn':>13}  spawns/s vs posix_spawn, "
          "vs tokio; CPU/spawn vs posix_spawn, vs tokio [min-max]")

    def cell(row, key, verdict_key):
        return (harness.fmt_spread(row[key]) + " " + row[verdict_key]) if row.get(key) else "-"

    for row in r["rows"]:
        print(f"{row['variant']:22} {f(row['per_sec'], '.0f'):>9} "
              f"{f(row['cpu_us_per_spawn'], '.1f'):>13}  {harness.fmt_spread(row['vs_raw'])} "
              f"{row['verdict']}; {cell(row, 'vs_tokio', 'verdict_vs_tokio')}; "
              f"{cell(row, 'cpu_vs_raw', 'cpu_vs_raw_verdict')}; "
              f"{cell(row, 'cpu_vs_tokio', 'cpu_vs_tokio_verdict')}")
    print(f"  load {r['load']:.1f}")


if __name__ == "__main__":
    main()
