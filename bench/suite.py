#!/usr/bin/env python3
"""The benchmark suite behind `make bench`: every tool on every backend the machine supports, each
against its hand-written baseline measured in the same run, in about a minute.

    python3 bench/suite.py --bin build/release/bin [--full] [--out bench/results]

Sections (each runs only if its binaries were built):
  tcp    bench_server (io_uring, epoll) vs raw_uring / raw_epoll, bench_client, 256 B,
         100 and 1000 connections; QPS, p99, server CPU per request, RSS per connection
  udp    bench_udp's server vs raw_udp (split mode, pinned apart): packets/s and loss
  files  bench_file_io --direct on io_uring vs epoll+libaio
  aio    aio_bench --compare: libaio vs io_uring engines, rand_read, QD32
  http   bench/http.py's short form: http_server (io_uring, epoll) vs nginx, Go, raw_http

Servers run on CPU 0 and clients on CPU 1 (see ../shared/benchmarking.md). The default is one
short alternating pair per figure (a smoke-sized run that works out of the box); --full runs the
method's 3 pairs of 1 s warm-up + 5 s. Writes report.md, suite.json and, when matplotlib is
installed, plots (PNG) to --out. Exits 1 if any run failed or reported an error.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import echo  # noqa: E402  (the TCP A/B harness)

FAILURES = []


def have(bindir, name):
    return os.access(os.path.join(bindir, name), os.X_OK)


def backend_available(bindir, backend):
    """Whether `backend` runs here: start bench_server on it and see if it listens."""
    port = echo.free_port()
    p = subprocess.Popen([os.path.join(bindir, "bench_server"), str(port), "--backend", backend],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ok = echo.wait_accepting(p, port, 5.0)
    err = "" if ok else (p.stderr.read() if p.poll() is not None else "did not start")
    echo.stop(p)
    return ok, err.strip()


def ratio_stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt_ratio(r):
    if r is None:
        return "n/a"
    return f"{r['median']:.3f}x [{r['min']:.3f}-{r['max']:.3f}]"


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
            with tempfile.TemporaryDirectory() as logdir:
                for pair in range(args.pairs):
                    for side, cmd in (("A", f"bench_server {{port}} --backend {be}"),
                                      ("B", f"{baseline[be]} {{port}}")):
                        rec = echo.run_one(h, side, cmd, "bench_client", conns, 256, logdir,
                                           pair * 2 + (side == "B"))
                        runs[side].append(rec)
                        tag = f"tcp {be} c={conns} {side}={echo.label_of(cmd)}"
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
                "qps_ratio": ratio_stats(qps),
                "cpu_us_per_req": med("A", "cpu_us_per_req"),
                "cpu_us_per_req_baseline": med("B", "cpu_us_per_req"),
                "cpu_ratio": ratio_stats(cpu),
                "p99_us": med("A", "p99_us"), "p99_us_baseline": med("B", "p99_us"),
                "rss_per_conn_b": med("A", "rss_per_conn_b"),
                "runs": runs,
            })
    return rows


def run_json(argv, timeout):
    """Run a tool with --json; returns (exit code, parsed object or None, stderr)."""
    try:
        cp = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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
        port = echo.free_port()
        srv = subprocess.Popen(["taskset", "-c", "0"] + echo.resolve(cmd, args.bin, port),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        if srv.poll() is not None:
            FAILURES.append(f"udp {label}: server exited: {srv.stderr.read().strip()}")
            continue
        argv = ["taskset", "-c", "1", os.path.join(args.bin, "bench_udp"), "client", "-h",
                "127.0.0.1", "-p", str(port), "--json"]
        rc, obj, err = run_json(argv, 120)
        echo.stop(srv)
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


def http_section(args):
    # bench/http.py, loaded under another name: `import http` would be the standard library's.
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "http_bench", os.path.join(os.path.dirname(os.path.abspath(__file__)), "http.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lines, result = mod.suite_section(args.bin, args.out, quick=not args.full)
    FAILURES.extend(f"http: {f}" for f in result["failures"])
    return {"lines": lines, "result": result}


def write_report(args, results):
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "suite.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    lines = [f"# galay-kernel benchmark suite — {results['date']}", "",
             f"Machine: {results['machine']}. Server on CPU 0, client on CPU 1; ratios are ours / "
             f"baseline measured in the same run (median [min-max] over {args.pairs} "
             f"alternating pair(s), {args.warmup} s warm-up + {args.duration} s).", ""]
    if results["unavailable"]:
        for be, why in results["unavailable"].items():
            lines.append(f"- backend **{be}** not available here: {why}")
        lines.append("")
    if results["tcp"]:
        lines += ["## TCP echo (bench_client, 256 B, pipeline 1)", "",
                  "| backend | conns | QPS | baseline QPS | QPS ratio | server CPU/req us | "
                  "baseline | CPU/req ratio (lower is better) | p99 us | RSS/conn |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in results["tcp"]:
            lines.append(
                f"| {r['backend']} vs {r['baseline']} | {r['connections']} | {r['qps']:,.0f} | "
                f"{r['qps_baseline']:,.0f} | {fmt_ratio(r['qps_ratio'])} | "
                f"{r['cpu_us_per_req']:.3f} | {r['cpu_us_per_req_baseline']:.3f} | "
                f"{fmt_ratio(r['cpu_ratio'])} | {r['p99_us']:.0f} | "
                f"{r['rss_per_conn_b']:,.0f} B |")
        lines.append("")
    if results["udp"]:
        lines += ["## UDP echo (bench_udp client: 100 clients x 1000 messages, 256 B, depth 10)",
                  "", "| server | received pkt/s | loss | errors |", "|---|---|---|---|"]
        for r in results["udp"]:
            pps = r.get("recv_pps", r.get("received_pps", 0)) or 0
            lines.append(f"| {r['server']} | {pps:,.0f} | {r.get('loss_rate')} | "
                         f"{r.get('errors')} |")
        lines.append("")
    if results["files"]:
        lines += ["## Files (bench_file_io --direct, 4 workers, 4 KiB, batch 8)", "",
                  "| backend | write IOPS | read IOPS | errors |", "|---|---|---|---|"]
        for r in results["files"]:
            lines.append(f"| {r['backend']} | {r.get('write_iops', 0):,.0f} | "
                         f"{r.get('read_iops', 0):,.0f} | {r.get('errors')} |")
        lines.append("")
    if results["aio"]:
        a = results["aio"]
        lines += ["## aio_bench --compare (rand_read, QD32, 4 KiB, O_DIRECT, 1 thread)", "",
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
        lines += ["", "io_uring vs libaio: " + ", ".join(
            f"{k} {v:+.1f}%" for k, v in d.items() if isinstance(v, (int, float))), ""]
    if results.get("http"):
        lines += results["http"]["lines"]
    if FAILURES:
        lines += ["## Failures", ""] + [f"- {f}" for f in FAILURES] + [""]
    plot = plot_tcp(args, results["tcp"])
    if plot:
        lines += [f"![TCP echo QPS]({os.path.basename(plot)})", ""]
    text = "\n".join(lines)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    return text


def plot_tcp(args, rows):
    if not rows:
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plots)")
        return None
    labels = [f"{r['backend']}\n{r['connections']} conns" for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(5, 1.8 * len(rows)), 4))
    ax.bar([i - 0.2 for i in x], [r["qps"] for r in rows], 0.4, label="galay bench_server")
    ax.bar([i + 0.2 for i in x], [r["qps_baseline"] for r in rows], 0.4,
           label="hand-written baseline")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    ax.set_ylabel("requests/s (256 B echo)")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(args.out, "tcp_qps.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--full", action="store_true", help="3 pairs, 1 s warm-up + 5 s per run")
    ap.add_argument("--sections", default="tcp,udp,files,aio,http")
    ap.add_argument("--file-dir", default="/var/tmp", help="a directory that supports O_DIRECT")
    args = ap.parse_args()
    args.pairs, args.warmup, args.duration = (3, 1.0, 5.0) if args.full else (1, 0.5, 2.0)
    args.tcp_connections = [100, 1000]
    args.file_ops = 20000 if args.full else 5000
    if not have(args.bin, "bench_server"):
        sys.exit(f"suite: {args.bin}/bench_server not found: build first (make build)")

    backends, unavailable = [], {}
    for be in ("io_uring", "epoll"):
        ok, why = backend_available(args.bin, be)
        (backends.append(be) if ok else unavailable.__setitem__(be, why))
    print(f"backends here: {', '.join(backends)}"
          + (f" (unavailable: {unavailable})" if unavailable else ""))
    sections = set(args.sections.split(","))
    results = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.release()} {os.cpu_count()} CPUs",
        "unavailable": unavailable,
        "tcp": tcp_section(args, backends) if "tcp" in sections else [],
        "udp": udp_section(args, backends) if "udp" in sections else [],
        "files": files_section(args, backends) if "files" in sections else [],
        "aio": aio_section(args) if "aio" in sections else None,
        "http": http_section(args) if "http" in sections else None,
    }
    print()
    print(write_report(args, results))
    print(f"\nreport: {os.path.join(args.out, 'report.md')}")
    if FAILURES:
        print(f"suite: {len(FAILURES)} failure(s)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
