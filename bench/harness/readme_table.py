#!/usr/bin/env python3
"""Writes the README's Results table from the benchmark pages' data, docs/benchmarks/data/*.json,
so that a figure has one source: re-measuring a study updates its data file, and this script
carries the headline into the README.

    python3 bench/harness/readme_table.py [--check] [--data DIR] [--readme FILE]

STUDIES below lists every study, in the table's order, with the figures its row shows: each
names the plot, the series and the x value of its data file (the schema of
bench/harness/plot_pages.py), so the headline is chosen here, not guessed. A study with no
figures listed gets its link and no figure. The table replaces whatever stands between the two
marker lines (BEGIN, END) in the README.

--check   writes nothing: exit 0 when the README's table is what the data gives, else print the
          difference and exit 1 (ctest runs this, so the README and the data cannot drift).
Exits 1, with one line saying which file and field, when a data file is missing, unreadable or
does not hold a figure the table names, when a data file's study is not in STUDIES, or when the
README lacks the markers; exits 2 on a bad flag.
"""
import argparse
import difflib
import json
import numbers
import os
import sys
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROG = "readme_table.py"

BEGIN = "<!-- results table: written by bench/harness/readme_table.py from docs/benchmarks/data -->"
END = "<!-- end of results table -->"

LESS_CPU = ("less CPU", "more CPU")  # the verdict when the whole spread is below / above 1.00
TIME = ("faster", "slower")          # a ratio of times: below 1.00 is faster
RATE = ("slower", "faster")          # a ratio of rates: above 1.00 is faster
EFFICIENCY = ("less efficient", "more efficient")
IOPS = ("fewer IOPS", "more IOPS")


class Figure(NamedTuple):
    label: str      # what the cell calls the figure
    plot: str       # the plot's "name" in the data file
    series: str     # the series' "label"
    x: object       # the value in the plot's "x"
    words: tuple    # (whole spread below 1.00, whole spread above 1.00)


class Study(NamedTuple):
    name: str       # the table's first column
    page: str       # docs/benchmarks/<page>.md; its data file is data/<page>.json
    headline: str   # what the figures are
    figures: list   # empty: a link and no figure


