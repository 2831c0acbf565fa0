#!/usr/bin/env python3
"""The foreign-library study: what driving a C library's own sockets from galay's loop costs, against
the same library on a hand-written loop (the floor), on a thread per call (what a user does
today) and, for PostgreSQL, Rust's tokio-postgres and Go's pgx.

    python3 bench/studies/foreign.py --bin build/release/bin [--rounds 5] [--quick]
                                     [--parts curl,pg,asyncfd] [--json OUT] [--data FILE]

Parts (each SKIPs in one line when a program, a toolchain or a server is missing, and the rest
goes on):
  curl     nginx on CPU 0 serving a 1,000-byte file; on CPU 1, 10,000 GETs (after 1,000 of
           warm-up) over 50 concurrent transfers, every body's size checked: galay_curl
           (libcurl's multi interface on galay's loop, io_uring and epoll) vs curl_multi_loop
           (curl multi on its own curl_multi_poll loop, the floor) vs raw_curl (curl multi's
           socket and timer callbacks on a hand-written epoll loop: what galay_curl does, with
           no galay code) vs curl_threads (50 threads each running curl_easy_perform). Client
           CPU per request, requests/s.
  pg       a real PostgreSQL (bench/harness/postgres.py) on CPU 0, clients on CPU 1,
           `SELECT $1::int` over 16 connections. single: one query in flight per connection,
           galay_pg (io_uring, epoll) vs raw_pg (the floor: libpq on a hand-written epoll loop)
           vs pg_threads (16 threads of blocking libpq). pipeline: 992 queries in flight on
           every client, galay_pg vs raw_pg in pipeline mode (sync groups of 62, one per
           connection, as pgx's batches) vs pg_tokio (tokio-postgres, 992 tasks) vs pg_pgx (pgx
           batches of 62). Client CPU per query, queries/s, and the server's CPU per query (a
           driver that makes the server work harder shows).
  asyncfd  bench_asyncfd on each backend: a socketpair ping-pong through AsyncFd + read/write
           against galay's native recv/send (its own alternating pairs).
Every contender runs once per round, the order turning from round to round; each ratio is taken
within a round and quoted as median [min-max] over the rounds, with a verdict against the
target the issue set (met: the whole spread is on the right side of it; not met: the whole
spread is on the wrong side; else undecided). --quick (what `make bench` runs) makes the runs
shorter. Prints the tables (markdown); --json writes every run and ratio; --data writes the
plot data of docs/benchmarks/data/foreign.json. Exit 1 when a run failed, 2 on a bad flag.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(BENCH, "harness"))
import children  # noqa: E402
import harness  # noqa: E402
import postgres  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, 1
BODY = 1000
TRANSFERS = 50
CONNECTIONS = 16
# Pipelined, every client keeps the same queries in flight, and the libpq clients in the sync
# groups of pgx's batches: 16 connections x 62. The group's size sets the server's CPU per query
# (a sync is a ReadyForQuery and a flush per group), and with the server's CPU the bottleneck
# that sets queries/s: at 16 per sync galay_pg and raw_pg cost the server ~5% more per query
# than pgx at 62, which was all of their queries/s gap (docs/benchmarks/foreign.md).
DEPTH = 62
INFLIGHT = CONNECTIONS * DEPTH  # 992

# (ratio, target): ours / theirs, lower is better, met when the whole spread is at or below it.
CURL_TARGETS = [("curl_multi_loop", 1.0), ("curl_threads", 0.5)]
PG_SINGLE_TARGETS = [("raw_pg", 1.05), ("pg_threads", 0.90)]
PG_PIPE_TARGETS = [("raw_pg", 1.10), ("pg_tokio", 1.0), ("pg_pgx", 1.0)]
ASYNCFD_TARGET = 1.3


def pinned(argv):
    return ["taskset", "-c", str(CLIENT_CPU)] + argv


def run_client(argv, timeout):
    """Runs one client with --json: its record (ok, problems, the JSON's figures)."""
    try:
        r = children.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "problems": [f"no answer within {timeout} s"]}
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "problems": [f"exit {r.returncode}: {r.stderr.strip()[-300:]}"]}
    rec = {"ok": r.returncode == 0 and not res.get("errors"), "problems": [], "json": res}
    if not rec["ok"]:
        rec["problems"].append(f"exit {r.returncode}, {res.get('errors')} errors: "
                               f"{res.get('first_error', '')}")
    return rec


