#!/usr/bin/env python3
"""The benchmark suite behind `make bench`: every tool on every backend the machine supports, each
against its baseline measured in the same run, in a few minutes.

    python3 bench/suite.py --bin build/release/bin [--full] [--out bench/results] [--sections a,b]

A section is one function registered in SECTIONS (at the bottom): it takes the run's context,
measures, and returns a dict with its report lines (markdown), its data (for suite.json) and its
plots (bench/harness/plot_pages.py's schema, whiskers min-max over the rounds); failures go to
FAILURES. Sections (each runs only if its binaries were built):
  tcp      bench_server (io_uring, epoll) vs raw_uring / raw_epoll, bench_client, 256 B, 100, 1000
           and 10,000 connections: QPS and server CPU per request ratios with verdicts, p99, RSS
           per connection, and plots of QPS and of server CPU per request against connections
  latency  the io_uring latency study (bench/studies/latency.py, short form): galay io_uring/epoll
           and the control groups (blocking sockets, Tokio, Go), ratios and the success criteria,
           and a latency-percentile plot (p50..p99.9, log scale)
  churn    connection churn (bench/studies/churn.py): bench_latency server vs raw_uring / raw_epoll
  udp      bench_udp's server vs raw_udp (split mode, pinned apart): packets/s and loss
  files    bench_file_io --direct on io_uring vs epoll+libaio
  aio      aio_bench --compare: libaio vs io_uring engines, rand_read, QD32
  sync     bench/studies/sync.py (short): Channel ping-pong/throughput across workers (and
           ping-pong within one worker, against Tokio) and spawn_blocking
           vs raw_sync (eventfd, moodycamel, condvar) and Tokio
  http     the survey's HTTP comparison (bench/studies/http_servers.py, short form): http_server on
           io_uring and epoll vs nginx, Go net/http and raw_http, GET /: the servers taking turns
           under http_turns at 100 and 1000 connections (latencies, CPU per request), then one
           at a time under wrk at 100 connections; plots of requests per server core
  local    bench/studies/local.py (short): Unix stream echo vs raw_unix_echo and galay TCP, the
           metadata workload (io_uring ops vs blocking pool vs plain calls), spawn + wait of
           /bin/true vs posix_spawn and Tokio
  tls      bench/studies/tls.py (short): HTTPS keep-alive GET /, new TLS 1.3 connections per
           server CPU-second with and without resumption, TLS echo through a terminating proxy;
           galay (io_uring, epoll) vs nginx, Go and raw OpenSSL over epoll
  relay    bench/studies/relay.py (short: 64 KiB messages, 16 connections; galay splice and copy
           vs Tokio and the hand-written splice relay) and bench/studies/static_files.py (short:
           GET 1 MiB at 100 connections; http_server's sendfile vs nginx)
  foreign  bench/studies/foreign.py --quick: libcurl on galay's loop (galay_curl) vs
           curl_multi_loop and curl_threads against nginx; libpq on galay's loop (galay_pg) vs
           raw_pg, pg_threads, tokio-postgres and pgx against a real PostgreSQL, one query in
           flight per connection and pipelined; AsyncFd's ping-pong against native recv/send
  kv       bench/studies/kv.py (short): examples/mini_redis (io_uring, epoll) vs Debian's
           redis-server, redis-benchmark SET and GET at -P 1 and -P 16, 50 connections, 100,000
           keys: requests/s and server CPU per request ratios (skipped without redis)

Servers run on CPU 0 and clients on CPU 1. Every ratio is
median [min-max] over at least 3 alternating pairs, with a verdict computed from the spread
(faster / slower only when the whole spread is on one side of 1.00, otherwise level within
noise). The default runs are short (0.3 s warm-up + 1 s); --full uses 1 s + 5 s and 5 pairs.
Writes report.md, suite.json, the plot data (data/<study>.json, the schema of
docs/benchmarks/data) and, when matplotlib is installed, the plots (PNG) to --out. Each section
of the report ends with the page that holds its figures and method, docs/benchmarks/<study>.md.
Exits 1 if any run failed or reported an error.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# bench/harness (the shared modules) and bench/studies (the studies this runs in short form).
BENCH = os.path.dirname(os.path.abspath(__file__))
STUDIES = os.path.join(BENCH, "studies")
sys.path[:0] = [os.path.join(BENCH, "harness"), STUDIES]
import children  # noqa: E402  (what it starts ends when it does)
import churn  # noqa: E402  (connection churn A/B)
import echo  # noqa: E402  (the TCP A/B)
import harness  # noqa: E402  (ports, servers, spreads and verdicts)
import http_servers  # noqa: E402  (the HTTP comparison)
import kv  # noqa: E402  (mini_redis vs redis-server)
import latency  # noqa: E402  (the latency study)
import plot_pages  # noqa: E402  (the plots, with their spread)
import tls  # noqa: E402  (HTTPS, new TLS connections and TLS echo)

FAILURES = []


def have(bindir, name):
    return os.access(os.path.join(bindir, name), os.X_OK)


def backend_available(bindir, backend):
    """Whether `backend` runs here: start bench_server on it and see if it listens."""
    port = harness.free_port()
    p = children.popen([os.path.join(bindir, "bench_server"), str(port), "--backend", backend],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ok = harness.wait_accepting(p, port, 5.0)
    err = "" if ok else (p.stderr.read() if p.poll() is not None else "did not start")
    harness.stop(p)
    return ok, err.strip()


def fmt_ratio(r, lower_is_better=False, words=("faster", "slower")):
    """'1.012x [0.950-1.070] level within noise': the spread and the verdict it allows."""
    if r is None:
        return "n/a"
    return f"{harness.fmt_spread(r)} {harness.verdict(r, lower_is_better, words)}"


def tcp_section(args, backends):
    rows = []
    baseline = {"io_uring": "raw_uring", "epoll": "raw_epoll"}
    for be in backends:
        if not have(args.bin, baseline[be]):
            print(f"tcp: {baseline[be]} not built, skipping {be}")
            continue
        for conns in args.tcp_connections:
            h = argparse.Namespace(bin=args.bin, server_cpu=0, client_cpu=1,
                                   warmup=args.warmup, duration=args.duration,
                                   client_args="", start_timeout=10.0)
            runs = {"A": [], "B": []}
            with tempfile.TemporaryDirectory(prefix="galay-suite-tcp-") as logdir:
                for pair in range(args.pairs):
                    order = (("A", f"bench_server {{port}} --backend {be}"),
                             ("B", f"{baseline[be]} {{port}}"))
                    for side, cmd in (order if pair % 2 == 0 else order[::-1]):  # ABBA
                        rec = echo.run_one(h, side, cmd, "bench_client", conns, 256, logdir,
                                           pair * 2 + (side == "B"))
                        runs[side].append(rec)
                        tag = f"tcp {be} c={conns} {side}={harness.label_of(cmd)}"
                        if not rec["ok"]:
                            FAILURES.append(f"{tag}: " + "; ".join(rec["problems"]))
                            print(f"  FAILED {tag}: {rec['problems']}")
                        else:
                            print(f"  {tag}: qps {rec['qps']:,.0f} p99 {rec['p99_us']:.0f}us "
                                  f"cpu/req {rec['cpu_us_per_req'] or 0:.3f}us")
            pairs = list(zip(runs["A"], runs["B"]))
            qps = [a["qps"] / b["qps"] for a, b in pairs
                   if a["ok"] and b["ok"] and b["qps"]]
            cpu = [a["cpu_us_per_req"] / b["cpu_us_per_req"] for a, b in pairs
                   if a["ok"] and b["ok"] and a.get("cpu_us_per_req") and b.get("cpu_us_per_req")]
            med = lambda side, key: statistics.median(  # noqa: E731
                [r[key] for r in runs[side] if r["ok"] and r.get(key) is not None] or [0])
            rows.append({
                "backend": be, "connections": conns, "baseline": baseline[be],
                "qps": med("A", "qps"), "qps_baseline": med("B", "qps"),
                "qps_ratio": harness.spread(qps),
                "cpu_us_per_req": med("A", "cpu_us_per_req"),
                "cpu_us_per_req_baseline": med("B", "cpu_us_per_req"),
                "cpu_ratio": harness.spread(cpu),
                "p99_us": med("A", "p99_us"), "p99_us_baseline": med("B", "p99_us"),
                "rss_per_conn_b": med("A", "rss_per_conn_b"),
                "runs": runs,
            })
    return rows


def run_json(argv, timeout):
    """Run a tool with --json; returns (exit code, parsed object or None, stderr)."""
    try:
        cp = children.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", None, ""
    obj = None
    try:  # one JSON document (possibly pretty-printed)...
        obj = json.loads(cp.stdout)
    except json.JSONDecodeError:  # ...or text followed by a JSON line
        for line in reversed(cp.stdout.splitlines()):
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    pass
                break
    return cp.returncode, obj, cp.stderr


def files_section(args, backends):
    if not have(args.bin, "bench_file_io"):
        print("files: bench_file_io not built, skipping")
        return []
    rows = []
    directory = args.file_dir
    for be in backends:
        argv = ["taskset", "-c", "0", os.path.join(args.bin, "bench_file_io"), "-w", "4", "-n",
                str(args.file_ops), "-b", "4096", "-batch", "8", "-d", directory, "--direct",
                "--backend", be, "--json"]
        rc, obj, err = run_json(argv, 120)
        if rc != 0 or obj is None:
            FAILURES.append(f"files {be}: exit {rc}: {err.strip()[-300:]}")
            print(f"  FAILED files {be}: {err.strip()[-300:]}")
            continue
        obj["backend"] = be
        rows.append(obj)
        print(f"  files {be}: {json.dumps({k: obj.get(k) for k in ('read_iops', 'write_iops')})}")
    return rows


def udp_section(args, backends):
    if not have(args.bin, "bench_udp"):
        print("udp: bench_udp not built, skipping")
        return []
    rows = []
    servers = [(be, f"bench_udp server -p {{port}} --backend {be}") for be in backends]
    if have(args.bin, "raw_udp"):
        servers.append(("raw_udp", "raw_udp {port}"))
    for label, cmd in servers:
        port = harness.free_port()
        srv = children.popen(["taskset", "-c", "0"] + harness.resolve(cmd, args.bin, port),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        if srv.poll() is not None:
            FAILURES.append(f"udp {label}: server exited: {srv.stderr.read().strip()}")
            continue
        argv = ["taskset", "-c", "1", os.path.join(args.bin, "bench_udp"), "client", "-h",
                "127.0.0.1", "-p", str(port), "--json"]
        rc, obj, err = run_json(argv, 120)
        harness.stop(srv)
        if rc != 0 or obj is None:
            FAILURES.append(f"udp {label}: client exit {rc}: {err.strip()[-300:]}")
            print(f"  FAILED udp {label}: {err.strip()[-300:]}")
            continue
        obj["server"] = label
        rows.append(obj)
        print(f"  udp {label}: {obj.get('recv_pps', obj.get('received_pps'))} pkt/s, "
              f"loss {obj.get('loss_rate')}")
    return rows


def aio_section(args):
    if not have(args.bin, "aio_bench"):
        print("aio: aio_bench not built, skipping")
        return None
    path = os.path.join(args.file_dir, f"galay-suite-{os.getpid()}.dat")
    argv = ["taskset", "-c", "0", os.path.join(args.bin, "aio_bench"), "-f", path, "-p",
            "rand_read", "-q", "32", "-t", "1", "-r", str(args.duration), "-b", "4k",
            "--direct", "--size", "256m", "--compare", "--json"]
    rc, obj, err = run_json(argv, 300)
    if rc != 0 or obj is None:
        FAILURES.append(f"aio --compare: exit {rc}: {err.strip()[-300:]}")
        print(f"  FAILED aio: {err.strip()[-300:]}")
        return None
    print("  aio_bench --compare done")
    return obj


def tcp_report(ctx):
    rows = tcp_section(ctx.args, ctx.backends)
    if not rows:
        return None
    lines = ["## TCP echo (bench_client, 256 B, pipeline 1)", "",
             "| backend | conns | QPS | baseline QPS | QPS ratio | server CPU/req us | baseline | "
             "CPU/req ratio (lower is better) | p99 us | RSS/conn |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['backend']} vs {r['baseline']} | {r['connections']} | {r['qps']:,.0f} | "
            f"{r['qps_baseline']:,.0f} | {fmt_ratio(r['qps_ratio'])} | "
            f"{r['cpu_us_per_req']:.3f} | {r['cpu_us_per_req_baseline']:.3f} | "
            f"{fmt_ratio(r['cpu_ratio'], True, ('less CPU', 'more CPU'))} | {r['p99_us']:.0f} | "
            f"{r['rss_per_conn_b']:,.0f} B |")
    lines.append("")
    return {"lines": lines, "data": rows, "plots": tcp_plots(rows)}


def latency_report(ctx):
    a = ctx.args
    if not have(a.bin, "bench_latency"):
        print("latency: bench_latency not built, skipping")
        return None
    la = argparse.Namespace(bin=a.bin, rounds=a.pairs, samples=a.latency_samples,
                            sample_ms=a.latency_sample_ms, warmup_ms=a.latency_warmup_ms,
                            server_cpu="0", client_cpu="1")
    impls, missing = latency.implementations(a.bin, os.path.dirname(os.path.abspath(a.bin)))
    for m in missing:
        print(f"  latency: {m}")
    runs, problems = latency.run_study(la, impls, log=lambda x: print(x, flush=True))
    FAILURES.extend(f"latency {p}" for p in problems)
    analysis = latency.analyze(runs, resamples=2000)
    lines = [f"## The io_uring latency study (bench/studies/latency.py, short form: {a.pairs} "
             f"alternating rounds, {a.latency_samples} samples of ~{a.latency_sample_ms:g} ms per "
             "benchmark)",
             "", "Mean time per iteration ± the 95% bootstrap CI's half-width (samples of all "
             "rounds pooled); the full tables: `python3 bench/studies/latency.py`.", ""]
    lines += latency.report_lines(analysis, runs, missing, [], short=True)
    plot = latency.percentile_plot(runs)
    return {"lines": lines, "data": {"missing": missing, "analysis": analysis},
            "plots": [plot] if plot else []}


def churn_report(ctx):
    a = ctx.args
    if not have(a.bin, "bench_latency"):
        print("churn: bench_latency not built, skipping")
        return None
    baseline = {"io_uring": "raw_uring", "epoll": "raw_epoll"}
    ca = argparse.Namespace(bin=a.bin, pairs=a.pairs, clients=50, duration=a.duration,
                            warmup=a.warmup, connections=0, size=256, server_cpu="0",
                            client_cpu="1")
    rows = []
    for be in ctx.backends:
        if not have(a.bin, baseline[be]):
            continue
        s = churn.ab(ca, f"bench_latency server -p {{port}} --backend {be}",
                     f"{baseline[be]} {{port}}", log=lambda x: print(x, flush=True))
        if s["errors"] or s["leaked_fds"] or s["failed_runs"]:
            FAILURES.append(f"churn {be}: {s['errors']} errors, {s['leaked_fds']} leaked fds, "
                            f"{s['failed_runs']} failed runs")
        rows.append(s)
    if not rows:
        return None
    lines = ["## Connection churn (bench_latency churn: 50 clients, connect + 256 B round trip + "
             "close)", ""] + churn.summary_lines(rows) + [""]
    for r in rows:  # the raw runs are in churn's own JSON; keep the summary here
        r.pop("runs", None)
    return {"lines": lines, "data": rows, "plots": []}


def udp_report(ctx):
    rows = udp_section(ctx.args, ctx.backends)
    if not rows:
        return None
    lines = ["## UDP echo (bench_udp client: 100 clients x 1000 messages, 256 B, depth 10)", "",
             "| server | received pkt/s | loss | errors |", "|---|---|---|---|"]
    for r in rows:
        pps = r.get("recv_pps", r.get("received_pps", 0)) or 0
        lines.append(f"| {r['server']} | {pps:,.0f} | {r.get('loss_rate')} | {r.get('errors')} |")
    return {"lines": lines + [""], "data": rows, "plots": []}


def files_report(ctx):
    rows = files_section(ctx.args, ctx.backends)
    if not rows:
        return None
    lines = ["## Files (bench_file_io --direct, 4 workers, 4 KiB, batch 8)", "",
             "| backend | write IOPS | read IOPS | errors |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['backend']} | {r.get('write_iops', 0):,.0f} | "
                     f"{r.get('read_iops', 0):,.0f} | {r.get('errors')} |")
    return {"lines": lines + [""], "data": rows, "plots": []}


def aio_report(ctx):
    a = aio_section(ctx.args)
    if not a:
        return None
    lines = ["## aio_bench --compare (rand_read, QD32, 4 KiB, O_DIRECT, 1 thread)", "",
             "| engine | IOPS | MiB/s | mean us | p50 us | p99 us | p99.9 us | CPU ns/IO |",
             "|---|---|---|---|---|---|---|---|"]
    for eng in ("libaio", "io_uring"):
        e = a.get(eng) or {}
        lat = e.get("latency_ns") or {}
        us = lambda k: (lat.get(k) or 0) / 1000  # noqa: E731
        lines.append(f"| {eng} | {e.get('iops', 0):,.0f} | {e.get('bandwidth_mib_s', 0):.1f} | "
                     f"{us('mean'):.1f} | {us('p50'):.1f} | {us('p99'):.1f} | "
                     f"{us('p99.9'):.1f} | "
                     f"{(e.get('cpu') or {}).get('process_cpu_ns_per_io', 0):,.0f} |")
    d = a.get("diff_pct") or {}
    lines += ["", "io_uring vs libaio (one run, no spread: a single-engine figure, not a "
              "verdict): " + ", ".join(f"{k} {v:+.1f}%" for k, v in d.items()
                                       if isinstance(v, (int, float))), ""]
    return {"lines": lines, "data": a, "plots": []}


# The page of docs/benchmarks/ that holds each section's figures and method.
STUDY_PAGE = {"tcp": "echo", "latency": "latency", "churn": "churn", "udp": "udp",
              "files": "files", "aio": "files", "http": "http", "sync": "sync", "tls": "tls",
              "local": "local", "relay": "relay", "foreign": "foreign"}


def series_over_rounds(label, per_x):
    """A plot series: for each x, the median and the min-max of the values of the rounds (None
    where no round measured one)."""
    cols = [harness.spread(v) for v in per_x]
    return {"label": label, "median": [c and c["median"] for c in cols],
            "min": [c and c["min"] for c in cols], "max": [c and c["max"] for c in cols]}


def tcp_plots(rows):
    """QPS and server CPU per request against connections, galay and the hand-written loop per
    backend, each point the median of the runs with their min-max."""
    if not rows:
        return []
    conns = sorted({r["connections"] for r in rows})
    qps, cpu = [], []
    for be in sorted({r["backend"] for r in rows}):
        mine = {r["connections"]: r for r in rows if r["backend"] == be}
        baseline = next(iter(mine.values()))["baseline"]
        for side, label in (("A", f"galay {be} (bench_server)"), ("B", baseline)):
            def values(key, side=side):
                return [[run[key] for run in mine[c]["runs"][side]
                         if run["ok"] and run.get(key) is not None] if c in mine else []
                        for c in conns]
            qps.append(series_over_rounds(label, values("qps")))
            cpu.append(series_over_rounds(label, values("cpu_us_per_req")))
    common = {"x_label": "connections", "x": conns, "log_x": True}
    return [{"name": "tcp_qps", "title": "TCP echo, 256 B: requests/s (as the client saw them)",
             "y_label": "requests/s", "series": qps, **common},
            {"name": "tcp_cpu_per_request", "title": "TCP echo, 256 B: server CPU per request",
             "y_label": "µs per request (lower is better)", "series": cpu, **common}]


def http_plots(result):
    """Requests per server core (the inverse of CPU per request) per server and number of
    connections, GET /: one plot for the servers taking turns, one for wrk one at a time."""
    plots = []
    for mode, slug, how in (("turns", "turns", "taking turns under http_turns"),
                            ("sequential", "wrk", "one at a time under wrk")):
        scen = [s for s in result.get("scenarios", [])
                if s.get("mode", "sequential") == mode and s["scenario"] == "fixed"]
        if not scen:
            continue
        names = list(dict.fromkeys(n for s in scen for n in s["servers"]))
        series = [series_over_rounds(n, [[rnd[n]["rps_per_core"] for rnd in s["runs"]
                                          if n in rnd and rnd[n].get("ok")
                                          and rnd[n].get("rps_per_core") is not None]
                                         for s in scen])
                  for n in names]
        plots.append({"name": f"http_rps_per_core_{slug}",
                      "title": f"HTTP GET /: requests per server core ({how})",
                      "x_label": "connections",
                      "y_label": "requests/s per server core (higher is better)",
                      "x": [f"{s['connections']} connections" for s in scen], "series": series})
    return plots


def render_plots(ctx, name, sec):
    """Draws a section's plots into --out and writes their data to --out/data/<study>.json (the
    schema of docs/benchmarks/data, for bench/harness/plot_pages.py). Returns [(title, PNG file
    name)]."""
    plots = sec.get("plots") or []
    if not plots:
        return []
    a = ctx.args
    data_dir = os.path.join(a.out, "data")
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, f"{name}.json"), "w") as f:
        json.dump({"study": STUDY_PAGE.get(name, name),
                   "source": f"python3 bench/suite.py{' --full' if a.full else ''} "
                             f"({a.pairs} rounds) on {ctx.machine}",
                   "plots": plots}, f, indent=1)
    if not plot_pages.have_matplotlib():
        print("(matplotlib not installed: no plots; python3-matplotlib)")
        return []
    images = []
    for plot in plots:
        try:
            path = plot_pages.draw(plot, os.path.join(a.out, f"{plot['name']}.png"))
        except plot_pages.PlotError as e:
            FAILURES.append(f"{name} plot: {e}")
            continue
        images.append((plot.get("title", plot["name"]), os.path.basename(path)))
    return images


def http_report(ctx):
    lines, result = http_servers.suite_section(ctx.args.bin, ctx.args.out,
                                               quick=not ctx.args.full, pairs=ctx.args.pairs)
    FAILURES.extend(f"http {f}" for f in result["failures"])
    return {"lines": lines, "data": result, "plots": http_plots(result)}


def relay_report(ctx):
    # bench/studies/relay.py (64 KiB messages, 16 connections) and bench/studies/static_files.py
    # (GET 1 MiB at 100 connections), short forms: galay's splice relay and sendfile against Tokio's
    # proxy, the hand-written splice relay and nginx; each runs only when its programs are there.
    a = ctx.args
    os.makedirs(a.out, exist_ok=True)
    seconds = "3" if a.full else "1"
    rounds = str(max(3, a.pairs))
    lines = ["## Relay and static files (bench/studies/relay.py, bench/studies/static_files.py, "
             "short form)", ""]
    data = {}
    need = ("tcp_proxy", "raw_splice_relay", "raw_client", "raw_epoll")
    missing = [n for n in need if not have(a.bin, n)]
    if missing:
        lines += [f"relay: {', '.join(missing)} not built, skipped.", ""]
    else:
        proxies = "galay-splice-uring,galay-splice-epoll,galay-copy,raw-splice"
        tokio, why = harness.cargo_build(os.path.join(BENCH, "control", "tokio_proxy"),
                                         "tokio_proxy")
        if tokio is not None: # relay.py finds its proxies in --bin
            shutil.copy2(tokio, os.path.join(a.bin, "tokio_proxy"))
            proxies += ",tokio"
        else:
            lines += [f"Tokio proxy (bench/control/tokio_proxy) not built: {why}; no ratios "
                      "against it.", ""]
        out = os.path.join(a.out, "relay.json")
        p = children.run([sys.executable, os.path.join(STUDIES, "relay.py"), "--bin", a.bin,
                          "--sizes", "65536", "-c", "16", "--rounds", rounds, "-d", seconds,
                          "--warmup", "0.3", "--proxies", proxies, "--out", out],
                         capture_output=True, text=True)
        if p.returncode != 0:
            FAILURES.append(f"relay: bench/studies/relay.py exited {p.returncode}: "
                            f"{p.stderr.strip()[-300:]}")
        lines += [l for l in p.stdout.splitlines() if l.startswith(("|", "##", "load"))] + [""]
        data["relay"] = out
    if not have(a.bin, "http_server") or shutil.which("wrk") is None:
        lines += ["static files: http_server or wrk missing, skipped.", ""]
    else:
        out = os.path.join(a.out, "static_files.json")
        p = children.run([sys.executable, os.path.join(STUDIES, "static_files.py"),
                          "--bin", a.bin, "--sizes", "1048576", "-c", "100", "--rounds", rounds,
                          "-d", seconds, "--warmup", "1", "--out", out],
                         capture_output=True, text=True)
        if p.returncode != 0:
            FAILURES.append(f"static files: bench/studies/static_files.py exited {p.returncode}: "
                            f"{p.stderr.strip()[-300:]}")
        lines += ["```"] + p.stdout.splitlines() + ["```", ""]
        data["static_files"] = out
    return {"lines": lines, "data": data, "plots": []}


def tls_report(ctx):
    # bench/studies/tls.py, short form: HTTPS keep-alive, new TLS 1.3 connections (with and without
    # resumption) and TLS echo through a terminating proxy; galay, nginx, Go and raw OpenSSL.
    lines, result = tls.suite_section(ctx.args.bin, ctx.args.out, quick=not ctx.args.full,
                                      pairs=ctx.args.pairs)
    FAILURES.extend(f"tls {f}" for f in result["failures"])
    return {"lines": lines, "data": result, "plots": []}


def sync_report(ctx):
    # bench/studies/sync.py, short form: Channel ping-pong and throughput across two pinned workers
    # and spawn_blocking round trips, against raw_sync (eventfd, moodycamel, condvar) and Tokio.
    a = ctx.args
    if not (have(a.bin, "bench_sync") and have(a.bin, "raw_sync")):
        print("sync: bench_sync or raw_sync not built, skipping")
        return None
    out = os.path.join(a.out, "sync.json")
    os.makedirs(a.out, exist_ok=True)
    small = [] if a.full else ["--rounds", "20000", "--warmup-rounds", "2000", "--messages",
                               "500000", "--blocking-rounds", "5000"]
    cmd = [sys.executable, os.path.join(STUDIES, "sync.py"),
           "--bin", a.bin, "--pairs", str(max(3, a.pairs)), "--json", out] + small
    p = children.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        FAILURES.append(f"sync: bench/studies/sync.py exited {p.returncode}: "
                        f"{p.stderr.strip()[-300:]}")
        return None
    with open(out) as f:
        data = json.load(f)
    lines = ["## Cross-thread sync (bench_sync: Channel<u64> between two pinned workers, "
             "spawn_blocking round trip)", ""]
    if not data.get("tokio"):
        lines += ["Tokio control not built (cargo missing): ratios against it are absent.", ""]
    lines += ["| metric (ours / theirs) | median [min-max] | verdict |", "|---|---|---|"]
    keep = ("ping-pong p50 galay/eventfd", "ping-pong p50 galay/tokio_pinned",
            "ping-pong p99 galay/eventfd", "ping-pong p50 galay_local/tokio",
            "throughput 1p galay/tokio", "throughput 4p galay/tokio",
            "throughput 1p galay/moodycamel", "spawn_blocking p50 galay/condvar",
            "spawn_blocking p50 galay/tokio_pinned")
    for row in data["ratios"]:
        if row["metric"] in keep:
            lines.append(f"| {row['metric']} | {row['median']:.3f} [{row['min']:.3f}-"
                         f"{row['max']:.3f}] | {row['verdict']} |")
    return {"lines": lines + [""], "data": data["ratios"], "plots": []}


def local_report(ctx):
    # bench/studies/local.py, short form: fewer files and connections, 1 s runs.
    a = ctx.args
    if not all(have(a.bin, b) for b in ("bench_server", "raw_unix_echo", "raw_client",
                                        "bench_local", "raw_spawn")):
        print("local: bench_local, raw_unix_echo, raw_client or raw_spawn not built, skipping")
        return None
    small = [] if a.full else ["--secs", "1", "--conns", "100", "--files", "5000",
                               "--sync-files", "300"]
    cmd = [sys.executable, os.path.join(STUDIES, "local.py"),
           "--bindir", a.bin, "--rounds", str(max(3, a.pairs)),
           "--backends", ",".join(ctx.backends), "--json"] + small
    p = children.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        FAILURES.append(f"local: bench/studies/local.py exited {p.returncode}: "
                        f"{p.stderr.strip()[-300:]}")
        return None
    data = json.loads(p.stdout)
    lines = ["## Local resources (bench/studies/local.py: Unix echo, metadata workload, spawn)", "",
             "| figure (ours / theirs) | median [min-max] | verdict |", "|---|---|---|"]

    def row(label, s, verdict):
        if s:
            lines.append(f"| {label} | {s['median']:.3f} [{s['min']:.3f}-{s['max']:.3f}] | "
                         f"{verdict} |")
    for r in data.get("unix", []):
        row(f"Unix echo {r['backend']} {r['conns']} conns, server CPU/req galay/raw",
            r["cpu_ratio"], f"{r['verdict']}; <=1.05x: {r['goal_1_05']}")
        row(f"Unix echo {r['backend']} {r['conns']} conns, server CPU/req unix/tcp",
            r["cpu_ratio_vs_tcp"], r["verdict_vs_tcp"])
    fm = data.get("fsmeta", {})
    for key, label in (("rate_uring_vs_pool", "metadata files/s io_uring/pool"),
                       ("cpu_uring_vs_pool", "metadata CPU/file io_uring/pool"),
                       ("rate_uring_vs_sync", "metadata files/s io_uring/sync"),
                       ("cpu_uring_vs_sync", "metadata CPU/file io_uring/sync")):
        row(label, fm.get(key), fm.get(key + "_verdict", ""))
    for r in data.get("spawn", {}).get("rows", []):
        if r["variant"].startswith("galay"):
            row(f"spawn/s {r['variant']}/posix_spawn", r["vs_raw"], r["verdict"])
            row(f"spawn/s {r['variant']}/tokio", r.get("vs_tokio"), r.get("verdict_vs_tokio", ""))
    return {"lines": lines + [""], "data": data, "plots": []}


def foreign_report(ctx):
    # bench/studies/foreign.py --quick: each part SKIPs in one line when its programs, a
    # toolchain or the PostgreSQL server are missing, and the others go on.
    a = ctx.args
    os.makedirs(a.out, exist_ok=True)
    out, data = os.path.join(a.out, "foreign.json"), os.path.join(a.out, "foreign_plot.json")
    p = children.run([sys.executable, os.path.join(STUDIES, "foreign.py"), "--bin", a.bin,
                      "--quick", "--rounds", str(max(3, a.pairs)), "--backends",
                      ",".join(ctx.backends), "--json", out, "--data", data],
                     capture_output=True, text=True)
    if p.returncode != 0:
        FAILURES.append(f"foreign: bench/studies/foreign.py exited {p.returncode}: "
                        f"{(p.stderr.strip() or p.stdout.strip())[-300:]}")
    lines = ["## Foreign libraries on galay's loop (bench/studies/foreign.py --quick)", ""]
    lines += [l.replace("## ", "### ", 1) if l.startswith("## ") else l
              for l in p.stdout.splitlines()]
    plots = []
    if os.path.exists(data):
        with open(data) as f:
            plots = json.load(f)["plots"]
    return {"lines": lines + [""], "data": out, "plots": plots}


def kv_report(ctx):
    # bench/studies/kv.py, short form: examples/mini_redis (io_uring, epoll) vs Debian's
    # redis-server under redis-benchmark, SET and GET at -P 1 and -P 16.
    lines, data, plots = kv.suite_section(ctx.args.bin, ctx.args.out, quick=not ctx.args.full,
                                          pairs=ctx.args.pairs)
    if data.get("failed"):
        FAILURES.append("kv: a run failed (see the kv lines above)")
    return {"lines": lines, "data": data, "plots": plots}


# The report, in order: (name, function(ctx) -> {"lines", "data", "plots"} or None).
SECTIONS = [
    ("tcp", tcp_report),
    ("latency", latency_report),
    ("churn", churn_report),
    ("udp", udp_report),
    ("files", files_report),
    ("aio", aio_report),
    ("http", http_report),
    ("sync", sync_report),
    ("local", local_report),
    ("tls", tls_report),
    ("relay", relay_report),
    ("foreign", foreign_report),
    ("kv", kv_report),
]


def write_report(args, results):
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "suite.json"), "w") as f:
        json.dump({k: v for k, v in results.items() if k != "sections"}
                  | {name: sec["data"] for name, sec in results["sections"].items()},
                  f, indent=1, default=str)
    lines = [f"# galay-kernel benchmark suite — {results['date']}", "",
             f"Machine: {results['machine']}. Server on CPU 0, client on CPU 1; ratios are ours / "
             f"baseline measured in the same run, median [min-max] over {args.pairs} "
             f"alternating pairs ({args.warmup} s warm-up + {args.duration} s per run), with the "
             "verdict the spread allows: faster/slower only when the whole spread is on one side "
             "of 1.00.", ""]
    for be, why in results["unavailable"].items():
        lines.append(f"- backend **{be}** not available here: {why}")
    if results["unavailable"]:
        lines.append("")
    for name, sec in results["sections"].items():
        lines += sec["lines"]
        if lines and lines[-1] != "":
            lines.append("")
        for title, png in sec.get("images", []):
            lines += [f"![{title}]({png})", ""]
        lines += [f"figures and method: docs/benchmarks/{STUDY_PAGE.get(name, name)}.md", ""]
    if FAILURES:
        lines += ["## Failures", ""] + [f"- {f}" for f in FAILURES] + [""]
    text = "\n".join(lines)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    return text


class Context:
    def __init__(self, args, backends, machine):
        self.args, self.backends, self.machine = args, backends, machine


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--full", action="store_true", help="5 pairs, 1 s warm-up + 5 s per run")
    ap.add_argument("--pairs", type=int, help="alternating pairs per figure (at least 3)")
    ap.add_argument("--sections", default=",".join(name for name, _ in SECTIONS))
    ap.add_argument("--file-dir", default="/var/tmp", help="a directory that supports O_DIRECT")
    args = ap.parse_args()
    requested_pairs = args.pairs
    args.pairs, args.warmup, args.duration = (5, 1.0, 5.0) if args.full else (3, 0.3, 1.0)
    if requested_pairs:
        args.pairs = max(3, requested_pairs)
    args.tcp_connections = [100, 1000, 10000]
    args.file_ops = 20000 if args.full else 5000
    args.latency_samples, args.latency_sample_ms, args.latency_warmup_ms = (
        (30, 5.0, 300.0) if args.full else (20, 3.0, 100.0))
    if not have(args.bin, "bench_server"):
        sys.exit(f"suite: {args.bin}/bench_server not found: build first (make build)")
    os.makedirs(args.out, exist_ok=True)

    backends, unavailable = [], {}
    for be in ("io_uring", "epoll"):
        ok, why = backend_available(args.bin, be)
        (backends.append(be) if ok else unavailable.__setitem__(be, why))
    print(f"backends here: {', '.join(backends)}"
          + (f" (unavailable: {unavailable})" if unavailable else ""))
    wanted = set(args.sections.split(","))
    unknown = wanted - {name for name, _ in SECTIONS}
    if unknown:
        sys.exit(f"suite: unknown section(s) {', '.join(sorted(unknown))}")
    machine = f"{platform.node()} {platform.release()} {os.cpu_count()} CPUs"
    ctx = Context(args, backends, machine)
    sections = {}
    for name, fn in SECTIONS:
        if name not in wanted:
            continue
        t0 = time.monotonic()
        print(f"== {name}", flush=True)
        sec = fn(ctx)
        if sec is not None:
            sec["images"] = render_plots(ctx, name, sec)
            sections[name] = sec
        print(f"== {name}: {time.monotonic() - t0:.0f} s", flush=True)
    results = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine,
        "unavailable": unavailable,
        "sections": sections,
    }
    print()
    print(write_report(args, results))
    print(f"\nreport: {os.path.join(args.out, 'report.md')}")
    if FAILURES:
        print(f"suite: {len(FAILURES)} failure(s)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