STUDIES = [
    Study("TCP echo", "echo",
          "server CPU per request, galay / hand-written loop, 256 B, 1,000 connections", [
              Figure("io_uring", "echo_cpu_per_request_ratio", "galay io_uring / raw liburing",
                     1000, LESS_CPU),
              Figure("epoll", "echo_cpu_per_request_ratio", "galay epoll / raw epoll", 1000,
                     LESS_CPU)]),
    Study("UDP echo", "udp", "server efficiency (datagrams per server CPU), galay io_uring / a "
          "`recvmmsg` loop", [
              Figure("offloads on (galay's default)", "udp_ratios", "galay io_uring",
                     "efficiency, offloads on", EFFICIENCY),
              Figure("no offloads on either side", "udp_ratios", "galay io_uring",
                     "efficiency, no offloads", EFFICIENCY)]),
    Study("Files", "files", "IOPS, aio_bench / fio, 4 KiB direct random read, QD32", [
              Figure("io_uring", "files_aio_vs_fio", "fio default clock", "io_uring read QD32",
                     IOPS),
              Figure("libaio", "files_aio_vs_fio", "fio default clock", "libaio read QD32",
                     IOPS)]),
    Study("Latency", "latency", "time per 100 B round trip (one at a time), galay / Tokio", [
              Figure("io_uring", "latency_vs_tokio", "galay io_uring", "network_latency_100B",
                     TIME),
              Figure("epoll", "latency_vs_tokio", "galay epoll", "network_latency_100B", TIME)]),
    Study("Connection churn", "churn",
          "server CPU per connection (connect, one round trip, close), galay / hand-written loop", [
              Figure("io_uring", "churn_ratios", "galay io_uring / raw_uring",
                     "server CPU per connection", LESS_CPU),
              Figure("epoll", "churn_ratios", "galay epoll / raw_epoll",
                     "server CPU per connection", LESS_CPU)]),
    Study("HTTP", "http", "server CPU per request, galay io_uring, GET /, 1,000 connections", [
              Figure("/ nginx", "http_cpu_ratios", "io_uring / nginx", "GET / 1,000", LESS_CPU),
              Figure("/ Go", "http_cpu_ratios", "io_uring / Go", "GET / 1,000", LESS_CPU),
              Figure("/ a hand-written epoll responder", "http_cpu_vs_raw_http",
                     "galay io_uring", "1,000", LESS_CPU),
              # The page's three runs of one build at 1,000 connections: the gap moves with the
              # machine, so the row shows the latest of them beside the full run's figure.
              Figure("the same, the latest of three runs of one build", "http_raw_gap",
                     "galay io_uring", "run 3", LESS_CPU)]),
    Study("Sync", "sync", "`Channel` between two workers", [
              Figure("ping-pong p50 / eventfd (the floor)", "sync_ratios", "galay",
                     "ping-pong p50 / eventfd", TIME),
              Figure("throughput, 1 producer / Tokio mpsc", "sync_ratios", "galay",
                     "throughput 1P / Tokio", RATE)]),
    Study("Multi-core", "multicore",
          "echo speed-up at 8 workers over 1, 16-core VM, median of 2 rounds", [
              Figure("galay io_uring", "multicore_speedup", "galay io_uring", 8, RATE),
              Figure("hand-written liburing", "multicore_speedup", "hand-written liburing", 8,
                     RATE)]),
    Study("TLS", "tls", "server CPU per unit of work, galay io_uring / reference", [
              Figure("HTTPS request, 100 connections / nginx", "tls_ratios", "galay io_uring",
                     "HTTPS 100 conns / nginx", LESS_CPU),
              Figure("/ Go", "tls_ratios", "galay io_uring", "HTTPS 100 conns / Go", LESS_CPU),
              Figure("full handshake / nginx", "tls_ratios", "galay io_uring",
                     "full handshake / nginx", LESS_CPU),
              Figure("TLS proxy byte / raw OpenSSL", "tls_ratios", "galay io_uring",
                     "TLS proxy 16 KiB / raw OpenSSL", LESS_CPU)]),
    Study("Local resources", "local", "Unix stream echo against an epoll loop, filesystem "
          "metadata on io_uring ops, spawn + wait against posix_spawn and Tokio", []),
    Study("Relay", "relay", "TCP proxies at 64 KiB-1 MiB: splicing and copying against Tokio "
          "and a hand-written splice relay; idle relays", []),
    Study("Static files", "static", "sendfile against nginx, on loopback and over veth", []),
    Study("Foreign libraries", "foreign",
          "client CPU per request on galay's loop: libcurl's multi interface / its own "
          "`curl_multi_poll` loop (10,000 GETs, 50 transfers); libpq pipelined / a hand-written "
          "epoll loop and / tokio-postgres; AsyncFd ping-pong / native", [
              Figure("libcurl, io_uring", "foreign_cpu_ratios", "galay io_uring",
                     "libcurl / curl_multi_loop", LESS_CPU),
              Figure("libpq pipelined / raw_pg, io_uring", "foreign_cpu_ratios",
                     "galay io_uring", "pg pipeline / raw_pg", LESS_CPU),
              Figure("libpq pipelined / tokio-postgres, io_uring", "foreign_cpu_ratios",
                     "galay io_uring", "pg pipeline / pg_tokio", LESS_CPU),
              Figure("AsyncFd, io_uring", "foreign_cpu_ratios", "galay io_uring",
                     "AsyncFd ping-pong / native", LESS_CPU),
              Figure("AsyncFd, epoll", "foreign_cpu_ratios", "galay epoll",
                     "AsyncFd ping-pong / native", LESS_CPU)]),
    Study("Key-value", "kv",
          "server CPU per request, mini_redis / redis-server, redis-benchmark, 50 connections", [
              Figure("io_uring GET -P 1", "kv_cpu_ratios", "mini_redis io_uring / redis-server",
                     "GET -P 1", LESS_CPU),
              Figure("io_uring GET -P 16", "kv_cpu_ratios", "mini_redis io_uring / redis-server",
                     "GET -P 16", LESS_CPU),
              Figure("epoll GET -P 16", "kv_cpu_ratios", "mini_redis epoll / redis-server",
                     "GET -P 16", LESS_CPU)]),
    Study("Observability", "observability",
          "what metrics, task hooks and zero-copy send's support cost an echo server", []),
]


class DataError(Exception):
    """A data file or README that cannot give the table: the message names the file and field."""