def criterion(s, target):
    if s is None:
        return "no data"
    if s["max"] <= target:
        return f"met (<= {target:.2f}x)"
    if s["min"] > target:
        return f"not met (> {target:.2f}x)"
    return f"undecided (spread straddles {target:.2f}x)"


def ratio_rows(rounds, ours, targets, key, what):
    """Table rows and data of ours / each reference on `key`."""
    rows, data = [], []
    for ref, target in targets:
        for name in ours:
            if ref not in rounds[0] or name not in rounds[0]:
                continue
            s = harness.round_ratio(rounds, name, ref, key)
            verdict = criterion(s, target) if target else harness.verdict(
                s, lower_is_better=False, words=("more", "fewer"))
            rows.append(f"| {name} / {ref} | {what} | {harness.fmt_spread(s)} | {verdict} |")
            data.append({"ours": name, "ref": ref, "figure": what, "target": target,
                         "ratio": s and {k: s[k] for k in ("median", "min", "max")},
                         "verdict": verdict})
    return rows, data


def context_rows(rounds, refs, floor, keys):
    """Rows of each reference / the floor on each (key, figure, lower is better) of `keys` (no
    target: the verdict the spread allows), so that the table says what the references cost
    even where galay's program is missing."""
    rows = []
    for ref in refs:
        for key, what, lower in keys:
            if ref in rounds[0] and floor in rounds[0]:
                s = harness.round_ratio(rounds, ref, floor, key)
                words = ("less CPU", "more CPU") if lower else ("more", "fewer")
                rows.append(f"| {ref} / {floor} | {what} | {harness.fmt_spread(s)} | "
                            f"{harness.verdict(s, lower_is_better=lower, words=words)} |")
    return rows


