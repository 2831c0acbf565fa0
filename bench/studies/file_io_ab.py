#!/usr/bin/env python3
"""A/B comparison of bench_file_io on epoll (+libaio) and io_uring, same settings, alternating.

    bench/studies/file_io_ab.py --bin build/release/bin/bench_file_io --dir /var/tmp --pairs 3 \
        --batch 1 8 [-- extra bench_file_io flags]

Runs `bench_file_io --direct --json` (unless --buffered) once per backend per pair, alternating
which backend goes first. For each pair it computes epoll/io_uring ratios of write IOPS, read
IOPS and overall IOPS (all operations / total duration), and prints per batch size the median
and the min-max of the ratios.

The machine is shared: the script reads /proc/diskstats of the directory's device around each
run and counts I/Os that were not ours. A run during which other processes did more than
--foreign-limit (default 10%) of our I/O count, or during which other work kept more than
--foreign-cores (default 0.5) cores busy (from /proc/stat minus our own CPU time; the kernel's
I/O completion work counts as foreign, hence the margin), is "contaminated": its pair is repeated (up to
--retries times) and, if still contaminated, reported with a mark.
"""
import argparse
import json
import os
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (CPU accounting, spreads)


def diskstats_ios(dev):
    major, minor = os.major(dev), os.minor(dev)
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if int(p[0]) == major and int(p[1]) == minor:
                return int(p[3]) + int(p[7])  # reads completed + writes completed
    return None


def run_once(args, backend, batch):
    cmd = [args.bin, "--backend", backend, "-d", args.dir, "-w", str(args.workers),
           "-n", str(args.ops), "-b", str(args.block), "-batch", str(batch), "--json"]
    if not args.buffered:
        cmd.append("--direct")
    cmd += args.extra
    dev = os.stat(args.dir).st_dev
    before = diskstats_ios(dev)
    busy0, ours0, t0 = harness.cpu_busy_s(), harness.children_cpu_s(), time.monotonic()
    out = children.run(cmd, capture_output=True, text=True)
    busy1, ours1, t1 = harness.cpu_busy_s(), harness.children_cpu_s(), time.monotonic()
    after = diskstats_ios(dev)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    j = json.loads(out.stdout)
    ours = j["reads"] + j["writes"]
    foreign = None if before is None else max(0, (after - before) - ours)
    j["foreign_ios"] = foreign
    # Cores kept busy by other processes (and by kernel threads, ours included) during the run.
    j["foreign_cores"] = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / (t1 - t0)
    j["contaminated"] = (foreign is not None and foreign > args.foreign_limit * ours) or \
        j["foreign_cores"] > args.foreign_cores
    j["total_iops"] = ours / j["duration_s"]
    return j


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bin/bench_file_io")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("-w", "--workers", type=int, default=4)
    ap.add_argument("-n", "--ops", type=int, default=1000)
    ap.add_argument("-b", "--block", type=int, default=4096)
    ap.add_argument("--buffered", action="store_true", help="without --direct")
    ap.add_argument("--foreign-limit", type=float, default=0.10)
    ap.add_argument("--foreign-cores", type=float, default=0.5,
                    help="a run is contaminated when other work kept this many cores busy")
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("--json", help="write every run and the summary to this file")
    ap.add_argument("extra", nargs="*", help="further bench_file_io flags (after --)")
    args = ap.parse_args()

    report = {"settings": vars(args), "batches": {}}
    for batch in args.batch:
        pairs = []
        for i in range(args.pairs):
            order = ["epoll", "io_uring"] if i % 2 == 0 else ["io_uring", "epoll"]
            for attempt in range(args.retries + 1):
                runs = {b: run_once(args, b, batch) for b in order}
                dirty = any(r["contaminated"] for r in runs.values())
                if not dirty or attempt == args.retries:
                    break
                time.sleep(2)
            e, u = runs["epoll"], runs["io_uring"]
            pair = {
                "epoll": e, "io_uring": u, "first": order[0], "contaminated": dirty,
                "write": e["write_iops"] / u["write_iops"],
                "read": e["read_iops"] / u["read_iops"],
                "total": e["total_iops"] / u["total_iops"],
            }
            pairs.append(pair)
            print(f"batch {batch} pair {i + 1} ({order[0]} first){' CONTAMINATED' if dirty else ''}:"
                  f" epoll W {e['write_iops']:,.0f} R {e['read_iops']:,.0f} all {e['total_iops']:,.0f}"
                  f" | io_uring W {u['write_iops']:,.0f} R {u['read_iops']:,.0f} all {u['total_iops']:,.0f}"
                  f" | ratio W {pair['write']:.3f} R {pair['read']:.3f} all {pair['total']:.3f}"
                  f" | foreign I/O {e['foreign_ios']}/{u['foreign_ios']}"
                  f" cores {e['foreign_cores']:.2f}/{u['foreign_cores']:.2f}", flush=True)
        s = {k: harness.median_min_max([p[k] for p in pairs]) for k in ("write", "read", "total")}
        report["batches"][batch] = {"pairs": pairs, "summary": s}
        print(f"batch {batch}: epoll/io_uring median (min-max) over {len(pairs)} pairs:"
              f" write {s['write'][0]:.3f} ({s['write'][1]:.3f}-{s['write'][2]:.3f}),"
              f" read {s['read'][0]:.3f} ({s['read'][1]:.3f}-{s['read'][2]:.3f}),"
              f" overall {s['total'][0]:.3f} ({s['total'][1]:.3f}-{s['total'][2]:.3f})\n",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