def load(data_dir, study):
    path = os.path.join(data_dir, f"{study.page}.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise DataError(f"{path}: missing (the README's {study.name} row reads it)") from None
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("plots"), list):
        raise DataError(f"{path}: no 'plots' list")
    if data.get("study") != study.page:
        raise DataError(f"{path}: 'study' is {data.get('study')!r}, expected {study.page!r}")
    return path, data


def _number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def value(path, data, fig):
    """(median, min, max) of one figure; min and max are None where the data kept no spread."""
    plot = next((p for p in data["plots"] if isinstance(p, dict) and p.get("name") == fig.plot),
                None)
    if plot is None:
        raise DataError(f"{path}: no plot named {fig.plot!r}")
    xs = plot.get("x")
    if not isinstance(xs, list) or fig.x not in xs:
        raise DataError(f"{path}: plot {fig.plot!r} has no x value {fig.x!r}")
    i = xs.index(fig.x)
    series = next((s for s in plot.get("series") or [] if isinstance(s, dict)
                   and s.get("label") == fig.series), None)
    if series is None:
        raise DataError(f"{path}: plot {fig.plot!r} has no series {fig.series!r}")
    where = f"{path}: plot {fig.plot!r}, series {fig.series!r}, x {fig.x!r}"
    picked = []
    for key in ("median", "min", "max"):
        column = series.get(key)
        if column is None and key != "median":
            picked.append(None)
            continue
        if not isinstance(column, list) or len(column) != len(xs):
            raise DataError(f"{where}: '{key}' is not a list as long as 'x'")
        if column[i] is not None and not _number(column[i]):
            raise DataError(f"{where}: '{key}' is {column[i]!r}, not a number")
        picked.append(column[i])
    med, lo, hi = picked
    if med is None:
        raise DataError(f"{where}: no median")
    if (lo is None) != (hi is None):
        raise DataError(f"{where}: a min without a max or a max without a min")
    if lo is not None and not lo <= med <= hi:
        raise DataError(f"{where}: median {med} is not within [{lo}, {hi}]")
    return med, lo, hi


def decimals(*values):
    """As many decimals as the data carries (2 or 3), so 0.8 next to 0.79 prints as 0.80."""
    places = 2
    for v in values:
        if v is not None:
            text = repr(float(v))
            if "e" not in text:
                places = max(places, len(text.split(".")[1].rstrip("0")))
    return min(places, 3)


def fmt(med, lo, hi, words):
    """'1.008x [0.792-1.320] level'; a verdict only when the whole spread is on one side of 1."""
    d = decimals(med, lo, hi)
    if lo is None:
        return f"{med:.{d}f}x (no spread kept)"
    below, above = words
    verdict = below if hi < 1.0 else above if lo > 1.0 else "level"
    return f"{med:.{d}f}x [{lo:.{d}f}-{hi:.{d}f}] {verdict}"


def table(data_dir, studies=STUDIES):
    """The table's lines (markers included), or DataError."""
    listed = {s.page for s in studies}
    try:
        present = sorted(f[:-5] for f in os.listdir(data_dir) if f.endswith(".json"))
    except OSError as e:
        raise DataError(f"{data_dir}: {e.strerror}") from None
    for page in present:
        if page not in listed:
            raise DataError(f"{os.path.join(data_dir, page + '.json')}: study {page!r} is not in "
                            f"STUDIES of bench/harness/readme_table.py: give it a row")
    lines = [BEGIN, "| study | figure | median [min-max] over the rounds | page |",
             "|---|---|---|---|"]
    for s in studies:
        link = f"[{s.page}.md](docs/benchmarks/{s.page}.md)"
        if not s.figures:
            lines.append(f"| {s.name} | {s.headline} | on the page | {link} |")
            continue
        path, data = load(data_dir, s)
        cells = [f"{f.label} {fmt(*value(path, data, f), f.words)}" for f in s.figures]
        lines.append(f"| {s.name} | {s.headline} | {'; '.join(cells)} | {link} |")
    lines.append(END)
    return lines


def rewrite(readme_text, lines, readme_path):
    """The README with the block between the markers replaced by `lines`."""
    old = readme_text.split("\n")
    begins = [i for i, line in enumerate(old) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(old) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise DataError(f"{readme_path}: needs one line '{BEGIN}' and, after it, one line "
                        f"'{END}' where the table goes")
    return "\n".join(old[:begins[0]] + lines + old[ends[0] + 1:])


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, as every tool of the repository does
        print(f"{PROG}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    ap = Parser(prog=PROG, description=__doc__.split("\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 with the difference if the README is stale")
    ap.add_argument("--data", default=os.path.join(ROOT, "docs", "benchmarks", "data"),
                    help="directory of the <study>.json files (default: %(default)s)")
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"),
                    help="the README to write or check (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        with open(args.readme, encoding="utf-8") as f:
            current = f.read()
    except OSError as e:
        print(f"{PROG}: error: {args.readme}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        wanted = rewrite(current, table(args.data), args.readme)
    except DataError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    if wanted == current:
        return 0
    if args.check:
        sys.stdout.writelines(difflib.unified_diff(
            current.splitlines(True), wanted.splitlines(True), args.readme,
            args.readme + " (from the data)"))
        print(f"{PROG}: {args.readme}: the Results table is stale: run python3 "
              f"bench/harness/readme_table.py", file=sys.stderr)
        return 1
    with open(args.readme, "w", encoding="utf-8") as f:
        f.write(wanted)
    print(f"{args.readme}: Results table written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