def medians_table(rounds, names, cols):
    """| name | median of each column over the rounds |."""
    lines = ["| client | " + " | ".join(c[1] for c in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for n in names:
        cells = []
        for key, _, fmt in cols:
            v = harness.median_of([rd[n] for rd in rounds], key)
            cells.append("n/a" if v is None else format(v, fmt))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def start_nginx(tmp):
    nginx = harness.nginx_binary()
    if nginx is None:
        raise RuntimeError("no nginx (apt-get install nginx)")
    root = os.path.join(tmp, "www")
    os.makedirs(root, exist_ok=True)
    os.chmod(tmp, 0o755)
    with open(os.path.join(root, "k1.bin"), "wb") as f:
        f.write(bytes(ord("a") + i % 26 for i in range(BODY)))
    for _ in range(5):
        port = harness.free_port()
        conf = harness.nginx_static_conf(
            tmp, f"server {{ listen 127.0.0.1:{port}; root {root}; }}", connections=4096)
        try:
            proc = harness.start_pinned([nginx, "-p", tmp, "-c", conf], SERVER_CPU, None, port)
            return proc, f"http://127.0.0.1:{port}/k1.bin"
        except RuntimeError:
            continue
    raise RuntimeError("nginx found no free port in 5 attempts")


def curl_part(a, out):
    """galay_curl vs curl_multi_loop vs curl_threads against nginx."""
    requests, warmup = (2000, 500) if a.quick else (10000, 1000)
    lines = [f"## libcurl: {requests:,} GETs of {BODY:,} bytes over {TRANSFERS} concurrent "
             "transfers (nginx)", ""]
    have = lambda n: os.access(os.path.join(a.bin, n), os.X_OK)  # noqa: E731
    missing = [n for n in ("curl_multi_loop", "curl_threads") if not have(n)]
    if missing:
        return lines + [f"libcurl: {', '.join(missing)} not built, skipping (libcurl4-openssl-dev)",
                        ""]
    names = ["curl_multi_loop", "curl_threads"] + (["raw_curl"] if have("raw_curl") else [])
    if have("galay_curl"):
        names = [f"galay_curl {be}" for be in a.backends] + names
    else:
        lines += ["galay_curl: not built, skipping its rows (it is built with the examples)", ""]
    tmp = harness.temp_dir("foreign-nginx")
    server, url = start_nginx(tmp)
    try:
        def run(name, rnd):
            prog, *be = name.split()
            argv = [os.path.join(a.bin, prog), url, "--transfers", str(TRANSFERS), "--requests",
                    str(requests), "--warmup-requests", str(warmup), "--expect-bytes", str(BODY),
                    "--json"] + (["--backend", be[0]] if be else [])
            rec = run_client(pinned(argv), 300)
            j = rec.get("json") or {}
            rec["cpu_us"] = j.get("client_cpu_us_per_request")
            rec["rate"] = j.get("requests_per_s")
            return rec
        rounds, failed = harness.run_rounds(
            names, a.rounds, run, lambda n, r, rec: f"curl round {r}: {n} "
            f"{rec.get('cpu_us') or 0:.2f} us/request", rotate=True)
    finally:
        children.stop(server)
    ours = [n for n in names if n.startswith("galay_curl")]
    rows, data = ratio_rows(rounds, ours, CURL_TARGETS, "cpu_us", "client CPU/request")
    rate_rows, rate_data = ratio_rows(rounds, ours, [("curl_multi_loop", None)], "rate",
                                      "requests/s")
    lines += medians_table(rounds, names, [("cpu_us", "client CPU us/request", ".2f"),
                                           ("rate", "requests/s", ",.0f")])
    # raw_curl splits galay's share from libcurl's: its socket-callback protocol on a loop
    # with no galay code.
    context = context_rows(rounds, ours, "raw_curl", [("cpu_us", "client CPU/request", True)])
    context += context_rows(rounds, ["raw_curl", "curl_threads"], "curl_multi_loop",
                            [("cpu_us", "client CPU/request", True)])
    lines += ["", f"| ratio | figure | median [min-max], {a.rounds} rounds | verdict |",
              "|---|---|---|---|"] + rows + rate_rows + context + [""]
    out["curl"] = {"rounds": rounds, "ratios": data + rate_data, "failed": failed}
    return lines


def pg_controls(a, lines):
    """The Rust and Go controls, built here (cached after the first build): {name: path}."""
    found = {}
    path, why = harness.cargo_build(os.path.join(BENCH, "control", "tokio_postgres"), "pg_tokio")
    if path:
        found["pg_tokio"] = path
    else:
        lines += [f"pg_tokio: not built, skipping its rows ({why})", ""]
    path, why = harness.go_build(os.path.join(BENCH, "control", "go_pgx"),
                                 os.path.join(harness.temp_dir("foreign-go"), "pg_pgx"))
    if path:
        found["pg_pgx"] = path
    else:
        lines += [f"pg_pgx: not built, skipping its rows ({why})", ""]
    return found


def pg_part(a, out):
    lines = ["## PostgreSQL: `SELECT $1::int` over 16 connections", ""]
    progs = {n: os.path.join(a.bin, n) for n in ("galay_pg", "raw_pg", "pg_threads")
             if os.access(os.path.join(a.bin, n), os.X_OK)}
    if "raw_pg" not in progs:
        return lines + ["PostgreSQL: raw_pg not built, skipping (libpq-dev)", ""]
    if "galay_pg" not in progs:
        lines += ["galay_pg not built, skipping its rows", ""]
    progs.update(pg_controls(a, lines))
    duration, warmup = ("1", "0.3") if a.quick else ("3", "1")
    try:
        server = postgres.Server(cpu=SERVER_CPU)
    except postgres.Unavailable as e:
        return lines + [f"PostgreSQL: no server, skipping ({e})", ""]
    result = {}
    with server as pg:
        for mode in ("single", "pipeline"):
            names = []
            if "galay_pg" in progs:
                names += [f"galay_pg {be}" for be in a.backends]
            names += ["raw_pg"] + (["pg_threads"] if mode == "single" else [])
            if mode == "pipeline":
                names += [n for n in ("pg_tokio", "pg_pgx") if n in progs]
            names = [n for n in names if n.split()[0] in progs]

            def run(name, rnd, mode=mode):
                prog, *be = name.split()
                argv = [progs[prog], "--conninfo", pg.url(), "--connections", str(CONNECTIONS),
                        "--duration", duration, "--warmup", warmup, "--json"]
                argv += ["--backend", be[0]] if be else []
                if mode == "pipeline":
                    argv += ["--mode", "pipeline"]
                    argv += [] if prog == "pg_pgx" else ["--inflight", str(INFLIGHT)]
                    argv += [] if prog == "pg_tokio" else ["--depth", str(DEPTH)]
                before = pg.cpu_s()
                rec = run_client(pinned(argv), 120)
                pg.wait_no_backends()
                j = rec.get("json") or {}
                rec["cpu_us"] = j.get("client_cpu_us_per_query")
                rec["rate"] = j.get("queries_per_s")
                if j.get("total_queries"):
                    rec["server_us"] = (pg.cpu_s() - before) * 1e6 / j["total_queries"]
                return rec
            rounds, failed = harness.run_rounds(
                names, a.rounds, run, lambda n, r, rec, m=mode: f"pg {m} round {r}: {n} "
                f"{rec.get('cpu_us') or 0:.2f} us/query", rotate=True)
            ours = [n for n in names if n.startswith("galay_pg")]
            targets = PG_SINGLE_TARGETS if mode == "single" else PG_PIPE_TARGETS
            rows, data = ratio_rows(rounds, ours, targets, "cpu_us", "client CPU/query")
            refs = [(r, None) for r, _ in targets if r != "pg_threads"]
            r2, d2 = ratio_rows(rounds, ours, refs, "rate", "queries/s")
            r3, d3 = ratio_rows(rounds, ours, refs, "server_us", "server CPU/query")
            title = ("one query in flight per connection" if mode == "single" else
                     f"pipeline mode, {INFLIGHT} queries in flight (libpq, pgx: {DEPTH} per sync)")
            lines += [f"### {title}", ""]
            lines += medians_table(rounds, names,
                                   [("cpu_us", "client CPU us/query", ".2f"),
                                    ("rate", "queries/s", ",.0f"),
                                    ("server_us", "server CPU us/query", ".2f")])
            context = context_rows(
                rounds, [n for n in names if not n.startswith("galay_pg") and n != "raw_pg"],
                "raw_pg", [("cpu_us", "client CPU/query", True), ("rate", "queries/s", False),
                           ("server_us", "server CPU/query", True)])
            lines += ["", f"| ratio | figure | median [min-max], {a.rounds} rounds | verdict |",
                      "|---|---|---|---|"] + rows + r2 + r3 + context + [""]
            result[mode] = {"rounds": rounds, "ratios": data + d2 + d3, "failed": failed}
    out["pg"] = result
    return lines


def asyncfd_part(a, out):
    lines = ["## AsyncFd: socketpair ping-pong, AsyncFd + read/write / native recv/send", ""]
    prog = os.path.join(a.bin, "bench_asyncfd")
    if not os.access(prog, os.X_OK):
        return lines + ["AsyncFd: bench_asyncfd not built, skipping", ""]
    rounds = "20000" if a.quick else "50000"
    lines += [f"| backend | CPU per round trip, median [min-max], {a.rounds} pairs | verdict | "
              "round trips/s |", "|---|---|---|---|"]
    result = {}
    for be in a.backends:
        r = children.run([prog, "--backend", be, "--pin", "--pairs", str(a.rounds), "--rounds",
                          rounds, "--json"], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            lines.append(f"| {be} | failed: {r.stderr.strip()[-200:]} | | |")
            result[be] = {"failed": r.stderr.strip()[-300:]}
            continue
        j = json.loads(r.stdout)
        cpu = j["ratio_asyncfd_over_native"]["cpu"]
        rate = j["ratio_asyncfd_over_native"]["round_trips_s"]
        lines.append(f"| {be} | {harness.fmt_spread(cpu)} | {criterion(cpu, ASYNCFD_TARGET)} | "
                     f"{harness.fmt_spread(rate)} |")
        result[be] = j
    out["asyncfd"] = result
    return lines + [""]


def plot_data(out, source):
    """docs/benchmarks/data/foreign.json: one plot of client CPU ratios (the README's row)."""
    xs, series = [], {}
    def add(x, ratios, figure="client CPU"):
        for r in ratios:
            if r["ratio"] is None or not r["figure"].startswith(figure):
                continue
            label = "galay " + r["ours"].split()[-1]  # the backend
            if x(r) not in xs:
                xs.append(x(r))
            series.setdefault(label, {})[x(r)] = r["ratio"]
    if "curl" in out:
        add(lambda r: f"libcurl / {r['ref']}", out["curl"]["ratios"])
    for mode, res in out.get("pg", {}).items():
        add(lambda r, m=mode: f"pg {m} / {r['ref']}", res["ratios"])
    for be, j in out.get("asyncfd", {}).items():
        if "ratio_asyncfd_over_native" in j:
            if "AsyncFd ping-pong / native" not in xs:
                xs.append("AsyncFd ping-pong / native")
            s = j["ratio_asyncfd_over_native"]["cpu"]
            series.setdefault(f"galay {be}", {})["AsyncFd ping-pong / native"] = s
    plot = {"name": "foreign_cpu_ratios",
            "title": "Foreign libraries on galay's loop: client CPU, galay / reference "
                     "(lower is better)",
            "x_label": "figure", "y_label": "ratio (galay / reference)", "x": xs,
            "log_x": False, "reference": 1.0,
            "series": [{"label": label,
                        "median": [round(v[x]["median"], 3) if x in v else None for x in xs],
                        "min": [round(v[x]["min"], 3) if x in v else None for x in xs],
                        "max": [round(v[x]["max"], 3) if x in v else None for x in xs]}
                       for label, v in series.items()]}
    return {"study": "foreign", "source": source, "plots": [plot]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True, help="the release build's bin directory")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (at least 1)")
    p.add_argument("--quick", action="store_true", help="shorter runs (make bench)")
    p.add_argument("--parts", default="curl,pg,asyncfd", help="curl, pg, asyncfd")
    p.add_argument("--backends", default="io_uring,epoll", help="galay's backends to run")
    p.add_argument("--json", help="write every run and ratio here")
    p.add_argument("--data", help="write the plot data (docs/benchmarks/data/foreign.json)")
    a = p.parse_args()
    parts = a.parts.split(",")
    if a.rounds < 1 or any(x not in ("curl", "pg", "asyncfd") for x in parts):
        p.error("--rounds must be >= 1 and --parts a list of curl, pg, asyncfd")
    a.backends = a.backends.split(",")
    if any(b not in ("io_uring", "epoll") for b in a.backends):
        p.error("--backends: io_uring, epoll")
    harness.raise_nofile()
    out = {"load_before": harness.loadavg()}
    lines = []
    for part, fn in (("curl", curl_part), ("pg", pg_part), ("asyncfd", asyncfd_part)):
        if part in parts:
            lines += fn(a, out)
            print("\n".join(lines), flush=True)
            lines = []
    out["load_after"] = harness.loadavg()
    print(f"load: {out['load_before']:.2f} before, {out['load_after']:.2f} after")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    if a.data:
        source = (f"python3 bench/studies/foreign.py --rounds {a.rounds}"
                  f"{' --quick' if a.quick else ''} (server CPU 0, clients CPU 1); "
                  "2 shared cores, kernel 6.18, Debian 12")
        with open(a.data, "w") as f:
            json.dump(plot_data(out, source), f, indent=1)
    failed = any(v.get("failed") for k, v in out.items() if k == "curl") or any(
        m.get("failed") for m in out.get("pg", {}).values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
