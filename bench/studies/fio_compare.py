#!/usr/bin/env python3
"""Compare aio_bench with fio on the same job, in one invocation.

For every (engine, pattern, queue depth) it runs aio_bench and Debian's fio on the same file with the
same block size, depth, thread count, direct=1 and runtime, alternating which tool goes first
(A B, B A, ...), and prints per case the IOPS ratio aio_bench/fio and the p99 latency ratio, as the
median over the rounds with the min-max spread. Absolute numbers drift on a shared machine; the
ratios within one invocation are the figures to quote.

Latency: aio_bench measures from just before the submit syscall to just after the completion is
reaped, which is fio's "lat" (slat + clat), so fio runs with lat_percentiles=1 and its lat_ns
percentiles are compared. fio's clat p99 is kept in the JSON output too.

Both tools draw uniform random offsets with replacement (fio: norandommap=1, randrepeat=0).

Batching modes (--modes), compared like for like:
  fio-default  aio_bench's defaults against fio's defaults (iodepth_batch_submit=1,
               iodepth_batch_complete_max=1: one submit syscall and one reap per I/O; the k-th
               completion of a burst waits for the k-1 before it).
  batched      aio_bench --batch (refills submitted with one syscall, every ready completion
               reaped per wait) against fio with iodepth_batch_submit=QD and
               iodepth_batch_complete_max=QD, which makes fio do the same.
At QD1 both modes are the same job and run once (mode "qd1").

python3 standard library only. Example:
    python3 bench/studies/fio_compare.py --bin build/release/bin/aio_bench   # 5 s runs, 2 rounds
    python3 bench/studies/fio_compare.py --runtime 10 --rounds 3 --json results.json
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

# bench/harness (the shared modules) and bench/studies (the other studies), importable however
# the script is started; every study opens with these lines.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(BENCH, "harness"), os.path.join(BENCH, "studies")]
import children  # noqa: E402  (what it starts ends when it does)
import harness  # noqa: E402  (spreads)

FIO_RW = {"rand_read": "randread", "rand_write": "randwrite", "rand_rw": "randrw",
          "seq_read": "read", "seq_write": "write"}


def parse_size(s):
    s = s.strip().lower()
    mult = 1
    for suffix, m in (("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40)):
        if s.endswith(suffix):
            s, mult = s[:-1], m
            break
    return int(s) * mult


def fs_type(path):
    """Filesystem type of the mount holding path, from /proc/mounts (longest prefix)."""
    path = os.path.realpath(path)
    best, typ = "", "?"
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            mnt, t = parts[1], parts[2]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, typ = mnt, t
    return typ


def check_direct_dir(d):
    typ = fs_type(d)
    if typ in ("tmpfs", "ramfs"):
        sys.exit(f"fio_compare: {d} is on {typ}: no real O_DIRECT there; pick a disk filesystem "
                 f"with --file (e.g. /var/tmp)")
    probe = os.path.join(d, f".fio_compare_probe.{os.getpid()}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
        os.close(fd)
    except OSError as e:
        sys.exit(f"fio_compare: {d} ({typ}) does not support O_DIRECT: {e}")
    finally:
        if os.path.exists(probe):
            os.unlink(probe)
    return typ


NICE = []


def run(cmd, what):
    cmd = NICE + cmd
    p = children.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(f"fio_compare: {what} failed (exit {p.returncode}):\n  {' '.join(cmd)}\n"
                         f"{p.stderr}\n")
        sys.exit(1)
    return p.stdout


def run_aio(args, engine, pattern, depth, mode):
    cmd = [args.bin, "-f", args.file, "-e", engine, "-p", pattern, "-q", str(depth),
           "-t", str(args.threads), "-r", str(args.runtime), "-b", args.bs, "--size", args.size,
           "--direct", "--json", "--allow-overwrite"]
    if mode == "batched":
        cmd += ["--batch"]
    if engine == "io_uring":
        cmd += [f for f, on in (("--fixedbufs", args.fixedbufs),
                                ("--registerfiles", args.registerfiles)) if on]
    j = json.loads(run(cmd, "aio_bench"))
    return {"iops": j["iops"], "bw_mib_s": j["bandwidth_mib_s"],
            "lat_mean_us": j["latency_ns"]["mean"] / 1e3,
            "p50_us": j["latency_ns"]["p50"] / 1e3,
            "p99_us": j["latency_ns"]["p99"] / 1e3,
            "p999_us": j["latency_ns"]["p99.9"] / 1e3,
            "errors": j["errors"], "time_s": j["time_s"],
            "cpu_ns_per_io": j["cpu"]["process_cpu_ns_per_io"]}


def run_fio(args, engine, pattern, depth, mode):
    cmd = ["fio", "--name=fio_compare", f"--filename={args.file}", f"--size={args.size}",
           f"--ioengine={engine}", "--direct=1", f"--rw={FIO_RW[pattern]}", f"--bs={args.bs}",
           f"--iodepth={depth}", f"--numjobs={args.threads}", f"--runtime={args.runtime}",
           "--time_based=1", "--group_reporting=1", "--output-format=json", "--lat_percentiles=1",
           "--percentile_list=50:95:99:99.9", "--norandommap=1", "--randrepeat=0"]
    if mode == "batched":
        cmd += [f"--iodepth_batch_submit={depth}", f"--iodepth_batch_complete_max={depth}"]
    if engine == "io_uring":  # fio's io_uring engine options (after --ioengine)
        cmd += [f for f, on in (("--fixedbufs=1", args.fixedbufs),
                                ("--registerfiles=1", args.registerfiles)) if on]
    cmd += args.fio_extra
    out = run(cmd, "fio")
    j = json.loads(out[out.index("{"):])
    job = j["jobs"][0]
    if job.get("error"):
        sys.exit(f"fio_compare: fio reported error {job['error']}")
    d = job["write" if "write" in FIO_RW[pattern] else "read"]
    lat, clat = d["lat_ns"], d["clat_ns"]
    n = d["total_ios"] or 1
    return {"iops": d["iops"], "bw_mib_s": d["bw_bytes"] / 2**20,
            "lat_mean_us": lat["mean"] / 1e3,
            "p50_us": lat["percentile"]["50.000000"] / 1e3,
            "p99_us": lat["percentile"]["99.000000"] / 1e3,
            "p999_us": lat["percentile"]["99.900000"] / 1e3,
            "clat_p99_us": clat["percentile"]["99.000000"] / 1e3,
            "errors": job.get("total_err", 0), "time_s": job["job_runtime"] / 1e3,
            "cpu_ns_per_io": (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * job["job_runtime"] / 1e3
            * 1e9 / n}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(BENCH)
    ap.add_argument("--bin", default=os.path.join(root, "build/release/bin/aio_bench"))
    ap.add_argument("--file", default="/var/tmp/aio_bench_fio_compare.dat",
                    help="test file on a disk filesystem (created and filled if missing)")
    ap.add_argument("--size", default="1g")
    ap.add_argument("--bs", default="4k")
    ap.add_argument("--runtime", type=float, default=5, help="seconds per run (default 5)")
    ap.add_argument("--rounds", type=int, default=2, help="alternations per case (default 2)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--engines", default="libaio,io_uring")
    ap.add_argument("--patterns", default="rand_read,rand_write")
    ap.add_argument("--depths", default="1,32")
    ap.add_argument("--modes", default="fio-default,batched",
                    help="fio-default and/or batched (see above); QD1 runs once as 'qd1'")
    ap.add_argument("--json", help="write all runs and ratios to this file")
    ap.add_argument("--remove-file", action="store_true", help="delete the test file at the end")
    ap.add_argument("--nice", type=int, default=0,
                    help="run both tools under nice -n N (e.g. -10 to shield them from "
                         "compiles on a shared machine; 0 = as is)")
    ap.add_argument("--noise", action="store_true",
                    help="measure the noise floor instead: fio against fio, same table")
    ap.add_argument("--with-noise", action="store_true",
                    help="also run fio a second time in every round and print the fio/fio "
                         "ratios (the noise floor) under each case")
    ap.add_argument("--fio-extra", action="append", default=[], metavar="OPT",
                    help="one more fio option for every fio run, e.g. --fio-extra=--clocksource=cpu "
                         "(fio's TSC clock instead of clock_gettime); repeatable")
    ap.add_argument("--fixedbufs", action="store_true",
                    help="io_uring cases: registered buffers in both tools (aio_bench "
                         "--fixedbufs, fio --fixedbufs=1)")
    ap.add_argument("--registerfiles", action="store_true",
                    help="io_uring cases: registered file in both tools (aio_bench "
                         "--registerfiles, fio --registerfiles=1)")
    args = ap.parse_args()
    if args.nice:
        NICE[:] = ["nice", "-n", str(args.nice)]
    if args.runtime == int(args.runtime):
        args.runtime = int(args.runtime)

    if not os.access(args.bin, os.X_OK):
        sys.exit(f"fio_compare: {args.bin} not found; build with cmake --preset release && "
                 f"cmake --build --preset release")
    if children.run(["fio", "--version"], stdout=subprocess.PIPE).returncode != 0:
        sys.exit("fio_compare: fio not installed (apt-get install fio)")
    typ = check_direct_dir(os.path.dirname(os.path.abspath(args.file)) or ".")
    size = parse_size(args.size)
    if not os.path.exists(args.file):
        # Real data in every block: reads of unwritten extents never reach the disk.
        print(f"creating {args.file} ({args.size}, {typ}) with aio_bench seq_write ...", flush=True)
        run([args.bin, "-f", args.file, "--size", args.size, "-p", "seq_write", "-b", "1m",
             "-q", "4", "--ios", str(size >> 20), "--keep", "--direct", "--json"], "file creation")
    elif os.path.getsize(args.file) < size:
        sys.exit(f"fio_compare: {args.file} is smaller than --size {args.size}")

    modes = args.modes.split(",")
    for m in modes:
        if m not in ("batched", "fio-default"):
            sys.exit(f"fio_compare: unknown mode {m}")
    cases = []
    for e in args.engines.split(","):
        for p in args.patterns.split(","):
            for q in (int(x) for x in args.depths.split(",")):
                if q == 1:
                    cases.append((e, p, q, "qd1"))
                else:
                    cases += [(e, p, q, m) for m in modes]
    print(f"fio_compare: {len(cases)} cases x {args.rounds} rounds x "
          f"{3 if args.with_noise else 2} runs x {args.runtime} s, "
          f"bs {args.bs}, {args.threads} thread(s), direct, file {args.file} ({typ})"
          f"{''.join(', io_uring ' + o for o, on in (('fixedbufs', args.fixedbufs), ('registerfiles', args.registerfiles)) if on)}"
          f"{''.join(', fio ' + o for o in args.fio_extra)}"
          f"{', nice ' + str(args.nice) if args.nice else ''}", flush=True)
    results = []
    t0 = time.time()
    for engine, pattern, depth, mode in cases:
        runs = []
        for rnd in range(args.rounds):
            tools = ["aio", "fio", "fio2"] if args.with_noise else ["aio", "fio"]
            k = rnd % len(tools)
            order = tools[k:] + tools[:k] if rnd % 2 == 0 else (tools[k:] + tools[:k])[::-1]
            r = {}
            for tool in order:
                fn = run_aio if tool == "aio" and not args.noise else run_fio
                r[tool] = fn(args, engine, pattern, depth, mode)
            if args.with_noise:
                r["noise_iops_ratio"] = r["fio2"]["iops"] / r["fio"]["iops"]
                r["noise_p99_ratio"] = r["fio2"]["p99_us"] / r["fio"]["p99_us"]
            r["iops_ratio"] = r["aio"]["iops"] / r["fio"]["iops"]
            r["p99_ratio"] = r["aio"]["p99_us"] / r["fio"]["p99_us"]
            r["mean_ratio"] = r["aio"]["lat_mean_us"] / r["fio"]["lat_mean_us"]
            r["cpu_ratio"] = r["aio"]["cpu_ns_per_io"] / r["fio"]["cpu_ns_per_io"]
            runs.append(r)
            print(f"  {engine:8} {pattern:10} QD{depth:<3} {mode:11} round {rnd + 1}: "
                  f"aio {r['aio']['iops']:9.0f} IOPS p99 {r['aio']['p99_us']:8.1f} us | "
                  f"fio {r['fio']['iops']:9.0f} IOPS p99 {r['fio']['p99_us']:8.1f} us | "
                  f"ratio IOPS {r['iops_ratio']:.3f} p99 {r['p99_ratio']:.3f}"
                  + (f" | fio/fio {r['noise_iops_ratio']:.3f} {r['noise_p99_ratio']:.3f}"
                     if args.with_noise else ""), flush=True)
        results.append({"engine": engine, "pattern": pattern, "depth": depth, "mode": mode,
                        "runs": runs})

    if args.noise:
        print("\n--noise: the 'aio' column is a second fio run: these ratios are the noise floor")
    print(f"\nratios aio_bench / fio: median [interquartile range] (min-max) over {args.rounds} "
          f"alternated rounds; targets: IOPS within 3%, p99 within 10%  [{time.time() - t0:.0f} s]")
    hdr = (f"{'engine':8} {'pattern':10} {'QD':>3} {'mode':11} | {'aio IOPS':>8} {'fio IOPS':>8} "
           f"{'IOPS ratio':>31} | {'aio p99':>7} {'fio p99':>7} {'p99 ratio':>31} | "
           f"{'mean':>5} {'CPU/IO':>6} | ok")
    print(hdr)
    print("-" * len(hdr))
    summary = []
    for res in results:
        runs = res["runs"]
        iv = [r["iops_ratio"] for r in runs]
        pv = [r["p99_ratio"] for r in runs]
        im, ilo, ihi = harness.median_min_max(iv)
        pm, plo, phi = harness.median_min_max(pv)
        iq1, iq3 = harness.iqr(iv)
        pq1, pq3 = harness.iqr(pv)
        mm = statistics.median(r["mean_ratio"] for r in runs)
        cm = statistics.median(r["cpu_ratio"] for r in runs)
        ok = abs(im - 1) <= 0.03 and abs(pm - 1) <= 0.10
        aio_iops = statistics.median(r["aio"]["iops"] for r in runs)
        fio_iops = statistics.median(r["fio"]["iops"] for r in runs)
        aio_p99 = statistics.median(r["aio"]["p99_us"] for r in runs)
        fio_p99 = statistics.median(r["fio"]["p99_us"] for r in runs)
        print(f"{res['engine']:8} {res['pattern']:10} {res['depth']:>3} {res['mode']:11} | "
              f"{aio_iops:8.0f} {fio_iops:8.0f} {im:6.3f} [{iq1:.3f}-{iq3:.3f}] "
              f"({ilo:.3f}-{ihi:.3f}) | {aio_p99:7.0f} {fio_p99:7.0f} {pm:6.3f} "
              f"[{pq1:.3f}-{pq3:.3f}] ({plo:.3f}-{phi:.3f}) | {mm:5.3f} {cm:6.3f} | "
              f"{'yes' if ok else 'NO'}")
        noise = None
        if args.with_noise:
            nv = [r["noise_iops_ratio"] for r in runs]
            npv = [r["noise_p99_ratio"] for r in runs]
            nm, nlo, nhi = harness.median_min_max(nv)
            npm, nplo, nphi = harness.median_min_max(npv)
            nq1, nq3 = harness.iqr(nv)
            npq1, npq3 = harness.iqr(npv)
            print(f"{'':8} {'':10} {'':>3} {'fio/fio':11} | {'':8} {'':8} {nm:6.3f} "
                  f"[{nq1:.3f}-{nq3:.3f}] ({nlo:.3f}-{nhi:.3f}) | {'':7} {'':7} {npm:6.3f} "
                  f"[{npq1:.3f}-{npq3:.3f}] ({nplo:.3f}-{nphi:.3f}) |")
            noise = {"iops_ratio": {"median": nm, "q1": nq1, "q3": nq3, "min": nlo, "max": nhi},
                     "p99_ratio": {"median": npm, "q1": npq1, "q3": npq3, "min": nplo,
                                   "max": nphi}}
        summary.append({"engine": res["engine"], "pattern": res["pattern"], "depth": res["depth"],
                        "noise_floor": noise,
                        "mode": res["mode"],
                        "iops_ratio": {"median": im, "q1": iq1, "q3": iq3, "min": ilo, "max": ihi},
                        "p99_ratio": {"median": pm, "q1": pq1, "q3": pq3, "min": plo, "max": phi},
                        "mean_lat_ratio": mm, "cpu_per_io_ratio": cm, "within_target": ok})
    def pooled(key):
        logs = [math.log(r[key]) for res in results for r in res["runs"]]
        return math.exp(statistics.mean(logs)), math.exp(statistics.median(logs))
    overall = {"iops_ratio": pooled("iops_ratio"), "p99_ratio": pooled("p99_ratio")}
    line = (f"all {len(results)} cases pooled ({sum(len(r['runs']) for r in results)} rounds): "
            f"IOPS ratio geo-mean {overall['iops_ratio'][0]:.3f} median {overall['iops_ratio'][1]:.3f}"
            f"; p99 ratio geo-mean {overall['p99_ratio'][0]:.3f} median "
            f"{overall['p99_ratio'][1]:.3f}")
    if args.with_noise:
        overall["noise_iops_ratio"] = pooled("noise_iops_ratio")
        overall["noise_p99_ratio"] = pooled("noise_p99_ratio")
        line += (f"\n   fio/fio noise floor, same rounds: IOPS geo-mean "
                 f"{overall['noise_iops_ratio'][0]:.3f} median {overall['noise_iops_ratio'][1]:.3f}"
                 f"; p99 geo-mean {overall['noise_p99_ratio'][0]:.3f} median "
                 f"{overall['noise_p99_ratio'][1]:.3f}")
    print(line)
    print("(IOPS and p99 columns: medians over the rounds; p99 in us of fio's lat = slat + clat;\n"
          " mean: mean-latency ratio; CPU/IO: CPU time per I/O ratio, aio_bench process vs fio job)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "fs_type": typ, "summary": summary, "overall": overall,
                       "cases": results},
                      f, indent=2)
    if args.remove_file:
        os.unlink(args.file)


if __name__ == "__main__":
    main()
