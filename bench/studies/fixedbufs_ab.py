#!/usr/bin/env python3
"""What registered buffers and files buy on io_uring: alternating A/B pairs, ratios B/A.

    python3 bench/studies/fixedbufs_ab.py --pairs 4 --runtime 5   # aio_bench and bench_file_io

1. aio_bench, io_uring, 4 KiB O_DIRECT random reads at QD32 (by default) on one prepared file:
   A = plain, B = --fixedbufs --registerfiles (fio's io_uring options), both with -M. Per pair the
   ratios B/A of IOPS, of task-clock per I/O (the benchmark thread's CPU, perf software counter)
   and of process CPU per I/O (getrusage: includes io_uring's kernel workers).
2. bench_file_io --direct on io_uring (the library): A = plain, B = --fixed (fs::FixedBuffer).
   Per pair the ratios of write IOPS, read IOPS and CPU per operation (user+sys of the process,
   from wait4, over all operations).

The order alternates (A B, B A, ...). Printed per figure: the median ratio and its min-max over the
pairs, with the median absolute values. Runs are short (the machine is shared); the load average
and the I/O other processes did on the device during each run are printed with it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
ROOT = os.path.dirname(BENCH)
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (CPU accounting, spreads)
from file_io_ab import diskstats_ios  # noqa: E402


def run(cmd, dev):
    """Runs cmd; returns (parsed JSON of stdout, its user+sys CPU seconds, foreign device I/Os)."""
    before = diskstats_ios(dev)
    cpu0 = harness.children_cpu_s()
    p = children.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cpu = harness.children_cpu_s() - cpu0
    after = diskstats_ios(dev)
    if p.returncode != 0:
        sys.exit(f"fixedbufs_ab: failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return json.loads(p.stdout), cpu, (after - before) if before is not None else None


def summarize(name, pairs, keys):
    print(f"\n{name}: ratio B/A, median [min-max] over {len(pairs)} pairs; medians of A and B")
    out = {}
    for key, label in keys:
        ratios = [b[key] / a[key] for a, b in pairs]
        med, lo, hi = harness.median_min_max(ratios)
        am = statistics.median(a[key] for a, _ in pairs)
        bm = statistics.median(b[key] for _, b in pairs)
        print(f"  {label:34} {med:6.3f} [{lo:.3f}-{hi:.3f}]   "
              f"A {am:12.1f}   B {bm:12.1f}")
        out[key] = {"median": med, "min": lo, "max": hi, "a_median": am,
                    "b_median": bm, "ratios": ratios}
    return out


def aio_bench_pairs(args):
    dev = os.stat(os.path.dirname(os.path.abspath(args.file))).st_dev
    if not os.path.exists(args.file):
        print(f"creating {args.file} ({args.size}) with aio_bench seq_write ...", flush=True)
        mib = int(args.size.rstrip("gG")) * 1024 if args.size[-1] in "gG" else int(
            args.size.rstrip("mM"))
        children.run([args.aio_bench, "-f", args.file, "--size", args.size, "-p", "seq_write",
                      "-b", "1m", "-q", "4", "--ios", str(mib), "--keep", "--direct",
                      "--json"], check=True, stdout=subprocess.DEVNULL)
    base = [args.aio_bench, "-f", args.file, "--size", args.size, "-e", "io_uring", "-p",
            args.pattern, "--direct", "-q", str(args.depth), "-b", args.bs, "-r",
            str(args.runtime), "-M", "--json"]
    variants = {"A": base, "B": base + ["--fixedbufs", "--registerfiles"]}
    print("aio_bench A: " + " ".join(variants["A"]))
    print("aio_bench B: " + " ".join(variants["B"]))

    def measure(i, v, load):
        j, cpu, dio = run(variants[v], dev)
        ios = j["ops"]["total"]
        got = {"iops": j["iops"], "task_clock_ns_per_io": j["cpu"]["task_clock_ns_per_io"],
               "process_cpu_ns_per_io": j["cpu"]["process_cpu_ns_per_io"],
               "p99_us": j["latency_ns"]["p99"] / 1e3, "errors": j["errors"]}
        foreign = None if dio is None else max(0, dio - ios)
        print(f"  pair {i + 1} {v}: {j['iops']:9.0f} IOPS  task-clock "
              f"{got['task_clock_ns_per_io']:7.0f} ns/IO  process CPU "
              f"{got['process_cpu_ns_per_io']:7.0f} ns/IO  p99 {got['p99_us']:7.1f} us"
              f"  (load {load:.2f}, foreign device I/Os {foreign})", flush=True)
        return got

    pairs = alternating_pairs(args.pairs, measure)
    return summarize("aio_bench io_uring, B = --fixedbufs --registerfiles", pairs,
                     [("iops", "IOPS"), ("task_clock_ns_per_io", "task-clock per I/O (ns)"),
                      ("process_cpu_ns_per_io", "process CPU per I/O (ns)"),
                      ("p99_us", "p99 latency (us)")])


def alternating_pairs(n, measure):
    """n pairs of measure(i, "A"|"B", load average before the run), in the order AB, BA, AB, ..."""
    pairs = []
    for i in range(n):
        got = {}
        for v in ("AB" if i % 2 == 0 else "BA"):
            got[v] = measure(i, v, harness.loadavg())
        pairs.append((got["A"], got["B"]))
    return pairs


def file_io_pairs(args):
    dev = os.stat(args.dir).st_dev
    base = [args.bench_file_io, "--backend", "io_uring", "--direct", "-d", args.dir, "-w",
            str(args.workers), "-n", str(args.ops), "-b", "4096", "-batch", str(args.batch),
            "--json"]
    variants = {"A": base, "B": base + ["--fixed"]}
    print("\nbench_file_io A: " + " ".join(variants["A"]))
    print("bench_file_io B: " + " ".join(variants["B"]))

    def measure(i, v, load):
        j, cpu, dio = run(variants[v], dev)
        n = j["reads"] + j["writes"]
        if j["errors"] or (v == "B" and j["fixed_registered_workers"] != args.workers):
            sys.exit(f"fixedbufs_ab: bench_file_io {v}: errors or unregistered buffers: {j}")
        got = {"write_iops": j["write_iops"], "read_iops": j["read_iops"],
               "cpu_ns_per_op": cpu * 1e9 / n}
        print(f"  pair {i + 1} {v}: write {j['write_iops']:9.0f} IOPS  read "
              f"{j['read_iops']:9.0f} IOPS  CPU {got['cpu_ns_per_op']:7.0f} ns/op  "
              f"(load {load:.2f}, device I/Os {dio} for {n} ops)", flush=True)
        return got

    pairs = alternating_pairs(args.pairs, measure)
    return summarize("bench_file_io --direct io_uring, B = --fixed", pairs,
                     [("write_iops", "write IOPS"), ("read_iops", "read IOPS"),
                      ("cpu_ns_per_op", "CPU per operation (ns)")])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--aio-bench", default=os.path.join(ROOT, "build/release/bin/aio_bench"))
    ap.add_argument("--bench-file-io",
                    default=os.path.join(ROOT, "build/release/bin/bench_file_io"))
    ap.add_argument("--file", default="/var/tmp/aio_bench_fixedbufs.dat",
                    help="aio_bench test file on a disk filesystem (created and filled if missing)")
    ap.add_argument("--size", default="1g")
    ap.add_argument("--pattern", default="rand_read")
    ap.add_argument("--depth", type=int, default=32)
    ap.add_argument("--bs", default="4k")
    ap.add_argument("--runtime", type=float, default=5)
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--dir", default="/var/tmp", help="bench_file_io directory")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--skip-aio-bench", action="store_true")
    ap.add_argument("--skip-file-io", action="store_true")
    ap.add_argument("--json", help="write every run and ratio here")
    args = ap.parse_args()
    if args.runtime == int(args.runtime):
        args.runtime = int(args.runtime)
    out = {"args": vars(args)}
    t0 = time.time()
    if not args.skip_aio_bench:
        out["aio_bench"] = aio_bench_pairs(args)
    if not args.skip_file_io:
        out["bench_file_io"] = file_io_pairs(args)
    print(f"\n[{time.time() - t0:.0f} s]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
